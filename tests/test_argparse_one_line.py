"""An argument argparse refuses is one line like every other refusal: `error: ...`, exit 2, no usage block."""
import pytest


@pytest.mark.parametrize("module, argv, words", [
    ("experiments.compare", ["--steps", "ten"], "argument --steps: invalid int value: 'ten'"),
    ("experiments.compare", ["--threads", "abc"], "argument --threads"),
    ("experiments.reproduce", ["--nope"], "unrecognized arguments: --nope"),
    ("analysis.report", [], "the following arguments are required"),
])
def test_argparse_refusals_are_one_line(capsys, module, argv, words):
    import importlib

    main = importlib.import_module(module).main
    with pytest.raises(SystemExit) as e:
        main(argv)
    out, err = capsys.readouterr()
    assert e.value.code == 2 and err.count("\n") == 1 and err.startswith("error: ") and words in err, err
    assert "usage:" not in err and "--help shows every option" in err
