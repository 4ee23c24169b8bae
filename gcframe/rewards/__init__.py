"""Where rewards come from.

    scoring      score(batch, task, ...): the gold outcome verifier, the process (step) verifier, and dispatch to
                 the other sources
    functions    your own reward functions (train.reward_funcs: FILE.py:NAME)
    preferences  the offline preference set (pairs of SFT-base samples judged by a simulated annotator)
    model        the Bradley–Terry reward model r_φ trained on those pairs
"""
from gcframe.rewards.scoring import REWARD_SOURCES, outcome_rewards, process_rewards, score

__all__ = ["REWARD_SOURCES", "outcome_rewards", "process_rewards", "score"]
