"""Reward functions for experiments/own_data/config.yaml: plain callables (prompt, completion, answer) -> float, as
TRL's reward_funcs users write them. The run trains on 1.0 * correct + 0.5 * brief."""


def correct(prompt, completion, answer):
    """1 when the completion is exactly the answer (e.g. '12' for 'What is 7 plus 5?'), else 0."""
    return 1.0 if completion.strip() == answer else 0.0


def brief(prompt, completion, answer):
    """-1 per character beyond the answer's length, scaled down: say the number and stop."""
    return -max(len(completion.strip()) - len(answer), 0) / 10
