"""No published file names a folder of the machine that made it: results/, docs/ and the README are read on other
machines, where such a path names nothing (a result's config.yaml once named its SFT model by an absolute path into
the developers' run folder, so the tests that rebuild its problems passed there and nowhere else). A model is named
by a package or hub name, or by a path relative to the repository or the cache; the collectors write every path so
(gcframe.tracking.env.portable, analysis.results.publish)."""
import re
from pathlib import Path

import pytest

from gcframe.tracking import env as envinfo

ROOT = Path(__file__).resolve().parents[1]
PUBLISHED = [ROOT / "results", ROOT / "docs", ROOT / "README.md", ROOT / "mkdocs.yml"]
MACHINE_PATH = re.compile(r"(?<![\w.~$-])(?:/(?:work|root|home|tmp|Users|private/var)/[\w.-]|\b[A-Za-z]:\\\\?[\w.-])")
"""An absolute path of a machine: Linux home, root, scratch and temporary folders, macOS's home and temporary
folders, a Windows drive (as written, or escaped in JSON)."""


def machine_paths(text: str) -> list[str]:
    """The absolute machine paths in `text` (MACHINE_PATH), each with what follows it up to a space or quote."""
    return [text[m.start():].split()[0].split('"')[0] for m in MACHINE_PATH.finditer(text)]


def published_texts():
    """(path, text) of every text file under PUBLISHED (a file holding a NUL byte, or not UTF-8, is binary: a
    figure, a font, a gzip table, and skipped)."""
    files = [p for top in PUBLISHED for p in ([top] if top.is_file() else sorted(top.rglob("*"))) if p.is_file()]
    for p in files:
        data = p.read_bytes()
        if b"\0" in data:
            continue
        try:
            yield p, data.decode()
        except UnicodeDecodeError:
            continue


def test_the_scan_finds_a_machine_path():
    # what the committed files held before: each must be found, and a repository-relative path must not
    assert machine_paths("  path: /work/main/runs/timed/x-sft/sft/seed0/final\n") == [
        "/work/main/runs/timed/x-sft/sft/seed0/final"]
    assert machine_paths('"command": "python a.py --out /tmp/bmem/bench.json"') == ["/tmp/bmem/bench.json"]
    assert machine_paths('"C:\\\\Users\\\\me\\\\run"') and machine_paths("/home/me/x") and machine_paths("/root/.c/y")
    assert machine_paths("path: runs/reproduce/x-sft/sft/seed0/final, 1/2 and a/work/b, $GCFRAME_CACHE/m") == []


def test_no_published_file_names_a_path_of_the_machine_that_made_it():
    found = {str(p.relative_to(ROOT)): hits[0] for p, text in published_texts() if (hits := machine_paths(text))}
    assert len(list(published_texts())) > 100  # the scan reads the result files, not an empty list
    assert not found, ("published files name absolute paths of the machine that made them (write them relative to "
                       f"the repository or the cache: gcframe.tracking.env.portable): {found}")


@pytest.fixture
def places(tmp_path, monkeypatch):
    """A repository at tmp/gc, a cache at tmp/cache, a home at tmp/home."""
    monkeypatch.setenv("GCFRAME_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return tmp_path


def test_a_published_text_names_paths_from_the_repository_or_the_cache(places):
    t = str(places)
    command = (f"python experiments/compare.py --config {t}/gc/experiments/configs/a.yaml --out {t}/gc/runs/x "
               f"--model={t}/cache/models/ab12 --methods-from {t}/home/my.py --data {t}/gc2/d.csv {t}/runs2/y/z")
    assert envinfo.portable(command, root=places / "gc", elsewhere={places / "runs2": "RUNS"}) == (
        "python experiments/compare.py --config experiments/configs/a.yaml --out runs/x "
        f"--model=$GCFRAME_CACHE/models/ab12 --methods-from ~/my.py --data {t}/gc2/d.csv RUNS/y/z")
    # the repository's own top is ".", and /gc2 (another folder whose name starts with the repository's) is kept


def test_a_collected_result_names_no_machine_path(places):
    from analysis.results import publish, write_env

    run = places / "gc" / "runs" / "x"  # a run folder inside the repository (envinfo.REPO stands for it here)
    run.mkdir(parents=True)
    (run / "config.yaml").write_text(f"model:\n  path: {envinfo.REPO}/runs/x-sft/sft/seed0/final\n")
    publish(run / "config.yaml", places / "config.yaml", run)
    assert (places / "config.yaml").read_text() == "model:\n  path: runs/x-sft/sft/seed0/final\n"
    write_env({"command": f"python experiments/compare.py --out {run}"}, places / "env.json", run)
    assert machine_paths((places / "env.json").read_text()) == []
    assert '"command": "python experiments/compare.py --out RUNS/x"' in (places / "env.json").read_text()
