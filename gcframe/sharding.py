"""FSDP2 sharding (`torch.distributed.fsdp.fully_shard`), applied by the project itself (`train.shard: fsdp2`).

Why not accelerate's FSDP plugin: accelerate 1.15 turns FSDP on only for GPU-like distributed types; on CPU
(`Accelerator(cpu=True)`, gloo) it silently falls back to DDP. torch's `fully_shard` works on CPU and GPU alike,
so the project shards with it directly, as torchtune and torchtitan do, under the same launchers (torchrun,
`accelerate launch`): the path the tests run is the path a GPU user runs.

What is sharded, over all W processes of the run (one device mesh):
    the policy            fully_shard on every decoder layer, then on the root (embeddings, final norm, LM head)
    π_ref                 the same (frozen: parameters only); one forward per step
    PPO's critic V_ψ      the same (its backbone's layers, then the root with the scalar head)
    gradients, AdamW      follow their parameters: each process holds 1/W of every tensor
Deliberately replicated (every process holds a full copy):
    the "base" model      samples offline data (RFT's pool, DPO's preference set) on the main process alone,
                          before the others reach it, so it must not need collectives
    the reward model r_φ  trained (`gcframe.rewards.model.train`) and cached by the main process alone, and shared
                          by every run of a comparison; frozen, it costs its parameters only (no grads, no AdamW)

Shapes and the update do not change: FSDP2 averages gradients over processes (reduce-scatter) as DDP does
(all-reduce), so the Trainer's backward scale W and its global loss normaliser are the same under both.
"""
from __future__ import annotations

import contextlib

import torch
import torch.nn as nn

from gcframe.config import (
    SHARD_MODES as MODES,  # "none", "fsdp2": train.shard, checked without torch
)
from gcframe.errors import UserError


def enabled(shard: str, world: int) -> bool:
    """True when the run shards: `train.shard: fsdp2` under a launch of more than one process."""
    return shard == "fsdp2" and world > 1


_MESHES: dict = {}  # (device type, world) -> the run's DeviceMesh, made once


def _mesh(device_type: str, world: int):
    from torch.distributed.device_mesh import init_device_mesh

    if (device_type, world) not in _MESHES:  # 1-D: every process holds 1/W of each parameter
        _MESHES[(device_type, world)] = init_device_mesh(device_type, (world,))
    return _MESHES[(device_type, world)]


def release_meshes() -> None:
    """After destroy_process_group (at exit): let go of the process group through the device mesh. A DeviceMesh
    keeps its groups (`_pg_registry`), and torch's DTensor caches keep the mesh after the models are gone, so the
    Gloo group and its worker threads would outlive destroy_process_group until the interpreter's teardown, where
    they can abort a finished process (`gcframe.trainer.make_accelerator`)."""
    for mesh in _MESHES.values():
        getattr(mesh, "_pg_registry", {}).clear()  # the last reference: the group ends, its threads joined
    _MESHES.clear()


def _is_fsdp(m: nn.Module) -> bool:
    from torch.distributed.fsdp import FSDPModule

    return isinstance(m, FSDPModule)


def is_sharded(model: nn.Module) -> bool:
    return _is_fsdp(model)


def block_names(model: nn.Module) -> set[str]:
    """Class names of the model's repeated blocks: Hugging Face lists them in `_no_split_modules` (e.g.
    LlamaDecoderLayer), the same list accelerate's TRANSFORMER_BASED_WRAP reads."""
    from transformers import PreTrainedModel

    return {n for m in model.modules() if isinstance(m, PreTrainedModel) for n in (m._no_split_modules or [])}


def shard(model: nn.Module, device: torch.device, world: int) -> nn.Module:
    """fully_shard every decoder layer, then the root, in place -> the model (its parameters become DTensors).

    One FSDP unit per layer: a forward or backward all-gathers one layer at a time, so a process never holds
    more than its shard plus one full layer (torchtune's `shard_model`)."""
    from torch.distributed.fsdp import fully_shard

    if _is_fsdp(model):  # already sharded
        return model
    names = block_names(model)
    blocks = [m for m in model.modules() if type(m).__name__ in names]
    if not blocks:
        raise UserError(f"train.shard: fsdp2 found no decoder layers in {type(model).__name__} (no "
                        "_no_split_modules): use a Hugging Face causal LM, or train.shard: none")
    mesh = _mesh(device.type, world)
    for block in blocks:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model


def release(model: nn.Module) -> None:
    """Free the full copy of a sharded model's root parameters (embeddings, final norm, LM head) that fully_shard
    keeps after a forward, for the backward that follows; a frozen model (π_ref) has no backward to wait for."""
    if _is_fsdp(model):
        model.reshard()  # not recursive: the layers resharded after their own forward


def _fsdp_modules(roots) -> list[nn.Module]:
    return [m for root in roots for m in root.modules() if _is_fsdp(m)]


@contextlib.contextmanager
def gathered(*models: nn.Module):
    """Full parameters of every sharded model for the block: all-gathered once on entry, resharded on exit.

    Generation runs one forward per new token; under plain FSDP each of them would all-gather every layer again,
    and processes whose completions end at different steps would run different numbers of collectives (a hang).
    Inside this block the forwards run on the gathered weights and communicate nothing. Unsharded models pass;
    a block inside another one over the same model does nothing (the outer one gathered it)."""
    roots = [m for m in models if m is not None and _is_fsdp(m) and not getattr(m, "_gcframe_gathered", 0)]
    mods, root_ids = _fsdp_modules(roots), {id(m) for m in roots}
    handles = []
    for m in mods:
        m.set_reshard_after_forward(False, recurse=False)
        handles.append(m.unshard(async_op=True))  # one all-gather per FSDP unit, all in flight at once
    for m in roots:
        m._gcframe_gathered = 1
    try:
        for h in handles:
            h.wait()
        yield
    finally:
        for m in roots:
            m._gcframe_gathered = 0
        for m in mods:
            m.reshard()
            if id(m) not in root_ids:  # fully_shard keeps the root unsharded after forward already
                m.set_reshard_after_forward(True, recurse=False)


def is_gathered(model: nn.Module) -> bool:
    """True inside `gathered(model)`: its forwards communicate nothing."""
    return bool(getattr(model, "_gcframe_gathered", 0))


def clip_grad_norm_(parameters, max_norm: float) -> torch.Tensor:
    """The global gradient norm (every process gets the same number), gradients scaled to at most `max_norm`
    (torch.nn.utils.clip_grad_norm_ split in two, as torchtitan does: the norm of sharded gradients is a
    partial DTensor until `full_tensor` sums it over processes)."""
    from torch.distributed.tensor import DTensor

    params = [p for p in parameters if p.grad is not None]
    total = torch.nn.utils.get_total_norm([p.grad for p in params], 2.0)
    if isinstance(total, DTensor):
        total = total.full_tensor()
    torch.nn.utils.clip_grads_with_norm_(params, max_norm, total)
    return total


# -- memory: what one process holds -------------------------------------------------------------------------------
def _local(t: torch.Tensor) -> torch.Tensor:
    from torch.distributed.tensor import DTensor

    return t.to_local() if isinstance(t, DTensor) else t


def _nbytes(t) -> int:
    return _local(t).numel() * _local(t).element_size() if isinstance(t, torch.Tensor) else 0


def local_bytes(model: nn.Module, optimizer: torch.optim.Optimizer | None = None) -> dict[str, int]:
    """Bytes this process holds of a model's parameters, their gradients (those present now) and the optimiser's
    state (AdamW: exp_avg, exp_avg_sq, step), from the local shards' sizes: a DTensor counts its local shard."""
    out = {"params": sum(_nbytes(p) for p in model.parameters()),
           "grads": sum(_nbytes(p.grad) for p in model.parameters() if p.grad is not None), "optimizer": 0}
    if optimizer is not None:
        out["optimizer"] = sum(_nbytes(v) for s in optimizer.state.values() for v in s.values())
    return out


# -- checkpoints: torch.distributed.checkpoint, every process writes its own shards -----------------------------
def _stateful(trainer) -> dict:
    from torch.distributed.checkpoint.state_dict import get_model_state_dict, get_state_dict

    state = {}
    for i, (m, o) in enumerate([(trainer.policy, trainer.opt), *zip(trainer.aux_models, trainer.aux_opts)]):
        msd, osd = get_state_dict(m, o)
        state[f"model{i}"], state[f"optim{i}"] = msd, osd
    ctx = trainer.ctx
    if trainer.tcfg.ref_refresh_every and "reference" in ctx._frozen:
        state["reference"] = get_model_state_dict(ctx.reference)
    return state


def save_checkpoint(trainer, path) -> None:
    """Models and optimisers of a sharded run into `path` (a folder; every process writes its shards, the main
    process the metadata). Collective: every process calls it."""
    import torch.distributed.checkpoint as dcp

    dcp.save(_stateful(trainer), checkpoint_id=str(path))


def load_checkpoint(trainer, path) -> None:
    """Inverse of `save_checkpoint`, in place (collective)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import set_model_state_dict, set_state_dict

    state = _stateful(trainer)
    dcp.load(state, checkpoint_id=str(path))
    for i, (m, o) in enumerate([(trainer.policy, trainer.opt), *zip(trainer.aux_models, trainer.aux_opts)]):
        set_state_dict(m, o, model_state_dict=state[f"model{i}"], optim_state_dict=state[f"optim{i}"])
    if "reference" in state:
        set_model_state_dict(trainer.ctx.reference, state["reference"])


def full_state_dict(model: nn.Module) -> dict:
    """The unsharded state dict, gathered shard by shard into the main process's CPU memory (the others get {}).
    Collective: every process calls it."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    return get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
