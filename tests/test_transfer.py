"""analysis.transfer: one result's ordering checked on another, pair by pair, from the two pairs.csv files."""
from __future__ import annotations

import pandas as pd
import pytest

from analysis import transfer
from gcframe.errors import UserError

COLUMNS = ["comparison", "metric", "Δ [95% interval]", "P(A>B)", "separated", "seeds", "problems",
           "paired SE / unpaired SE", "subgroup"]


def write(folder, rows):
    folder.mkdir()
    pd.DataFrame([dict(zip(COLUMNS, r)) for r in rows]).to_csv(folder / "pairs.csv", index=False)
    return folder


def test_each_pair_gets_its_outcome_and_a_reversed_pair_is_turned_round(tmp_path):
    toy = write(tmp_path / "toy", [
        ("a − b", "greedy", "+0.100 [+0.050, +0.150]", 1.0, "yes", 5, 500, 0.9, "all"),
        ("a − c", "greedy", "+0.200 [+0.100, +0.300]", 1.0, "yes", 5, 500, 0.9, "all"),
        ("b − c", "greedy", "-0.040 [-0.070, -0.010]", 0.0, "yes", 5, 500, 0.9, "all"),
        ("a − d", "greedy", "+0.010 [-0.020, +0.040]", 0.7, "no", 5, 500, 0.9, "all"),
        ("a − b", "greedy", "-0.050 [-0.080, -0.020]", 0.0, "yes", 5, 146, 0.9, "no_carry"),
        ("a − b", "pass@8", "+0.300 [+0.200, +0.400]", 1.0, "yes", 5, 500, 0.9, "all"),
        ("a − e", "greedy", "+0.300 [+0.200, +0.400]", 1.0, "yes", 5, 500, 0.9, "all"),  # e not in the real one
    ])
    real = write(tmp_path / "real", [
        ("a − b", "greedy", "+0.080 [+0.010, +0.150]", 1.0, "yes", 3, 500, 0.9, "all"),
        ("c − a", "greedy", "-0.050 [-0.150, +0.050]", 0.2, "no", 3, 500, 0.9, "all"),  # written the other way
        ("b − c", "greedy", "+0.060 [+0.020, +0.100]", 1.0, "yes", 3, 500, 0.9, "all"),
        ("d − a", "greedy", "+0.090 [+0.030, +0.150]", 1.0, "yes", 3, 500, 0.9, "all"),
        ("a − b", "greedy", "-0.020 [-0.060, +0.020]", 0.1, "no", 3, 150, 0.9, "no_carry"),
    ])
    table = transfer.transfer(toy, real)
    got = {(r.comparison, r.subgroup): (r.real, r.outcome) for r in table.itertuples(index=False)}
    assert got == {
        ("a − b", "all"): ("+0.080 [+0.010, +0.150]", "holds"),
        # c − a = −0.050 [−0.150, +0.050] turned round: a − c = +0.050 [−0.050, +0.150], not separated
        ("a − c", "all"): ("+0.050 [-0.050, +0.150]", "unconfirmed"),
        ("b − c", "all"): ("+0.060 [+0.020, +0.100]", "reversed"),
        # d − a = +0.090 separated: a − d = −0.090 [−0.150, −0.030], found only on the second
        ("a − d", "all"): ("-0.090 [-0.150, -0.030]", "new"),
        ("a − b", "no_carry"): ("-0.020 [-0.060, +0.020]", "unconfirmed"),
    }
    with pytest.raises(UserError, match="real/pairs.csv has no 'pass@8' rows: choose --metric among greedy"):
        transfer.transfer(toy, real, "pass@8")  # the toy decides pass@8, the real result does not
    other = write(tmp_path / "other", [("x − y", "greedy", "+0.1 [+0.05, +0.15]", 1.0, "yes", 3, 500, 0.9, "all")])
    with pytest.raises(UserError, match="decide no pair in common for 'greedy'"):
        transfer.transfer(toy, other)


def test_bad_input_is_one_line(tmp_path, capsys):
    toy = write(tmp_path / "toy", [("a − b", "greedy", "+0.1 [+0.05, +0.15]", 1.0, "yes", 5, 500, 0.9, "all")])
    for argv, words in (([str(toy), str(tmp_path / "nope")], "pairs.csv not found"),
                        ([str(toy), str(toy), "--metric", "maj@4"], "no 'maj@4' rows: choose --metric among greedy"),
                        ([str(toy), str(toy), "--subgroup", "carry"], "--subgroup carry: the pairs in common are in all")):
        with pytest.raises(SystemExit) as e:
            transfer.main(argv)
        assert e.value.code == 2
        assert words in capsys.readouterr().err
