"""analysis.redecide on committed results other than the default (tests/test_subgroups.py re-decides that one,
marked slow): the findings written again from a result's own files (problems.csv.gz, summary.csv, config.yaml,
findings.md's sources line) hold every committed row unchanged, and a folder that lacks those files is refused in
one line."""
import shutil
from pathlib import Path

import pandas as pd
import pytest

from analysis.redecide import main, redecide

RESULTS = Path(__file__).resolve().parents[1] / "results"


@pytest.mark.parametrize("name", ["word_problems_pipeline", "smollm2"])
def test_a_result_redecided_from_its_files_keeps_every_committed_row(name, tmp_path):
    copy = tmp_path / name
    shutil.copytree(RESULTS / name, copy)
    assert redecide(copy) == []  # no verdict changed
    for f in ("pairs.csv", "gains.csv", "findings.csv", "design.csv"):
        if not (RESULTS / name / f).is_file():
            continue
        old, new = (pd.read_csv(d / f, dtype=str, keep_default_na=False) for d in (RESULTS / name, copy))
        if "subgroup" in new and "subgroup" not in old:  # planned subgroups written beside the rows on all problems
            new = new[new["subgroup"] == "all"].drop(columns="subgroup")
        assert new.reset_index(drop=True).equals(old.reset_index(drop=True)), (name, f)


def test_a_folder_without_outcomes_is_refused_in_one_line(tmp_path, capsys, monkeypatch):
    import analysis.redecide as rd

    (tmp_path / "bare").mkdir()
    monkeypatch.setattr(rd, "RESULTS", tmp_path)
    with pytest.raises(SystemExit) as e:
        main(["bare"])
    err = capsys.readouterr().err.strip()
    assert e.value.code == 2 and err.count("\n") == 0 and "problems.csv.gz" in err
