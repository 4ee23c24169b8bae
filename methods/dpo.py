"""Direct Preference Optimization (Rafailov et al. 2023): preference pairs, no sampling loop, no reward model.

    L_DPO = −E_{(q, o⁺, o⁻)} [ log σ(β(Δ⁺ − Δ⁻)) ],    Δ = Σ_t log π_θ(o_t|q,o_<t) − log π_ref(o_t|q,o_<t)

Data: the offline preference set of gcframe.rewards.preferences (SFT-base samples judged by the simulated annotator),
shared with the reward model. One step draws P = B·G/2 pairs = B·G sequences (the equal budget); the two
sequences of a pair share a group id, so minibatches and micro-batches never split a pair.

Normaliser: with the default aggregation "seq-mean-token-sum" over N = 2P sequences the engine's loss is
Σ_pairs(−log σ(β(Δ⁺ − Δ⁻))) / (2P), i.e. the pair-mean DPO loss divided by 2 (the learning rate absorbs it);
gcframe.verify's textbook loss uses the same normaliser explicitly. token-mean and seq-mean-token-sum-norm rescale
it (by 2P/Σ|o| and 1/L_max); seq-mean-token-mean weights each sequence by 1/|o| and is then not the DPO gradient.

The pair helpers below (`pair_index`, `sides`, `per_row`) and the data source `PreferencePairs` are shared by the
other pairwise losses (ipo, simpo, orpo, online_dpo).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
import torch.nn.functional as F

from gcframe.batch import Batch
from gcframe.errors import UserError
from gcframe.rewards.preferences import PreferenceOptions, load_or_build, pair_batch
from methods.base import Method, MethodConfig, register


def pair_index(batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
    """(pair [N]: which pair row i belongs to, 0..P−1; chosen [N]: 1 on o⁺, 0 on o⁻), after checking that every
    group is one chosen and one rejected sequence."""
    chosen = batch.data["is_chosen"]  # [N]
    _, pair, counts = torch.unique(batch.group_ids, return_inverse=True, return_counts=True)  # pair of row i
    n_chosen = torch.zeros_like(counts, dtype=chosen.dtype).index_add_(0, pair, chosen)
    if not (bool((counts == 2).all()) and bool((n_chosen == 1).all())):
        raise ValueError("preference pairs: every group must be one chosen and one rejected sequence")
    return pair, chosen


def sides(x: torch.Tensor, pair: torch.Tensor, chosen: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A per-sequence quantity x [N] -> (x⁺ [P], x⁻ [P]): its value on each pair's o⁺ and o⁻."""
    pos = torch.zeros(int(pair.max()) + 1, dtype=x.dtype, device=x.device).index_add_(0, pair, x * chosen)
    neg = torch.zeros_like(pos).index_add_(0, pair, x * (1 - chosen))
    return pos, neg


def per_row(w_pos: torch.Tensor, w_neg: torch.Tensor, pair: torch.Tensor, chosen: torch.Tensor) -> torch.Tensor:
    """Per-pair coefficients (on o⁺ [P], on o⁻ [P]) -> one per sequence [N]."""
    return chosen * w_pos[pair] + (1 - chosen) * w_neg[pair]


def seq_sum(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Σ_t x_{i,t} over each completion's tokens: [N, T] -> [N]."""
    return (x * mask).sum(-1)


def check_positive(cfg: MethodConfig, *keys: str) -> None:
    """A one-line UserError for the first option among `keys` that is not > 0 (named methods.<cfg.method>.<key>)."""
    for key in keys:
        if not getattr(cfg, key) > 0:
            raise UserError(f"methods.{cfg.method}.{key} must be > 0, got {getattr(cfg, key)}")


@dataclass
class PreferenceConfig(MethodConfig):
    """The options of a method trained on the offline preference set (dpo, ipo, simpo, orpo, kto)."""

    aggregation: str = "seq-mean-token-sum"
    """seq-mean-token-sum: the engine loss is the pair loss summed over pairs / 2P (the pair mean / 2, see above)."""
    label_noise: float | None = None
    """Annotator label-swap probability of the preference set; None = reward_model.label_noise (shared set)."""
    pairs: int | None = None
    """Training pairs in the preference set; None = reward_model.pairs."""
    samples_per_prompt: int | None = None
    """SFT-base samples per prompt when building the set; None = reward_model.samples_per_prompt."""

    method: ClassVar[str] = "dpo"  # the name error messages give (methods.<method>.<option>)

    def validate(self) -> None:
        super().validate()
        if self.label_noise is not None and not (isinstance(self.label_noise, (int, float))
                                                 and 0.0 <= self.label_noise <= 1.0):
            raise UserError(f"methods.{self.method}.label_noise must be a probability in [0, 1], "
                            f"got {self.label_noise!r}")
        for key, low in (("pairs", 1), ("samples_per_prompt", 2)):
            v = getattr(self, key)
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < low):
                raise UserError(f"methods.{self.method}.{key} must be an integer >= {low}, got {v!r}")



@dataclass
class DPOConfig(PreferenceConfig):
    beta: float = 0.1
    """β: strength of the implicit KL anchor to π_ref; the implicit reward is β·Δ (Rafailov et al. eq. 7)."""

    def validate(self) -> None:
        super().validate()
        check_positive(self, "beta")


def preference_set(cfg: PreferenceConfig, ctx):
    """(the training pairs, the set's info) of the SFT base's preference set under these options: built once from the
    base's samples by the main process, then read from the cache (gcframe.rewards.preferences)."""
    opts = PreferenceOptions.of(ctx.cfg, label_noise=cfg.label_noise, pairs=cfg.pairs,
                                samples_per_prompt=cfg.samples_per_prompt)
    sets, info = load_or_build(ctx.cfg, ctx.task, ctx.tok, ctx.base_dir, lambda: ctx.frozen("base"), opts, ctx.acc)
    return sets["train"], info


class PreferencePairs(Method):
    """Data source: P = B·G/2 pairs per step from the SFT base's offline preference set (`pair_batch`)."""

    rollout_groups = False
    needs_old_logp = False  # no ratio π_θ/π_old in its GC
    samples_policy = False  # data fixed before the run: no staleness or sampler dtype
    pairwise: ClassVar[bool] = True
    """Every group of a batch is one chosen and one rejected sequence (analysis/gc_view.py pairs its probe so)."""
    Config = PreferenceConfig

    @classmethod
    def check_run(cls, cfg, label: str) -> None:
        """Also, before the SFT base or the preference set is built: one pair per step at least (B·G >= 2)."""
        super().check_run(cfg, label)
        t = cfg.train
        if t.prompts_per_step * t.group_size < 2:
            raise UserError(f"method '{label}' trains on pairs: train.prompts_per_step · train.group_size must be >= 2 "
                            f"(one pair per step), got {t.prompts_per_step} · {t.group_size}")

    def __init__(self, cfg: PreferenceConfig, ctx):
        super().__init__(cfg, ctx)
        self.pairs, self.pref_info = preference_set(cfg, ctx)
        t = ctx.cfg.train
        self.n_pairs = t.prompts_per_step * t.group_size // 2  # P = B·G/2 (one fewer sequence if B·G is odd; >= 1)

    def collect(self, step: int) -> Batch:
        return pair_batch(self.ctx.tok, self.ctx.draw(self.pairs, self.n_pairs, "pairs"))  # 2P sequences


@register("dpo")
class DPO(PreferencePairs):
    """Offline pairs from the SFT base's preference set; reference π_ref = the SFT base."""

    Config = DPOConfig
    uses_reference = True

    def coefficients(self, batch: Batch, logp: torch.Tensor) -> torch.Tensor:
        """GC = +β·σ(β(Δ⁻ − Δ⁺)) on every o⁺ token, −β·σ(β(Δ⁻ − Δ⁺)) on every o⁻ token (Rafailov et al. 2023,
        eq. 7 and its gradient, §4; seed, "One Gradient, Many Methods"): ∂(−log σ(z))/∂Δ± = ∓β·σ(−z) with
        z = β(Δ⁺ − Δ⁻), and ∂Δ/∂log π_θ(o_t) = 1 on every token, so the coefficient is constant over a sequence.
        """
        mask = batch.completion_mask  # [N, T]
        pair, chosen = pair_index(batch)  # [N], [N]
        d_pos, d_neg = sides(seq_sum(logp.detach() - batch.data["ref_logp"], mask), pair, chosen)  # Δ⁺, Δ⁻ [P]
        z = self.cfg.beta * (d_pos - d_neg)  # implicit reward margin β(Δ⁺ − Δ⁻) [P]
        w = self.cfg.beta * torch.sigmoid(-z)  # β·σ(β(Δ⁻ − Δ⁺)) [P]
        self.record(dpo_loss=-F.logsigmoid(z).mean(), reward_margin=z.mean(), pair_accuracy=(z > 0).float().mean(),
                    reward_chosen=self.cfg.beta * d_pos.mean(), reward_rejected=self.cfg.beta * d_neg.mean())
        return per_row(w, -w, pair, chosen).unsqueeze(-1) * mask  # [N, T]
