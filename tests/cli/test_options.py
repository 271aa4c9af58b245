"""Shared CLI options: non-finite numbers refused at the boundary, strict JSON (issue 13 D10)."""

from __future__ import annotations

import json

import pytest

from .helpers import run_cli_inproc


def strict_loads(text: str):
    """json.loads that refuses NaN/Infinity, as every non-Python JSON parser does."""
    def _refuse(name):
        raise ValueError(f"non-standard JSON constant {name}")

    return json.loads(text, parse_constant=_refuse)


# (command line before the bad value, the option's name): every float option of the CLI
FLOAT_OPTIONS = [
    (["search", "-b"], "--budget"),
    (["search", "-b", "5", "--time-limit"], "--time-limit"),
    (["check", "MODEL", "--device", "cpu", "--budget"], "--budget"),
    (["build", "--budget"], "--budget"),
    (["compare", "--budgets", "5", "--hist-budget"], "--hist-budget"),
    (["supernet", "train", "--max-minutes"], "--max-minutes"),
    (["lut", "calibrate", "--shrinkage"], "--shrinkage"),
    (["lut", "validate", "--min-within-5"], "--min-within-5"),
]


@pytest.mark.parametrize("bad", ["inf", "-inf", "nan", "1e999"])
@pytest.mark.parametrize("args, option", FLOAT_OPTIONS, ids=[" ".join(a[:2]) + " " + o for a, o in FLOAT_OPTIONS])
def test_d10_non_finite_numbers_are_refused_at_the_cli_boundary(args, option, bad, capsys, tmp_path):
    model = tmp_path / "m.tflite"
    model.write_bytes(b"not a model")  # exists, so only the budget can be at fault
    argv = [str(model) if a == "MODEL" else a for a in args] + [bad]
    res = run_cli_inproc(argv, capsys)
    assert res.code == 2, (res.code, res.err)
    assert option in res.err and repr(bad) in res.err and "finite" in res.err, res.err
    assert "Traceback" not in res.err and res.out == ""


@pytest.mark.parametrize("budgets", [["inf"], ["5,nan"], ["5", "-inf"]])
def test_d10_generate_refuses_non_finite_budgets(budgets, capsys):
    argv = ["generate"] + [x for b in budgets for x in ("-b", b)]
    res = run_cli_inproc(argv, capsys)
    assert res.code == 2 and "finite" in res.err and res.err.count("\n") == 1, res.err


def test_d10_json_output_is_strict(capsys):
    from nagkit.cli.options import emit

    emit({"budget_ms": float("inf"), "rows": [{"tau": float("nan")}, 1.5], "n": 3}, True)
    out = capsys.readouterr().out
    assert strict_loads(out) == {"budget_ms": None, "rows": [{"tau": None}, 1.5], "n": 3}


def test_d10_json_output_keeps_finite_values_and_objects(capsys):
    from pathlib import Path

    from nagkit.cli.options import emit

    emit({"p": Path("/x"), "v": 1e308}, True)
    assert strict_loads(capsys.readouterr().out) == {"p": "/x", "v": 1e308}
