"""What a finished run keeps: its final policy as a Hugging Face folder; its resumable checkpoints go.

    RUN/final/   full fine-tuning: config.json, model.safetensors, generation_config.json and the tokenizer, so
                 `AutoModelForCausalLM.from_pretrained(RUN/final)` and `AutoTokenizer.from_pretrained(RUN/final)` load it;
                 the tokenizer's `tok(text)` opens a plain prompt with <bos> as training did (`with_prompt_bos`)
                 LoRA (model.lora_rank > 0): adapter_config.json, adapter_model.safetensors, the tokenizer and MERGE.md,
                 which names the base the adapter belongs to and how to merge it into a plain model

Checkpoints (RUN/checkpoints/, only for resuming an interrupted run) are removed once the final model is written,
unless `train.keep_checkpoints` is true. A run is finished only once RUN/final is there (`checkpoint.finished`): a
final model that could not be written (a full disk: one line naming the disk, its temporary folder removed) leaves
the checkpoints, and --resume trains the run again from the last one and writes it. Only the main process writes; every process must call `finish`.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

from gcframe.errors import UserError, disk_full, disk_full_line
from gcframe.tracking.checkpoint import SUBDIR
from gcframe.tracking.log import publish_dir

FINAL = "final"

MERGE_NOTE = """# A LoRA adapter

This folder holds the adapter trained on top of the base model `{base}`. Load it on its base with peft, and merge it
into a plain model that needs no peft:

```python
from peft import PeftModel
from transformers import AutoModelForCausalLM, AutoTokenizer

base = AutoModelForCausalLM.from_pretrained("{base}")
model = PeftModel.from_pretrained(base, "{final}").merge_and_unload()   # W <- W + (alpha/r)·B·A in every layer
model.save_pretrained("merged")
AutoTokenizer.from_pretrained("{final}").save_pretrained("merged")
```
"""


def is_lora(model) -> bool:
    return hasattr(model, "peft_config")


def save(model, tokenizer, final: str | Path, base_dir, state_dict=None) -> Path:
    """Write the folder `final` (atomically: a temporary folder renamed into place) -> its path. `state_dict`: the
    full weights where the model holds only its shards (FSDP2, gathered by the caller)."""
    from gcframe.modeling.loading import weights_like_config
    from gcframe.modeling.tokenizers import with_prompt_bos

    final = Path(final)
    tmp = final.with_name(final.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        model.save_pretrained(tmp, state_dict=state_dict)  # a PeftModel writes only its adapter
        with_prompt_bos(tokenizer).save_pretrained(tmp)  # tok(text) adds the <bos> training opened prompts with
        weights_like_config(tmp)  # not safetensors' 0600
        if is_lora(model):
            base = Path(base_dir).resolve() if base_dir and Path(base_dir).exists() else base_dir
            (tmp / "MERGE.md").write_text(MERGE_NOTE.format(base=base, final=final.resolve()))
    except Exception as e:  # noqa: BLE001: whatever stopped the write, no half-written folder stays behind
        shutil.rmtree(tmp, ignore_errors=True)
        if disk_full(e):  # (safetensors' SafetensorError is no OSError): one line; the run is not finished
            raise UserError(disk_full_line(final, "the final model")) from None
        raise
    shutil.rmtree(final, ignore_errors=True)  # a resumed run writes it again
    publish_dir(tmp, final)
    return final


def finish(trainer, keep_checkpoints: bool = False) -> Path:
    """After `trainer.fit()`: save the final policy into RUN/final and remove RUN/checkpoints (unless kept)."""
    acc, run_dir = trainer.acc, Path(trainer.logger.dir)
    acc.wait_for_everyone()
    final = trainer.save_model(run_dir / FINAL)  # collective: FSDP2 gathers the shards
    if acc.is_main_process and not keep_checkpoints:
        shutil.rmtree(run_dir / SUBDIR, ignore_errors=True)
    acc.wait_for_everyone()
    return final
