"""What a run leaves behind and the services that keep it: the run folder and what persists across processes.

    log          the run folder: config.yaml, metrics.jsonl, samples.jsonl; atomic publishing
    cache        the cache root ($GCFRAME_CACHE), imported by gcframe.errors too
    checkpoint   save and restore a run mid-way (--resume)
    final_model  the trained policy as a Hugging Face folder
    trackers     the metrics rows also sent to TensorBoard, W&B, trackio or MLflow
    claims       processes that share an output folder split its cells by O_EXCL claim files
    memory       peak resident memory, per run
    env          env.json: the software, machine and commit that made a result
    threads      torch's thread count for this machine's load, one rule for every entry point
"""
