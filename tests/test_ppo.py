"""PPO with a critic: the clipped-surrogate GC, the KL-in-reward construction, the critic's alignment, its update."""
from types import SimpleNamespace

import pytest
import torch

from gcframe.batch import Batch
from gcframe.modeling import ModelConfig, build_char_tokenizer, build_tiny_llama
from gcframe.sampling import make_batch
from methods.ppo import PPO, PPOConfig


@pytest.fixture(scope="module")
def tok():
    return build_char_tokenizer()


def make_ppo(tok, **cfg) -> PPO:
    policy = build_tiny_llama(tok, ModelConfig(hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32))
    ctx = SimpleNamespace(policy=policy, cfg=SimpleNamespace(train=SimpleNamespace(temperature=1.0)),
                          all_sum=lambda t: t)  # one process
    return PPO(PPOConfig(**cfg), ctx)


def test_gc_is_ratio_times_advantage_unless_the_clip_bites(tok):
    ppo = make_ppo(tok, clip_eps=0.2)
    ratio = torch.tensor([[1.5, 1.1, 0.5, 1.5, 0.7]])
    adv = torch.tensor([[1.0, 1.0, -1.0, -1.0, 2.0]])
    old = torch.full((1, 5), -1.0)
    logp = old + ratio.log()  # r = exp(logp − old)
    batch = Batch(torch.ones(1, 1, dtype=torch.long), torch.ones(1, 1, dtype=torch.long),
                  torch.ones(1, 5, dtype=torch.long), torch.ones(1, 5), torch.zeros(1, dtype=torch.long),
                  {"advantages": adv, "old_logp": old})
    gc = ppo.coefficients(batch, logp)
    # A>0, r=1.5>1.2: clipped -> 0 | A>0, r=1.1 in band -> 1·1.1 | A<0, r=0.5<0.8: clipped -> 0
    # A<0, r=1.5 (min picks the unclipped r·A = −1.5) -> −1·1.5 | A>0, r=0.7 (min picks r·A) -> 2·0.7
    torch.testing.assert_close(gc, torch.tensor([[0.0, 1.1, 0.0, -1.5, 1.4]]))
    assert ppo.pop_stats()["clip_frac"] == pytest.approx(2 / 5)


def test_kl_is_folded_into_the_per_token_reward(tok):
    ppo = make_ppo(tok, beta=0.1, gamma=1.0, lam=1.0, whiten=False)  # zero head: V = 0 everywhere
    batch = make_batch(tok, ["1+2=", "3+4=", "5+5="], ["12", "7", "10"])  # completions "12<eos>" "7<eos>" ...
    batch.completion_mask[2] = 0.0  # an empty completion: no tokens, no terminal slot, no NaN
    batch.data["rewards"] = torch.tensor([1.0, 0.0, 1.0])
    batch.data["old_logp"] = torch.tensor([[-1.0, -2.0, -0.5], [-1.0, -1.0, 0.0], [-1.0, -1.0, -1.0]])
    batch.data["ref_logp"] = torch.tensor([[-1.5, -1.0, -0.5], [-1.0, -3.0, 0.0], [-2.0, -2.0, -2.0]])
    ppo.prepare(batch)
    # row 0: KL_t = old − ref = [0.5, −1, 0] -> r_t = −0.1·KL_t + 1[t = last]·1 = [−0.05, 0.1, 1.0]
    #        V = 0, γ = λ = 1: A_t = R_t = Σ_{t'≥t} r_t' = [1.05, 1.1, 1.0]
    # row 1: |o| = 2, KL = [0, 2] -> r = [0, −0.2] (reward 0 at t = 1) -> R = [−0.2, −0.2, 0 (padding)]
    expected = torch.tensor([[1.05, 1.1, 1.0], [-0.2, -0.2, 0.0], [0.0, 0.0, 0.0]])
    torch.testing.assert_close(batch.data["returns"], expected)
    torch.testing.assert_close(batch.data["advantages"], expected)
    torch.testing.assert_close(batch.data["values_old"], torch.zeros(3, 3))


def test_old_logp_is_computed_when_the_engine_stored_none(tok):
    from gcframe.engine import token_logprobs

    ppo = make_ppo(tok)
    batch = make_batch(tok, ["1+2=", "3+4="], ["3", "7"])
    batch.data.update(rewards=torch.tensor([1.0, 0.0]), ref_logp=torch.zeros(2, 2))
    ppo.prepare(batch)
    torch.testing.assert_close(batch.data["old_logp"], token_logprobs(ppo.ctx.policy, batch))
    assert torch.isfinite(batch.data["advantages"]).all()


def test_critic_value_at_token_t_sees_the_prompt_and_o_before_t(tok):
    ppo = make_ppo(tok)
    torch.nn.init.normal_(ppo.critic.head.weight)  # a non-zero head, so values differ by position
    batch = make_batch(tok, ["1+2=", "10+20="], ["3", "30"])  # P = 7 (left padded), T = 3
    v = ppo.values(batch)
    P, T = batch.prompt_ids.shape[1], batch.completion_ids.shape[1]
    assert v.shape == batch.completion_ids.shape == (2, 3)
    assert v[0, 2] == 0.0  # padding after "3<eos>" has no value
    for i in range(2):
        for t in range(int(batch.completion_mask[i].sum())):
            # V(s_t) = the critic's last output on (q, o_<t) alone: nothing from o_t onward leaks in
            ids, attn = batch.input_ids[i:i + 1, :P + t], batch.attention_mask[i:i + 1, :P + t]
            torch.testing.assert_close(v[i, t], ppo.critic(ids, attn)[0, -1])


def test_critic_updates_reduce_the_value_loss(tok):
    from gcframe.engine import Normaliser

    torch.manual_seed(0)
    ppo = make_ppo(tok, beta=0.0, vf_clip=0.2)
    batch = make_batch(tok, ["1+2=", "3+4=", "5+6=", "7+8="], ["3", "7", "11", "15"])
    batch.data.update(rewards=torch.tensor([1.0, 0.0, 1.0, 1.0]), ref_logp=torch.zeros(4, 3))
    ppo.prepare(batch)
    opt = torch.optim.AdamW(ppo.critic.parameters(), lr=3e-3)
    norm = Normaliser.of(batch.completion_mask)

    def mse():
        with torch.no_grad():
            return float(((ppo.values(batch) - batch.data["returns"]) ** 2 * batch.completion_mask).sum())

    before = mse()
    for _ in range(5):
        opt.zero_grad()
        ppo.auxiliary_loss(batch, norm).backward()
        opt.step()
    assert mse() < 0.7 * before
