"""Labels that say what they are: the console table names its evaluation split, tick labels of large counts stay
apart, the base's line names its test score."""
import pandas as pd

from analysis.report import _compact
from experiments.compare import console_table


def test_large_tick_values_are_compact():
    assert [_compact(v) for v in (75_000, 100_000, 1_500_000, 250, 0)] == ["75k", "100k", "1.5M", "250", "0"]


def test_the_console_table_names_the_split_of_its_accuracies():
    df = pd.DataFrame([{"method": "grpo", "seed": 0, "base_accuracy": 0.296, "final_accuracy": 0.8, "time_s": 20.0}])
    text = console_table(df, "validation")
    assert "base (validation)" in text and "final_mean (validation)" in text and "0.296" in text
    assert "base (test)" in console_table(df)
