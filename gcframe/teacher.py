"""A teacher: another model whose view of the student's own tokens is a data column, as π_ref's is.

On-policy distillation (methods/opd.py) trains on the student's samples with the teacher's log-probability of each
sampled token beside them; sequence-level distillation (methods/sft_teacher.py) imitates the teacher's completions.
Either way the teacher is a Hugging Face model folder (`methods.<name>.teacher`), or on the tiny model `clean_base`
(CLEAN_BASE), loaded once per run, frozen, in the run's dtype, and it must share the student's tokenizer: the same
token ids mean the same strings, so that log π_T(o_t | q, o_<t) is the teacher's probability of the very token the
student sampled.

    teacher_path(value, label)          the folder, checked before anything trains (a one-line UserError)
    clean_base(cfg, accelerator)        CLEAN_BASE's folder: stage 1 on the exact annotator's demonstrations, cached
    check_tokenizer(path, tok, ...)     the teacher's tokenizer and vocabulary equal the student's, or one line
    load_teacher(ctx, path)             the frozen teacher, once per run (ctx's frozen models)
    teacher_columns(teacher, ...)       log π_T(o_t) [N, T] and, for vOPD's baseline, KL(π_θ ‖ π_T) per position
    WithTeacher                         a method's checks and loading of its `teacher` option, written once
"""
from __future__ import annotations

import os

import torch

from gcframe.batch import Batch
from gcframe.engine import position_ids
from gcframe.errors import UserError


CLEAN_BASE = "clean_base"
"""`teacher: clean_base`, the toy's teacher: the tiny Llama's stage 1 trained again, same model, seed and problems,
on demonstrations written by the exact annotator (task.demo_slip and task.demo_noise 0), cached with the SFT bases
(gcframe.pipeline.sft_base, its own key). Its information is the clean annotator's, the information `sft_clean`
imitates, so a distillation arm against `sft_clean` varies how that information is delivered (a model's dense
per-token judgement, or its demonstrations), and against `sft_filtered` who supplies it (a teacher, or the checker)."""


def _clean(cfg):
    """The run's config with the exact annotator: task.demo_slip and task.demo_noise 0, the rest as it is."""
    import dataclasses

    return dataclasses.replace(cfg, task=dataclasses.replace(cfg.task, demo_slip=0.0, demo_noise=0.0))


def clean_base(cfg, accelerator, label: str = "opd", show_progress: bool = True):
    """(folder, info) of the clean annotator's SFT base for this run's config (CLEAN_BASE), trained on first use."""
    import copy

    from gcframe import pipeline

    if cfg.model.path:
        raise UserError(f"methods.{label}.teacher: {CLEAN_BASE} trains the tiny Llama on clean demonstrations, and "
                        f"this run starts from a pretrained model ({cfg.model.path}): give the teacher's model folder")
    clean, task = pipeline.prepare(copy.deepcopy(_clean(cfg)))  # prepare may resolve sections in place
    return pipeline.sft_base(clean, task, accelerator, show_progress)


def clean_base_dir(cfg) -> str:
    """The cached folder of this config's CLEAN_BASE, trained by the runs that distilled it, or a one-line UserError
    (the re-scoring scores the teacher as a reference and trains nothing)."""
    from gcframe import pipeline
    from gcframe.tracking.log import cache_root

    d = cache_root() / "sft_base" / pipeline.base_key(_clean(cfg))
    if not (d / "base_info.json").is_file():
        raise UserError(f"the teacher of these runs ({CLEAN_BASE}) is not in the cache ({d}): score without --base, "
                        "or run compare.py with the runs' config once to train it")
    return str(d)


def teacher_path(value: str | None, label: str) -> str:
    """The teacher folder of method `label`, or a one-line UserError: none given, or no model folder there
    (CLEAN_BASE is returned as given: its folder is made when the run starts, `clean_base`)."""
    if not value:
        raise UserError(f"method '{label}' distils a teacher, and none is given: set methods.{label}.teacher to a "
                        "model folder that shares the student's tokenizer (config.json + weights + tokenizer), or "
                        f"to {CLEAN_BASE} on the tiny model (gcframe.teacher.CLEAN_BASE)")
    if value == CLEAN_BASE:
        return value
    path = os.path.expanduser(str(value))
    if os.path.exists(path) and not os.path.isdir(path):  # a weights file, say: the folder that holds it is the model
        within = os.path.dirname(os.path.abspath(path))
        hint = f" (its folder '{within}' has a config.json)" if os.path.isfile(os.path.join(within, "config.json")) \
            else ""
        raise UserError(f"methods.{label}.teacher: '{value}' is a file, not a model folder: give the Hugging Face "
                        f"model folder{hint} that shares the student's tokenizer (config.json + weights + tokenizer)")
    if not os.path.isdir(path):
        raise UserError(f"methods.{label}.teacher: no model folder at '{value}' (it does not exist): give a Hugging "
                        "Face model folder that shares the student's tokenizer")
    from gcframe.modeling import resolve_model_path

    try:
        return resolve_model_path(path)
    except UserError as e:
        raise UserError(f"methods.{label}.teacher: {e}") from None


def tokenizer_difference(teacher_tok, student_tok) -> str | None:
    """Why two tokenizers are not the same one (a phrase), or None: the vocabulary (every token string and its id) and
    the end-of-sequence and padding ids."""
    tv, sv = teacher_tok.get_vocab(), student_tok.get_vocab()
    if tv != sv:
        only = sorted(set(tv) - set(sv))[:3] or sorted(set(sv) - set(tv))[:3]
        moved = sorted(t for t in tv if t in sv and tv[t] != sv[t])[:3]  # get_vocab's order is a hash map's
        what = f"tokens only one has: {only}" if only else f"tokens with other ids: {moved}"
        return f"a vocabulary of {len(tv)} tokens against the student's {len(sv)} ({what})"
    for name in ("eos_token_id", "pad_token_id"):
        if getattr(teacher_tok, name) != getattr(student_tok, name):
            return f"{name} {getattr(teacher_tok, name)} against the student's {getattr(student_tok, name)}"
    return None


def check_tokenizer(path: str, student_tok, label: str, student: str) -> None:
    """One UserError line naming both models when the teacher at `path` does not share the student's tokenizer."""
    from gcframe.modeling import load_tokenizer

    why = tokenizer_difference(load_tokenizer(path), student_tok)
    if why:
        raise UserError(f"methods.{label}.teacher: the teacher {path} does not share the student's tokenizer "
                        f"({student}): {why}; distillation compares the two models token by token, so they need "
                        "one tokenizer")


def load_teacher(ctx, path: str, label: str) -> torch.nn.Module:
    """The frozen teacher (eval mode, no grad, ctx's dtype and device), loaded once per run into ctx's frozen models;
    its tokenizer checked against the student's and its output layer against the student's vocabulary."""
    key = f"teacher:{path}"
    if key not in ctx._frozen:
        from gcframe.modeling import load_model_and_tokenizer

        student = getattr(ctx.cfg.model, "path", None) or "the SFT base"
        check_tokenizer(path, ctx.tok, label, student)
        model, _ = load_model_and_tokenizer(path, dtype=ctx.dtype)
        vocab = model.get_output_embeddings().weight.shape[0]
        own = ctx.policy.get_output_embeddings().weight.shape[0] if hasattr(ctx.policy, "get_output_embeddings") \
            else vocab
        if vocab != own:
            raise UserError(f"methods.{label}.teacher: the teacher {path} scores {vocab} tokens and the student "
                            f"({student}) {own}: their logits must cover the same vocabulary")
        ctx._frozen[key] = model.to(ctx.device).eval().requires_grad_(False)
    return ctx._frozen[key]


def _logits(model, batch: Batch, temperature: float) -> torch.Tensor:
    """Logits [N, T, V] predicting each completion token (position P−1+t predicts o_t), at float32 at least."""
    T, attn = batch.completion_ids.shape[1], batch.attention_mask
    out = model(input_ids=batch.input_ids, attention_mask=attn, position_ids=position_ids(attn),
                logits_to_keep=T + 1, use_cache=False).logits[:, :-1]
    out = out if out.dtype == torch.float64 else out.float()
    return out / temperature if temperature != 1.0 else out


@torch.no_grad()
def teacher_columns(teacher, batch: Batch, temperature: float = 1.0, student=None):
    """(log π_T(o_t | q, o_<t) [N, T], KL(π_S(·|q, o_<t) ‖ π_T(·|q, o_<t)) [N, T] or None), 0 on padding.

    The KL is over the whole vocabulary at each completion position (vOPD's value, −KL), computed when a `student`
    model is given (the policy as it samples: π_old)."""
    mask = batch.completion_mask
    t_logp = torch.log_softmax(_logits(teacher, batch, temperature), -1)  # [N, T, V]
    taken = t_logp.gather(-1, batch.completion_ids.unsqueeze(-1)).squeeze(-1) * mask  # [N, T]
    if student is None:
        return taken, None
    s_logp = torch.log_softmax(_logits(student, batch, temperature), -1).to(t_logp.dtype)  # [N, T, V]
    kl = (s_logp.exp() * (s_logp - t_logp)).sum(-1) * mask  # Σ_v π_S (log π_S − log π_T)  [N, T]
    return taken, kl.to(mask.dtype)


def own_options(cls, cfg, label: str):
    """The method's Config from a run's config (its `methods.<name>` entry, a variant's options merged in by
    compare.py's run_config), for the checks made before a run starts."""
    own = {k: v for k, v in (cfg.methods.get(cls.name) or {}).items() if k != "train"}
    return cls.Config.from_dict(own, label)


class WithTeacher:
    """Mixed into a method whose Config has `teacher` (methods/opd.py, methods/sft_teacher.py), before its Method
    base: the folder checked before anything trains, the tokenizer before any run starts, the teacher loaded once."""

    @classmethod
    def check_run(cls, cfg, label: str) -> None:
        """Before anything trains: a teacher is given and its folder exists, or it is CLEAN_BASE on the tiny model
        (one line each)."""
        super().check_run(cfg, label)
        if teacher_path(own_options(cls, cfg, label).teacher, label) == CLEAN_BASE and cfg.model.path:
            raise UserError(f"methods.{label}.teacher: {CLEAN_BASE} trains the tiny Llama on clean demonstrations, "
                            f"and this run starts from a pretrained model ({cfg.model.path}): give the teacher's model "
                            "folder")

    @classmethod
    def check_model(cls, cfg, task, tok) -> None:
        """Before any run starts: the teacher shares the student's tokenizer (both named in the one line); CLEAN_BASE
        is the student's own tiny Llama and character tokenizer. `tok` is None on the tiny model (compare.py passes
        task.fmt.tok, a pretrained model's alone): the student's is then the character tokenizer its SFT base is
        built and saved with (gcframe.pipeline), the one a tiny teacher folder saved by another run holds."""
        path = teacher_path(own_options(cls, cfg, cls.name).teacher, cls.name)
        if path != CLEAN_BASE:
            from gcframe.modeling import build_char_tokenizer

            check_tokenizer(path, tok or build_char_tokenizer(), cls.name, cfg.model.path or "the SFT base")

    def __init__(self, cfg, ctx):
        super().__init__(cfg, ctx)
        path = teacher_path(cfg.teacher, self.name)
        if path == CLEAN_BASE:  # made (or read from the cache) before the run's first step; its accuracy is logged
            folder, info = clean_base(ctx.cfg, ctx.acc, self.name)
            path = str(folder)
            ctx.acc.print(f"{self.name}: teacher {CLEAN_BASE}, {path} (greedy accuracy "
                          f"{info.get('eval_accuracy', float('nan')):.3f} on the run's held-out problems)")
        self.teacher = load_teacher(ctx, path, self.name)
