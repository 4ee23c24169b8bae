"""The training loop's parts beside its step (gcframe/trainer.py holds the wiring, the step and the teardown):

    metrics      a step's logged row: per-token tallies summed over micro-batches and processes, the batch's
                 statistics, means over processes, the starvation warnings, the logged samples
    evaluation   when a run evaluates (eval_steps), the held-out evaluation of the policy and its step-0 cache
    accelerator  the run's Accelerator, and its process group's end at exit
    optim        fused AdamW and the learning-rate schedule
"""
