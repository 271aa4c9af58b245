"""`nagkit build` and `nagkit generate` with limits beside the budget (issue 34, decisions 39):
what --json and the manifest record, the exported file's real size checked, unreachable limits
and bad values refused with one line, nothing written."""

from __future__ import annotations

import json

import pytest

from nagkit.errors import CheckFailedError
from nagkit.export.schema import validate_manifest

from ..cli.helpers import run_cli, run_cli_inproc

LIMITS = ["--max-params", "700K", "--max-size-mb", "2.8", "--max-peak-kb", "300"]


def test_build_meets_the_limits_and_the_manifest_says_what_binds(capsys, tmp_path):
    """One real build with three limits: the manifest and --json agree, the exported files'
    real sizes are recorded and within the limit, and the peak estimate is the exported TFLite
    graph's live-tensor peak (tests/space/test_resources.py checks another network the same way)."""
    from nagkit.runtimes.memory import tflite_activation_memory

    out = tmp_path / "b"
    r = run_cli_inproc(["build", "--budget", "3", *LIMITS, "--accuracy", "never", "--export", "tflite,onnx", "--out",
                        str(out), "--json"], capsys)
    assert r.code == 0, r.err
    res = json.loads(r.out)
    man = json.loads((out / "manifest.json").read_text())
    validate_manifest(man)
    c = man["constraints"]
    assert c == res["constraints"]
    sizes = {name: (out / name).stat().st_size for name in ("model.tflite", "model.onnx")}
    assert c["reached"]["file_bytes"] == sizes and max(sizes.values()) <= 2.8e6
    assert c["limits"] == {"budget_ms": 3.0, "max_params": 7e5, "max_size_mb": 2.8, "max_macs": None,
                           "max_peak_kb": 300.0}
    assert c["reached"]["params"] == man["arch"]["params"] <= 7e5 and c["reached"]["macs"] == man["arch"]["macs"]
    assert c["reached"]["peak_kb"] <= 300
    assert tflite_activation_memory(out / "model.tflite")["liveness_bytes"] == round(c["reached"]["peak_kb"] * 1000)
    rows = c["constraints"]
    assert set(rows) == {"latency_ms", "params", "size_mb", "peak_kb"}
    assert rows["size_mb"]["measured"] and rows["size_mb"]["value"] == max(sizes.values()) / 1e6
    assert rows["size_mb"]["estimated_mb"] >= rows["size_mb"]["value"]  # the estimate is an upper bound
    assert c["binding"] == max(rows, key=lambda k: rows[k]["share"]) and all(v["share"] <= 1 for v in rows.values())
    # the bundle reads back and verifies with its new field
    v = run_cli_inproc(["check", str(out)], capsys)
    assert v.code == 0, v.err


def test_a_real_file_over_max_size_mb_fails_and_leaves_nothing(tmp_path, monkeypatch):
    """With a size model that underestimates (a negative overhead), the generator's pick is over
    the limit as exported: exit 1 (a failed check), no bundle, no staging folder. (The check is
    the same for every format; ONNX is the quickest to export.)"""
    import nagkit
    from nagkit.nag import constraints

    monkeypatch.setitem(constraints.SIZE_OVERHEAD, ("onnx", "fp32"), -400_000)
    out = tmp_path / "b"
    with pytest.raises(CheckFailedError) as e:
        nagkit.build(3.0, out=out, export="onnx", max_size_mb=2.6, accuracy="never")
    assert "--max-size-mb 2.6: the exported network reaches" in e.value.message
    assert "model.onnx" in e.value.message and "nothing was written" in e.value.message
    assert e.value.exit_code == 1
    assert list(tmp_path.iterdir()) == []


def test_unreachable_limits_exit_1_naming_each_smallest_value(cli_env, tmp_path):
    out = tmp_path / "b"
    r = run_cli(["build", "--budget", "0.2", "--max-params", "500K", "--max-peak-kb", "300", "--accuracy", "never",
                 "--out", str(out)], env=cli_env)
    assert r.code == 1 and r.out == "" and "Traceback" not in r.err
    assert "--max-params 500,000 (the smallest in the space: 552,714)" in r.err
    assert "--max-peak-kb 300 kB (the smallest in the space: 161.7 kB, at fp32)" in r.err
    assert "hint: raise --max-params to at least 552,714" in r.err
    assert [p.name for p in tmp_path.iterdir()] == ["home"]


@pytest.mark.parametrize("cmd", ["build", "generate"])
@pytest.mark.parametrize("flag,value,says", [
    ("--max-params", "2.5Q", "unknown suffix 'Q'"), ("--max-macs", "nan", "must be a finite number > 0"),
    ("--max-peak-kb", "0", "must be a finite number > 0"), ("--max-size-mb", "-1", "must be a finite number > 0"),
    ("--max-params", "inf", "must be a finite number > 0"), ("--max-size-mb", "2MB", "MB take no suffix"),
    ("--max-macs", "lots", "is not a number"),
])
def test_bad_limits_exit_2_with_one_line_and_write_nothing(capsys, tmp_path, cmd, flag, value, says):
    out = tmp_path / "b"
    args = ["build", "--budget", "3", "--out", str(out)] if cmd == "build" else \
        ["generate", "--budget", "3"]
    r = run_cli_inproc([*args, flag, value], capsys)
    assert r.code == 2 and r.out == "", r.err
    errors = [ln for ln in r.err.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and says in errors[0] and flag in errors[0] and "e.g." in errors[0]
    assert "Traceback" not in r.err and list(tmp_path.iterdir()) == []


def test_generate_json_records_each_limit_and_what_binds(capsys):
    r = run_cli_inproc(["generate", "--budget", "2", "--max-params", "650K", "--max-macs", "8M", "--no-accuracy",
                        "--json"], capsys)
    assert r.code == 0, r.err
    res = json.loads(r.out)["results"][0]
    c = res["constraints"]
    assert c["limits"]["max_params"] == 650e3 and c["limits"]["max_macs"] == 8e6 and c["limits"]["max_peak_kb"] is None
    assert c["reached"]["params"] <= 650e3 and c["reached"]["macs"] <= 8e6 and c["reached"]["file_bytes"] is None
    assert c["binding"] in ("latency_ms", "params", "macs") and res["best"]["resources"]["params"] == c["reached"]["params"]
    assert all(cand["resources"]["params"] <= 650e3 for cand in res["candidates"])
    human = run_cli_inproc(["generate", "--budget", "2", "--max-params", "650K", "--no-accuracy"], capsys)
    assert "  limits    latency " in human.out and "params " in human.out and "  binding   " in human.out


def test_the_api_takes_the_same_keywords():
    import nagkit

    (r,) = nagkit.generate(2.0, max_params="650K", max_peak_kb=200, accuracy=False)
    assert r.best.resources["params"] <= 650e3 and r.best.resources["peak_kb"] <= 200
    assert r.extra["constraints"]["limits"]["max_peak_kb"] == 200
    with pytest.raises(Exception) as e:
        nagkit.generate(2.0, max_params="2.5Q")
    assert getattr(e.value, "exit_code", None) == 2 and "unknown suffix 'Q'" in str(e.value)


def test_sweep_prints_and_plots_both_frontiers(capsys, tmp_path):
    png = tmp_path / "f.png"
    r = run_cli_inproc(["generate", "--sweep", "4", "--max-params", "650K", "--plot", str(png), "--no-accuracy",
                        "--json"], capsys)
    assert r.code == 0, r.err
    res = json.loads(r.out)
    only, lim = res["curves"]["latency only"], res["curves"]["with limits"]
    assert len(only) == len(lim) == 4 and res["plot"] == str(png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and [p.name for p in tmp_path.iterdir()] == ["f.png"]
    assert all(x["params"] <= 650e3 and x["latency_ms"] <= x["budget_ms"] + 1e-9 for x in lim)
    assert any(x["params"] > 650e3 for x in only)  # the limit binds somewhere, so the curves differ
    assert only[-1]["budget_ms"] == lim[-1]["budget_ms"] and lim[0]["budget_ms"] >= only[0]["budget_ms"]
    human = run_cli_inproc(["generate", "--sweep", "3", "--max-macs", "6M", "--no-accuracy"], capsys)
    assert human.code == 0 and "with limits:" in human.out and "latency only:" in human.out


@pytest.mark.parametrize("args,says", [
    (["--sweep", "4"], "give one of --max-params"), (["--sweep", "4", "--budget", "2", "--max-params", "700K"],
                                                    "drop --budget"),
    (["--plot", "x.png", "--max-params", "700K"], "--plot goes with --sweep N"), (["--sweep", "1"], "not in 2..100"),
    (["--sweep", "4", "--max-params", "100K"], "the smallest in the space: 552,714"),
])
def test_bad_sweeps_are_one_line_and_write_nothing(capsys, tmp_path, monkeypatch, args, says):
    monkeypatch.chdir(tmp_path)
    r = run_cli_inproc(["generate", *args], capsys)
    assert r.code in (1, 2) and r.out == "" and says in r.err and list(tmp_path.iterdir()) == []
    assert len([ln for ln in r.err.splitlines() if ln.lower().startswith("error:")]) == 1  # click's own: "Error:"
