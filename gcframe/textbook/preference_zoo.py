"""The preference losses beside DPO: ipo, simpo, orpo, kto and online_dpo, each as its paper writes it, per pair or
per example in a Python loop, divided by the number of SEQUENCES in the batch (the engine's seq-mean-token-sum
normaliser: every method's loss is its pair or example mean / 2, methods/dpo.py and methods/kto.py say why)."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from gcframe.textbook.core import textbook
from gcframe.textbook.classic import _dpo


def _pairs(batch):
    """(chosen row, rejected row) of every pair, read from is_chosen and group_ids."""
    out = []
    for g in batch.group_ids.unique():
        rows = (batch.group_ids == g).nonzero().squeeze(1).tolist()
        (w,) = [i for i in rows if batch.data["is_chosen"][i] == 1]
        (l,) = [i for i in rows if batch.data["is_chosen"][i] == 0]
        out.append((w, l))
    return out


def _token_sums(logp, batch):
    """Σ_t over each completion's tokens, and the token counts |o|: two lists of N."""
    m = batch.completion_mask
    return [x[k > 0].sum() for x, k in zip(logp, m)], [int((k > 0).sum()) for k in m]


@textbook("ipo")
def _ipo(method, batch, logp):
    """Azar et al. 2023 eq. 17: (h − 1/(2τ))², h = Δ⁺ − Δ⁻ (each Δ / |o| under token_mean, TRL's form)."""
    tau, total = method.cfg.tau, 0.0
    sums, lengths = _token_sums(logp - batch.data["ref_logp"], batch)
    delta = [s / max(n, 1) for s, n in zip(sums, lengths)] if method.cfg.token_mean else sums
    for w, l in _pairs(batch):
        total = total + (delta[w] - delta[l] - 1 / (2 * tau)) ** 2
    return total / len(batch)


@textbook("simpo")
def _simpo(method, batch, logp):
    """Meng et al. 2024 eq. 6: −log σ(β/|o⁺|·log π_θ(o⁺|q) − β/|o⁻|·log π_θ(o⁻|q) − γ), no reference."""
    beta, gamma, total = method.cfg.beta, method.cfg.gamma, 0.0
    sums, lengths = _token_sums(logp, batch)
    for w, l in _pairs(batch):
        total = total - F.logsigmoid(beta / lengths[w] * sums[w] - beta / lengths[l] * sums[l] - gamma)
    return total / len(batch)


@textbook("orpo")
def _orpo(method, batch, logp):
    """Hong et al. 2024 eq. 6-7: L_SFT + λ·L_OR, L_SFT = −(1/|o⁺|) Σ_t log π_θ(o⁺_t), L_OR = −log σ(log(odds⁺/odds⁻)),
    odds = P/(1 − P) with P = exp((1/|o|) Σ_t log π_θ(o_t)) (eq. 4): the odds written with P itself."""
    total = 0.0
    sums, lengths = _token_sums(logp, batch)
    P = [torch.exp(s / n) for s, n in zip(sums, lengths)]
    for w, l in _pairs(batch):
        odds_ratio = (P[w] / (1 - P[w])) / (P[l] / (1 - P[l]))
        total = total - sums[w] / lengths[w] - method.cfg.lam * F.logsigmoid(torch.log(odds_ratio))
    return total / len(batch)


@textbook("kto")
def _kto(method, batch, logp):
    """Ethayarajh et al. 2024 eq. 8: λ_y − v(x, y), v = λ_D σ(β(r − z₀)) or λ_U σ(β(z₀ − r)), r = Σ_t log π_θ/π_ref,
    z₀ = max(0, mean r over the mismatched rows), computed here from this logp and detached (not backpropagated)."""
    c, total = method.cfg, 0.0
    r, _ = _token_sums(logp - batch.data["ref_logp"], batch)
    mismatched = [i for i in range(len(batch)) if batch.data["mismatched"][i] == 1]
    z0 = max(0.0, float(sum(r[i].detach() for i in mismatched)) / len(mismatched))
    for i in range(len(batch)):
        if batch.data["mismatched"][i] == 1:
            continue
        if batch.data["desirable"][i] == 1:
            total = total + c.desirable_weight * (1 - torch.sigmoid(c.beta * (r[i] - z0)))
        else:
            total = total + c.undesirable_weight * (1 - torch.sigmoid(c.beta * (z0 - r[i])))
    return total / len(batch)


textbook("online_dpo")(_dpo)  # DPO's loss (Rafailov et al. eq. 7) on the live policy's pairs


@textbook("rpo")
def _rpo(method, batch, logp):
    """Pang et al. 2024 eq. 1: −log σ(β(Δ⁺ − Δ⁻)) − α log π_θ(o⁺|q)/|o⁺|, per pair in a Python loop, divided by the
    number of sequences 2P (DPO's normaliser: the pair mean / 2)."""
    c, total = method.cfg, 0.0
    delta, _ = _token_sums(logp - batch.data["ref_logp"], batch)
    sums, lengths = _token_sums(logp, batch)
    for w, l in _pairs(batch):
        total = total - F.logsigmoid(c.beta * (delta[w] - delta[l])) - c.alpha * sums[w] / lengths[w]
    return total / len(batch)
