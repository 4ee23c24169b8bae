"""Every method page states its options in its own Markdown (a code host shows no hook's output): the `## Options`
table of docs/methods/<name>.md lists every field of the method's Config, inherited ones included, in the
dataclass's order, each with the default the code gives."""
from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted(p for p in (ROOT / "docs" / "methods").glob("*.md") if p.stem != "index")
ROW = re.compile(r"^\| `(\w+)` \| `([^`]*)` \| .* \|$", re.M)


@pytest.fixture(scope="module")
def hook():
    spec = importlib.util.spec_from_file_location("gcframe_docs_hook", ROOT / "docs" / "hooks" / "reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def options_section(text: str) -> str:
    start = text.index("\n## Options\n")
    nxt = text.find("\n## ", start + 1)
    marker = text.find("\n<!-- gcframe:method", start)
    end = min(i for i in (nxt, marker, len(text)) if i != -1)
    return text[start:end]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.stem)
def test_method_page_lists_every_option(page, hook):
    from methods.base import REGISTRY

    module = importlib.import_module(f"methods.{page.stem}")
    [cls] = [c for c in REGISTRY.values() if c.__module__ == module.__name__]
    text = page.read_text()
    assert "\n## Options\n" in text, f"{page.name}: no '## Options' table (the method's Config fields)"
    written = ROW.findall(options_section(text))
    expected = [(f.name, hook.default_text(f)) for f in dataclasses.fields(cls.Config)]
    assert written == expected, (f"{page.name}'s options table differs from {cls.Config.__qualname__}: "
                                 f"written {written}, the code {expected}")


def test_the_off_policy_page_states_trls_sequence_mask_default_as_the_locked_trl_has_it():
    """docs/concepts/off-policy.md's seq_mis row: TRL's default correction mode is "sequence_mask" with the band
    (−∞, 3] (no lower bound, C_max 3), read from the TRL in requirements/lock.txt."""
    import dataclasses

    pytest.importorskip("trl")
    from trl import GRPOConfig

    f = {x.name: x.default for x in dataclasses.fields(GRPOConfig)}
    assert f["vllm_importance_sampling_mode"] == "sequence_mask"
    assert (f["vllm_importance_sampling_clip_min"], f["vllm_importance_sampling_clip_max"]) == (None, 3.0)
    page = (Path(__file__).resolve().parents[1] / "docs" / "concepts" / "off-policy.md").read_text()
    assert '`"sequence_mask"`, TRL\'s default mode, whose default band is $(-\\infty, 3]$' in page
