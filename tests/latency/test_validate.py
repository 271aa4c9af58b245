"""Calibration and end-to-end validation against real whole-network measurements (ONNX Runtime)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from nagkit.latency.table import Calibration, LatencyTable
from nagkit.latency.validate import fidelity, random_archs
from tests.cli.helpers import run_cli
from tests.latency.conftest import make_tiny_space

MEASURE = {"warmup_runs": 2, "warmup_s": 0.01, "min_runs": 5, "min_time_s": 0.03, "max_time_s": 0.3,
           "max_runs": 300}


def test_fidelity_metrics_on_known_values():
    meas = np.array([10.0, 20.0, 30.0, 40.0])
    pred = np.array([10.4, 21.5, 30.0, 36.0])  # +4%, +7.5%, 0%, -10%
    m = fidelity(pred, meas)
    assert m["mape"] == pytest.approx((4 + 7.5 + 0 + 10) / 4)
    assert m["within_5pct"] == 0.5 and m["within_10pct"] == 1.0
    assert m["spearman"] == pytest.approx(1.0)
    assert m["max_abs_error_pct"] == pytest.approx(10.0)


def test_random_archs_are_seeded_distinct_and_restricted(lat_space):
    a = random_archs(lat_space, 30, seed=4, resolutions=[40])
    assert a == random_archs(lat_space, 30, seed=4, resolutions=[40])
    assert len(set(a)) == 30 and {x.r for x in a} == {40}


@pytest.mark.slow
def test_calibrate_then_validate_end_to_end(tmp_path, cli_env):
    import yaml

    from nagkit.devices.registry import get_device
    from nagkit.latency.profiler import profile
    from nagkit.latency.validate import calibrate

    space = make_tiny_space(resolutions=(32,))
    dev_file = tmp_path / "dev.yaml"
    dev_file.write_text(yaml.safe_dump({"device": "cpu:runtime=onnxruntime,threads=1", "measure": MEASURE}))
    out = tmp_path / "t.json"
    with get_device(str(dev_file)) as dev:
        table = profile(dev, space, [32], out, cache_dir=tmp_path / "cache", progress=False).table
        cal = calibrate(table, dev, space, 6, seed=1, cache_dir=tmp_path / "cache", progress=False, jobs=1)
    c = cal.calibration
    assert c.n_fit == 6 and c.scale > 0 and len(c.details["fit_archs"]) == 6
    refit = Calibration.fit(c.details["fit_raw_ms"], c.details["fit_measured_ms"])
    assert refit.fit_error <= c.details["raw_mape"] + 1e-9  # least squares never does worse than identity
    cal.save(out)
    assert LatencyTable.load(out).calibration.scale == pytest.approx(c.scale)
    plot = tmp_path / "scatter.png"
    res = run_cli(["lut", "validate", "--lut", str(out), "--device", str(dev_file), "--samples", "6",
                   "--seed", "9", "--cache-dir", str(tmp_path / "cache"), "--plot", str(plot), "--no-progress", "-j", "1",
                   "--json"], env=cli_env)
    assert res.code == 0, res.err
    rep = json.loads(res.out)
    assert len(rep["archs"]) == 6 and rep["raw"] and rep["calibrated"]
    row = rep["archs"][0]
    assert c.model == "grouped"
    assert row["calibrated_ms"] == pytest.approx(LatencyTable.load(out).predict(space, row["arch"]))
    assert row["measured_ms"] > 0 and -1 <= rep["calibrated"]["spearman"] <= 1
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
