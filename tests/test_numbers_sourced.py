"""Every number the README and the docs state in their own words has a source, so that none is typed from memory or
outlives the result it came from.

A page's own words are its text less code (blocks and spans), maths, comments, link targets, quoted examples
("12+34=46"), the tables rendered from results/ between `<!-- result: ... -->` markers, which tests/test_results.py
checks cell by cell against their CSVs, and the values docs/hooks/reference.py fills in and checks
(`<!-- gcframe:value ... -->`). A number in them has a source when it is

1. **checked by a claim test**: the passage it stands in is quoted by a test of tests/test_*claims*.py or
   tests/test_result_claims.py (`_says(...)`), and that test's own literals hold the number (`_is(x, "2.5")`,
   `_span(xs, "0.07", "0.25")`, `== "+0.063 [+0.036, +0.090]"`): the test recomputes it from results/;
2. **shown on the page**: a value of a table rendered on the same page, at the precision the page writes it (`0.42`
   matches `0.421`, never `0.4`; `72%` matches `0.72`; signs aside: "0.07 below" restates `-0.07`);
3. **configuration**: a value of the config or environment of a result the page names (`results/<name>/`,
   `data/<name>/`: its `config.yaml`, `sweep.yaml`, `env.json`), of the default config, or a number literal of a code
   or config file the page names (`analysis/paired.py`, `tests/test_paired.py`, `experiments/configs/x.yaml`);
4. **computed in place** from numbers beside it (`B·G = 4 × 8 = 32`): the result is then a source for the page;
5. **not a result**: a citation's year, an entry of NOT_RESULTS (kept small: each says what it is), or a command's
   wall-clock time written in hours or minutes (WALL_CLOCK): results/ logs each run's train time in seconds
   (summary.csv `time_s`), not how long a whole command took, so those are a reader's budget as observed.

A number restated from a results/ CSV that the page does not show needs a claim test (1); a measurement with no file
in results/ needs a result, or a cut. Two lists name what is not sourced yet: LEAD_REMAKES (the default comparison,
re-made from a new result) and UNSOURCED (measurements with no file in results/). Every entry must still be on its
page, so the lists only shrink.

Matching is by value, so a number can match a value it did not come from; the sources of a number are only its own
claim test's literals, its page's tables and the configuration it names, which keeps those coincidences few.
"""
from __future__ import annotations

import ast
import bisect
import json
import re
from functools import cache
from pathlib import Path

import pytest
import yaml

from analysis.results import MARK

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"
DEFAULT_CONFIG = ROOT / "experiments" / "configs" / "default.yaml"
CLAIM_TESTS = sorted({*(ROOT / "tests").glob("test_*claims*.py"), ROOT / "tests" / "test_result_claims.py"})

# -- what is not sourced yet, by name ----------------------------------------------------------------------------------
LEAD_REMAKES: dict[str, list] = {}
"""Re-made from the new default result (issue 41): checked again once these entries are gone."""

UNSOURCED: dict[str, list] = {
    "docs/results/performance.md": [
        "## A real model: SmolLM2-135M-Instruct",  # typed from runs at commit 827daa4 (the page says so)
        ("On the same machine under a load", "Read the ratios of an idle run"),  # other runs than results/benchmark
        "|Δ log-prob| is at most 5e-7 in fp32",  # measured by hand (tests/test_speedups.py bounds it at 1e-5)
        ("At 1M parameters and 8 sequences", "TRL calls the same forwards"),  # a profile by hand: ms, ops, GFLOP
        # the sampler, timed by hand
        "27 ms per decoding step for 16 rows of SmolLM2's 49,152 ids, against 1.7 ms",
        "4.11 s against HF `generate`'s 4.57 s with the same shared prefill (median of 6, alternated in one process; "
        "0.93 paired)",
        "0.65 ms at 1M parameters (6.5 ms for the per-tensor loop) and 18 ms at 10M (73 ms)",  # fused AdamW
        "3.70 s\nagainst 4.52 s with them, 5.72 s against 5.79 s without",  # the speed-ups together, under load
        "took 32 s and made the SFT forward + backward 16% faster (9.9 → 8.3 ms)",  # torch.compile, tried once
    ],
    "docs/guides/scaling-out.md": [
        ("**Measured** (", "**Checkpoints and the final model.**"),  # FSDP2 / DDP: benchmark_fsdp.py writes no result
        "(~1e-15 in practice)", "(float64: ~1e-15 in practice)",  # the tests bound it at 1e-10 and 1e-6
        "takes 7.1 s end to end in\none process (0.42 s of it training) and 7.5 s in two (0.44 s training) on the idle "
        "machine; 22 s and 28–29 s\nunder a load of ~10", "the same run took 71–113 s",
    ],
    "docs/guides/data-and-rewards.md": [
        # configuration the page does not name: the --quick stage-1 budget (experiments/compare_config.py) and the
        # example data's size
        "(300 steps of 64 demonstrations", "with 300 rows like",
        "(24 tokens at most, so 137\nsteps)", "spent 60 s in stage 1 and 91 s\nin all",  # a --quick run, by hand
        # contradicted: experiments/configs/default.yaml has sft_base.steps 2000 (a cap) and batch_size 64
        "the built-in stage 1 (1,600 steps of 128) trains 23 times as many\ndemonstrations (1600·128 / (137·64) = "
        "23.4)",
    ],
}
"""Measurements with no file in results/, per page: a heading (its section), a (start, end) pair (the text from start
up to end) or a phrase. Each needs a result (and a claim test where the page derives from it) or a cut."""

# -- what is not a result ----------------------------------------------------------------------------------------------
NOT_RESULTS: dict[str, str] = {
    "80 columns": "the width gcframe/tracking/progress.py draws a bar at when the terminal reports no size",
    "torch 2.13's": "a version",
    "TRL 1.16": "a version (requirements/lock.txt pins trl==1.16.0)",
    "(23 GiB RAM)": "the benchmark machine's memory",
    "in about 40 lines": "the length of the adding-a-method guide's complete example",
    "the 99 other tokens": "the estimator lab's 100-token vocabulary less the right token",
    "at most 11 tokens": "the default task's longest demonstration",
    "exit status 130": "Ctrl-C's exit status, 128 + SIGINT (gcframe/errors.py)",
    "exit status 143": "SIGTERM's exit status, 128 + SIGTERM (gcframe/errors.py)",
}
"""A phrase -> what it is: the numbers inside the phrase are not results, wherever the phrase stands."""

WALL_CLOCK = re.compile(r"~?\d+(?:\.\d+)? (?:h(?: \d+ min)?|min(?:utes)?(?: \d+ s)?)\b")
"""'1 h 39 min', '2 h 06 min', '~1 h', '8 min 20 s', '63 minutes': how long a whole command took (5 above)."""

YEAR = re.compile(r"(?:[A-Z][a-zA-Z]+(?: et al\.,?| and [A-Z][a-z]+)? \(?|\()((?:19|20)\d\d)\b")
"""A citation's year: 'Williams 1992', 'Ahmadian et al. 2024', 'Agarwal et al. (2021)', '(2007)'."""

# -- numbers -----------------------------------------------------------------------------------------------------------
INT = r"\d{1,3}(?:,\d{3})+(?!\d)|\d+"
NUMBER = re.compile(rf"(?<![\w.@§/#^·])(?:[+\-−](?=\d))?(?:{INT})(?:\.\d+)?(?:e[\-−+]?\d+)?(?![\w@]|\.\d)(%?)")
"""A number standing alone: not part of a name (SmolLM2, pass@8, §5.2, k3, 135M, float32) or of another number."""
ANY_NUMBER = re.compile(rf"(?:{INT})(?:\.\d+)?(?:[eE][\-−+]?\d+)?")
PERCENT_RANGE = re.compile(r"(?:–| to )\d+(?:\.\d+)?%")
"""'82–85%': the 82 is a percentage too."""
ARITHMETIC = re.compile(r"((?:\(?\d[\d.,]*\)? ?[×·*+/−-] ?)+\(?\d[\d.,]*\)?) ?= ?(\d[\d.,]*)")
"""'4 × 8 = 32', '(16 − 2) × 44 = 616', '1600·128 / (137·64) = 23.4': an expression and its value."""
EXACT = 20
"""The decimals of a number literal in code: exact."""


def _value(token: str) -> tuple[float, int]:
    """(|value|, decimals written): '1,536' -> (1536.0, 0); '−0.420' -> (0.42, 3); '4.6e-7' -> (4.6e-07, 8)."""
    t = token.replace(",", "").replace("−", "-").lower()
    mantissa, _, exponent = t.partition("e")
    decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
    return abs(float(t)), max(decimals - int(exponent or 0), 0)


def _fraction(percent: str) -> tuple[float, int]:
    """'72' (per cent) -> (0.72, 2); '80' -> (0.8, 1): the digits written, as a fraction."""
    v, d = _value(percent)
    whole = percent.split(".")[0]
    return v / 100, d + 2 - (len(whole) - len(whole.rstrip("0")) if d == 0 else 0)


def _numbers_in(text: str) -> set[tuple[float, int]]:
    """Every number written in a text, as (|value|, decimals)."""
    return {_value(m.group(0)) for m in ANY_NUMBER.finditer(text)}


@cache
def _sorted(sources: frozenset) -> tuple[list[float], list[int]]:
    """The values in order, and their decimals: what `_matches` bisects."""
    pairs = sorted(sources)
    return [v for v, _ in pairs], [d for _, d in pairs]


def _matches(x: tuple[float, int], sources: frozenset) -> bool:
    """x, at the precision it is written at, is a source value written with at least as many decimals."""
    v, d = x
    half = 0.5 * 10 ** -d * (1 + 1e-9)
    values, decimals = _sorted(sources)
    lo, hi = bisect.bisect_left(values, v - half), bisect.bisect_right(values, v + half)
    return any(decimals[i] >= d for i in range(lo, hi))


# -- sources -----------------------------------------------------------------------------------------------------------
def _literals(node: ast.AST, skip=()) -> set[tuple[float, int]]:
    """Number literals under an AST node (numbers exact, strings as written), less the string nodes in `skip`."""
    out = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Constant) and isinstance(n.value, (int, float)) and not isinstance(n.value, bool):
            out.add((abs(float(n.value)), EXACT))
        elif isinstance(n, ast.Constant) and isinstance(n.value, str) and n not in skip:
            out |= _numbers_in(n.value)
    return out


@cache
def claim_checks() -> tuple[tuple[str, frozenset], ...]:
    """(quoted passage, whitespace flattened; the numbers its test holds) for every `_says` quote of the claim tests:
    a test's numbers are its literals less its docstring and its quotes."""
    out = []
    for path in CLAIM_TESTS:
        for fn in ast.parse(path.read_text()).body:
            if not (isinstance(fn, ast.FunctionDef) and fn.name.startswith("test")):
                continue
            quotes = [a for c in ast.walk(fn) if isinstance(c, ast.Call) and getattr(c.func, "id", "") == "_says"
                      for a in c.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            doc = fn.body[0].value if fn.body and isinstance(fn.body[0], ast.Expr) else None
            checked = frozenset(_literals(fn, skip={*quotes, doc}))
            out += [(_flat(q.value), checked) for q in quotes]
    return tuple(out)


def _leaves(value):
    """The scalars of a loaded YAML or JSON document."""
    if isinstance(value, dict):
        for v in value.values():
            yield from _leaves(v)
    elif isinstance(value, list):
        for v in value:
            yield from _leaves(v)
    else:
        yield value


@cache
def _file_numbers(path: Path) -> frozenset:
    """Number literals of a Python file, or the values of a YAML or JSON file (its comments are not values)."""
    if path.suffix == ".py":
        return frozenset(_literals(ast.parse(path.read_text())))
    doc = json.loads(path.read_text()) if path.suffix == ".json" else yaml.safe_load(path.read_text())
    out = set()
    for leaf in _leaves(doc):
        if isinstance(leaf, (int, float)) and not isinstance(leaf, bool):
            out.add((abs(float(leaf)), EXACT))
        elif isinstance(leaf, str):
            out |= _numbers_in(leaf)
    return frozenset(out)


def configuration(text: str) -> frozenset:
    """3: the config and environment of the results the page names, the default config, the files it names."""
    files = {DEFAULT_CONFIG}
    names = set(re.findall(r"(?:results|data)/(\w+)", text)) | set(re.findall(r"<!-- result: (\w+)/", text))
    for name in names:
        files |= {p for p in (RESULTS / name).glob("*") if p.suffix in (".yaml", ".json") and p.name != "bench.json"}
    for path in re.findall(r"\b((?:analysis|experiments|gcframe|methods|tests)/[\w/]+\.(?:py|yaml))", text):
        files.add(ROOT / path)
    return frozenset(x for p in files if p.is_file() for x in _file_numbers(p))


def shown(text: str) -> list[tuple[int, int, frozenset]]:
    """2: (start, end, values) of each section of the page (its top and every "#"/"##" heading start one): the values
    of the tables rendered in it. A sentence restates the tables of its own section."""
    starts = [0] + [m.start() for m in re.finditer(r"^##? ", text, re.M)] + [len(text)]
    return [(a, b, frozenset(x for m in MARK.finditer(text, a, b) for x in _numbers_in(m.group("body"))))
            for a, b in zip(starts, starts[1:])]


# -- the page's own words ----------------------------------------------------------------------------------------------
def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def _blank(text: str, start: int, end: int) -> str:
    """text with [start, end) blanked, newlines kept: positions stay where they were."""
    return text[:start] + re.sub(r"[^\n]", " ", text[start:end]) + text[end:]


def _blank_all(text: str, pattern, flags=0) -> str:
    for m in reversed(list(re.finditer(pattern, text, flags))):
        text = _blank(text, m.start(), m.end())
    return text


def _find(text: str, phrase: str, start: int = 0) -> tuple[int, int]:
    """Where a phrase is, line breaks and indentation aside; a ValueError naming it where it is not."""
    m = re.compile(r"\s+".join(map(re.escape, phrase.split()))).search(text, start)
    if not m:
        raise ValueError(f"no longer on the page: {phrase!r} (drop it from its list)")
    return m.span()


def _section(text: str, heading: str) -> tuple[int, int]:
    """Where a heading's section is: to the next heading of the same or a higher level."""
    start = _find(text, heading)[0]
    level = len(heading) - len(heading.lstrip("#"))
    nxt = re.compile(rf"^#{{1,{level}}} ", re.M).search(text, start + len(heading))
    return start, nxt.start() if nxt else len(text)


def own_words(rel: str, text: str) -> str:
    """The page with everything but its own words blanked (positions kept), and what is not sourced yet."""
    page = text  # blanking keeps positions: every entry is found on the page as written
    for entry in LEAD_REMAKES.get(rel, []) + UNSOURCED.get(rel, []):
        if entry is None:
            return re.sub(r"[^\n]", " ", text)
        if isinstance(entry, tuple):
            start = _find(page, entry[0])[0]
            text = _blank(text, start, _find(page, entry[1], start)[0])
        elif entry.startswith("#"):
            text = _blank(text, *_section(page, entry))
        else:
            text = _blank(text, *_find(page, entry))
    for phrase in NOT_RESULTS:
        text = _blank_all(text, r"\s+".join(map(re.escape, phrase.split())))
    text = _blank_all(text, MARK)
    filled = r"<!-- gcframe:value .*?<!-- /value -->"  # a value the docs hook fills in and checks
    for pattern in (r"```.*?```", filled, r"<!--.*?-->", r"<sub>.*?</sub>", r"\$\$.*?\$\$", r"\{\{.*?\}\}", r"`[^`]*`"):
        text = _blank_all(text, pattern, re.S)  # code, comments, provenance lines, maths, placeholders
    quote = r"\"[^\"\n]*(?:\n[^\"\n]*)?\"|“[^”]*”"  # a quoted example, which may wrap once
    for pattern in (r"\$[^$\n]+\$", r"\]\([^)\s]*\)", r"https?://\S+", quote, WALL_CLOCK, r"(?m)^\s*\d+\. "):
        text = _blank_all(text, pattern)  # maths, a link's target, a quote, a wall-clock time, a numbered list
    return text


def _quoted_spans(text: str):
    """(start, end, the numbers its test holds) of every passage of the page a claim test quotes."""
    flat, where = [], []
    for i, ch in enumerate(text):
        if ch.isspace() and flat and flat[-1] == " ":
            continue
        flat.append(" " if ch.isspace() else ch)
        where.append(i)
    flat = "".join(flat)
    for quote, checked in claim_checks():
        for m in re.finditer(re.escape(quote), flat):
            yield where[m.start()], where[m.end() - 1] + 1, checked


def unsourced(rel: str, text: str) -> list[str]:
    """'NUMBER in «context»' for every number of the page's own words that has no source."""
    words = own_words(rel, text)
    sources = set(configuration(text))
    for m in ARITHMETIC.finditer(words):  # 4: a number computed in place
        expr = m.group(1).replace("×", "*").replace("·", "*").replace("−", "-").replace(",", "")
        try:
            value = eval(expr, {"__builtins__": {}})  # digits, brackets and + - * / only (ARITHMETIC)
        except (SyntaxError, TypeError, ZeroDivisionError):
            continue
        x = _value(m.group(2))
        if _matches(x, frozenset({(abs(value), EXACT)})):
            sources.add(x)
    sources = frozenset(sources)
    quoted, sections = list(_quoted_spans(text)), shown(text)
    years = {m.start(1) for m in YEAR.finditer(words)}
    out = []
    for m in NUMBER.finditer(words):
        if m.start() in years:
            continue
        own = [sources, *(checked for s, e, checked in quoted if s <= m.start() < e),
               *(values for s, e, values in sections if s <= m.start() < e)]
        x = _value(m.group(0).rstrip("%"))
        percent = m.group(1) == "%" or PERCENT_RANGE.match(words, m.end())
        if not any(_matches(x, pool) or percent and _matches(_fraction(m.group(0).rstrip("%")), pool) for pool in own):
            out.append(f"{m.group(0)} in «{_flat(words[max(0, m.start() - 60):m.end() + 30]).strip()}»")
    return out


def pages() -> list[Path]:
    docs = [p for p in sorted((ROOT / "docs").rglob("*.md")) if "data" not in p.relative_to(ROOT / "docs").parts]
    return [ROOT / "README.md", *docs]


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_number_in_prose_has_a_source(page):
    rel = str(page.relative_to(ROOT))
    missing = unsourced(rel, page.read_text())
    assert not missing, f"{rel}: numbers with no source (a result and a claim test, or a cut):\n  " + \
        "\n  ".join(missing)


# -- the checker itself ------------------------------------------------------------------------------------------------
TABLE = "<!-- result: toy/table.csv -->\n| method | accuracy |\n|---|---|\n| grpo | 0.4207 |\n<!-- /result -->\n"


def _missing(text: str, rel: str = "docs/results/toy.md") -> list[str]:
    return [m.split(" in ")[0] for m in unsourced(rel, text)]


def test_a_number_typed_from_memory_fails():
    assert _missing("# Toy\n\nA pilot rose from 0.613 to 0.787.\n") == ["0.613", "0.787"]


def test_a_number_restates_a_table_of_its_own_section_at_its_precision():
    text = f"# Toy\n\n{TABLE}\nGRPO ends at 0.42 (0.421, 0.4207; not 0.43).\n\n## Elsewhere\n\nGRPO ends at 0.42.\n"
    assert _missing(text) == ["0.43", "0.42"]  # 0.4207 rounds to 0.42 and 0.421, never 0.43; other sections: no table
    assert _missing(f"# Toy\n\n{TABLE}\n42% of it; 37–42% of it.\n") == ["37"]  # 42% = 0.42; the range's 37 is not


def test_computed_in_place_wall_clock_and_citations_are_not_results():
    assert "616" not in _missing("# Toy\n\n(16 − 2) × 44 = 616 prompt tokens are saved.\n")
    assert _missing("# Toy\n\nIt took 1 h 39 min, then 63 minutes (Williams 1992; Agarwal et al. (2021)).\n") == []
    assert _missing('# Toy\n\nThe prompt "What is 50+58?" and `python x.py --steps 731`.\n') == []


def test_a_claim_tests_quote_sources_the_numbers_its_test_checks():
    quote = "Every last-third interval contains 0 at 2 seeds; GRPO (+0.104) and RLOO (+0.083) gained most over it."
    assert _missing(f"# Toy\n\n{quote}\n") == []  # tests/test_result_claims.py quotes it and checks both
    assert _missing(f"# Toy\n\n{quote.replace('+0.083', '+0.084')}\n") == ["+0.104", "+0.084"]  # not the quote now


def test_an_entry_no_longer_on_its_page_fails(monkeypatch):
    monkeypatch.setitem(UNSOURCED, "docs/results/toy.md", ["a measurement since cut"])
    with pytest.raises(ValueError, match="no longer on the page"):
        unsourced("docs/results/toy.md", "# Toy\n\nNothing measured.\n")
