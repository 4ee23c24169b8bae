"""The documentation reads: the README stays short (at most 200 lines) and its links resolve; the numbers the docs
quote from the default config and the code are filled in by the site's hook (docs/hooks/reference.py) when the site
is built, never retyped; formulas are mathematics (arithmatex + KaTeX, served with the site); the generated option tables keep an
option's name, type and default whole; the docs extra has the formatter mkdocstrings formats signatures with.

`mkdocs build --strict` itself runs in .ci/run; these tests run the hook on the pages directly (seconds, no site)."""
from __future__ import annotations

import importlib.util
import logging
import re
import tomllib
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
DEFAULT_YAML = ROOT / "experiments" / "configs" / "default.yaml"
README_MAX_LINES = 200


@pytest.fixture(scope="module")
def hook():
    spec = importlib.util.spec_from_file_location("gcframe_docs_hook", DOCS / "hooks" / "reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.on_config({})
    return module


def render(hook, markdown: str, src_uri: str = "test.md") -> str:
    page = SimpleNamespace(file=SimpleNamespace(src_uri=src_uri))
    return hook.on_page_markdown(markdown, page=page, config={}, files=[])


def default_yaml() -> dict:
    return yaml.safe_load(DEFAULT_YAML.read_text())


def mkdocs_yml() -> dict:
    return yaml.safe_load((ROOT / "mkdocs.yml").read_text())


# -- the README -----------------------------------------------------------------------------------------------------
def test_the_readme_is_at_most_200_lines():
    n = len(README.read_text().splitlines())
    assert n <= README_MAX_LINES, f"README.md has {n} lines: keep it to {README_MAX_LINES}, move detail into docs/"


def test_the_readmes_relative_links_point_at_files():
    text = README.read_text()
    targets = re.findall(r"\]\(([^)\s]+)\)", text)
    local = [t.split("#")[0] for t in targets if not re.match(r"[a-z]+://", t) and not t.startswith("#")]
    assert local, "the README links into docs/ and results/"
    missing = [t for t in local if not (ROOT / t).exists()]
    assert missing == []


# -- numbers read from the config, not retyped ------------------------------------------------------------------------
def test_placeholders_read_the_default_config_the_built_in_defaults_and_the_code(hook):
    from gcframe.config import RunConfig
    from gcframe.tracking import health

    raw = default_yaml()
    assert hook.fill("config", "task.n_demos", None) == f"{raw['task']['n_demos']:,}"  # e.g. 1000 -> "1,000"
    assert hook.fill("config", "train.steps", None) == f"{raw['train']['steps']:,}"
    assert hook.fill("builtin", "train.checkpoint_every", None) == f"{RunConfig().train.checkpoint_every:,}"
    # a format spec after the colon: 0.25 -> "25%"
    assert (hook.fill("py", "gcframe.tracking.health.THRESHOLDS.truncated_frac", ".0%")
            == f"{health.THRESHOLDS['truncated_frac']:.0%}")
    assert re.fullmatch(r"\d+\.\d\dM", hook.fill("tiny_llama", "parameters", None))  # e.g. 1.06M


def test_getting_started_quotes_the_default_configs_demonstrations_and_stage1_steps(hook):
    raw_page = (DOCS / "getting-started.md").read_text()
    assert "<!-- gcframe:value config.task.n_demos -->" in raw_page and not re.search(r"\d[\d,]* demonstrations",
                                                                                       raw_page), "a value marker"
    page = render(hook, raw_page, "getting-started.md")
    raw = default_yaml()
    assert f"{raw['task']['n_demos']:,} demonstrations" in page
    assert f"{raw['sft_base']['steps']:,} steps" in page  # stage 1's (at most) steps
    flat = " ".join(page.split())  # and the rule: the whole schedule, the best evaluation on the validation problems
    assert raw["sft_base"]["patience"] * raw["sft_base"]["eval_every"] >= raw["sft_base"]["steps"], \
        "the page says stage 1 trains its whole schedule: a patience that can fire before the cap contradicts it"
    assert f"{raw['sft_base']['steps']:,} steps on a cosine schedule" in flat and raw["sft_base"]["lr_schedule"] == "cosine"
    assert f"measured every {raw['sft_base']['eval_every']} steps, keeping the best evaluation's weights" in flat
    assert f"on the {raw['task']['n_validation']} validation problems" in flat


def test_every_page_fills_its_placeholders_and_markers_without_a_warning(hook, caplog):
    pages = sorted(p for p in DOCS.rglob("*.md"))
    assert len(pages) > 20
    with caplog.at_level(logging.WARNING, logger="mkdocs.hooks.gcframe"):
        for p in pages:
            out = render(hook, p.read_text(), str(p.relative_to(DOCS)))
            assert "{{" not in out, f"{p}: a placeholder was left unfilled"
            assert "<!-- gcframe:" not in out, f"{p}: a marker was left unrendered"
    assert [r.getMessage() for r in caplog.records] == []


@pytest.mark.parametrize("name", ["config.task.no_such_option", "nowhere.task.n_demos", "config.task",
                                  "py.gcframe.tracking.health.NO_SUCH"])
def test_a_marker_that_names_nothing_usable_fails_the_strict_build(hook, caplog, name):
    with caplog.at_level(logging.WARNING, logger="mkdocs.hooks.gcframe"):
        out = render(hook, f"trained on <!-- gcframe:value {name} -->1,000<!-- /value --> demonstrations", "guide.md")
    assert out == "trained on 1,000 demonstrations"  # the written number, and a warning, which `mkdocs build --strict`
    assert any(f"guide.md: value marker '{name}' names nothing" in r.getMessage() for r in caplog.records)  # fails


def test_a_page_read_as_markdown_shows_the_number_and_the_build_checks_it(hook, caplog):
    """A code host shows the Markdown with HTML comments hidden: the number written between the markers. The build
    writes the code's number and warns (a --strict failure) when the written one is stale or a raw {{ }} is left;
    `python docs/hooks/reference.py` (hook.rewrite) writes them."""
    n = f"{default_yaml()['task']['n_demos']:,}"
    good = f"on <!-- gcframe:value config.task.n_demos -->{n}<!-- /value --> demonstrations"
    shown = re.sub(r"<!--.*?-->", "", good)  # what a code host renders
    assert shown == f"on {n} demonstrations"
    stale, raw = good.replace(f"-->{n}<", "-->7<"), "on {{ config.task.n_demos }} demonstrations"
    with caplog.at_level(logging.WARNING, logger="mkdocs.hooks.gcframe"):
        assert render(hook, good) == shown
        assert not caplog.records
        assert render(hook, stale) == shown and render(hook, raw) == shown  # the site has the code's number
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 2 and f"'7' is written for config.task.n_demos, which is now '{n}'" in said[0]
    assert "placeholder '{{ config.task.n_demos }}' shows as written" in said[1]
    assert hook.rewrite(stale) == hook.rewrite(raw) == hook.rewrite(good) == good
    pct = "<!-- gcframe:value py.gcframe.tracking.health.THRESHOLDS.truncated_frac:.0% -->"
    assert hook.rewrite(f"{pct}0%<!-- /value -->").startswith(pct) and render(hook, f"{pct}x<!-- /value -->") != "x"


# -- formulas as mathematics --------------------------------------------------------------------------------------
def test_the_site_renders_formulas_as_mathematics():
    cfg = mkdocs_yml()
    ext = [e for e in cfg["markdown_extensions"] if isinstance(e, dict) and "pymdownx.arithmatex" in e]
    assert ext and ext[0]["pymdownx.arithmatex"]["generic"] is True
    scripts, sheets = cfg["extra_javascript"], cfg["extra_css"]
    assert "vendor/katex/katex.min.js" in scripts and "vendor/katex/katex.min.css" in sheets
    # served with the site: an offline reader sees mathematics, not raw LaTeX; nothing comes from the network
    assert all((DOCS / s).is_file() for s in scripts + sheets), "every script and stylesheet is a file of docs/"
    css = (DOCS / "vendor" / "katex" / "katex.min.css").read_text()
    fonts = re.findall(r"url\((fonts/[\w-]+\.woff2)\)", css)
    assert len(fonts) >= 20 and all((DOCS / "vendor" / "katex" / f).is_file() for f in fonts)
    assert "MIT License" in (DOCS / "vendor" / "katex" / "LICENSE").read_text()


def test_the_idea_and_every_method_page_state_their_formula_as_mathematics():
    idea = (DOCS / "concepts" / "idea.md").read_text()
    assert re.search(r"\$\$\n\\nabla_\\theta J\(\\theta\) =", idea)
    assert "∇J(θ) = E_" not in idea and "∇J(θ) = E_" in README.read_text()  # the README keeps the plain text
    stems = sorted(p.stem for p in (ROOT / "methods").glob("*.py") if p.stem not in ("__init__", "base"))
    assert len(stems) >= 8
    for stem in stems:
        page = (DOCS / "methods" / f"{stem}.md").read_text()
        display = re.findall(r"^\$\$\n(.*?)^\$\$$", page, re.S | re.M)
        assert any(r"\mathrm{GC}" in d for d in display), f"docs/methods/{stem}.md: no GC formula as mathematics"


# -- option tables ---------------------------------------------------------------------------------------------------
def test_option_tables_keep_names_types_and_defaults_whole(hook):
    table = hook.config_table("gcframe.config.TrainConfig", "train")
    rows = re.findall(r"<tr id=[^>]*>(.*?)</tr>", table)
    assert rows and all(re.match(r"(<td><code>[^<]+</code></td>){3}<td>", r) for r in rows)
    assert '<table class="gcframe-config">' in table
    sheets = mkdocs_yml()["extra_css"]
    css = "".join((DOCS / s).read_text() for s in sheets)
    rules = re.findall(r"([^{}]+)\{([^{}]*)\}", re.sub(r"/\*.*?\*/", "", css, flags=re.S))
    nowrap = [sel for sel, body in rules if re.search(r"white-space:\s*nowrap", body)]
    assert any("table.gcframe-config td:nth-child(-n+3) code" in sel for sel in nowrap), nowrap
    assert any(re.search(r"table\.gcframe-config td:nth-child\(-n\+3\)\s*(,|$)", sel) for sel in nowrap), nowrap


# -- the docs extra --------------------------------------------------------------------------------------------------
def test_the_docs_extra_installs_a_formatter_for_mkdocstrings_signatures():
    """mkdocstrings-python formats separated signatures with Black or Ruff, and says so when neither is installed."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    names = {Requirement(r).name for r in extras["docs"]}
    assert names & {"black", "ruff"}, names
    options = mkdocs_yml()["plugins"][1]["mkdocstrings"]["handlers"]["python"]["options"]
    assert options["separate_signature"] is True
