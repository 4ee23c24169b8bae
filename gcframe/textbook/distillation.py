"""The teacher's methods as their papers write them: on-policy distillation (the per-token reverse-KL policy gradient of
GKD at λ = 1, β = 1, as Thinking Machines and TRL's IW-OPD at γ = 0 write its loss, with vOPD's baseline) and
sequence-level distillation (Kim and Rush 2016: the cross-entropy of the teacher's completions). The teacher's
log-probabilities are recomputed here from its logits by torch's cross_entropy, not read from the method's column."""
from __future__ import annotations

import torch.nn.functional as F

from gcframe.textbook.classic import _sft
from gcframe.textbook.core import _mean_as_written, textbook


def _teacher_logp(method, batch):
    """log π_T(o_t | q, o_<t) [N, T] from a full forward of the teacher and torch's cross_entropy (0 on padding)."""
    ids, attn = batch.input_ids, batch.attention_mask
    pos = (attn.cumsum(-1) - 1).clamp(min=0)
    logits = method.teacher(input_ids=ids, attention_mask=attn, position_ids=pos).logits  # [N, P+T, V]
    P, temperature = batch.prompt_ids.shape[1], method.ctx.cfg.train.temperature
    labels = batch.completion_ids.masked_fill(batch.completion_mask == 0, -100)  # [N, T]
    ce = F.cross_entropy(logits[:, P - 1:-1].reshape(-1, logits.shape[-1]) / temperature, labels.reshape(-1),
                         ignore_index=-100, reduction="none").view_as(labels)
    return -ce


@textbook("opd")
def _opd(method, batch, logp):
    """Agarwal et al. 2024 (λ = 1, the reverse KL), Lu and Thinking Machines 2025: −Σ_t r_t · sg(A_t) / Σ|o|, the
    per-token advantage A_t = log π_T(o_t) − log π_θ(o_t) (+ KL_t, vOPD's baseline −KL subtracted, Oh et al. 2026),
    r_t = π_θ/π_old with its gradient (TRL's IW-OPD loss at γ = 0 is this at r = 1)."""
    A = (_teacher_logp(method, batch).to(logp.dtype) - logp).detach()
    if method.cfg.baseline == "vopd":
        A = A + batch.data["teacher_kl"]  # KL(π_old(·|s_t) ‖ π_T(·|s_t)): a function of the position only
    r = (logp - batch.data["old_logp"]).exp()
    return -_mean_as_written(r * A, batch.completion_mask, method.cfg.aggregation)


textbook("sft_teacher")(_sft)  # Kim and Rush 2016 §3.2: the cross-entropy of the teacher's greedy completions
