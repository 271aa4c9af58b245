"""Calibration and end-to-end validation against real whole-network measurements (ONNX Runtime)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from nagkit.latency.table import LatencyTable
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
@pytest.mark.serial
def test_calibrate_then_validate_end_to_end(tmp_path, cli_env):
    import yaml

    from nagkit.devices.registry import get_device
    from nagkit.latency.calibration import MIN_NETWORKS
    from nagkit.latency.profiler import profile
    from nagkit.latency.validate import calibrate

    space = make_tiny_space(resolutions=(32,))
    dev_file = tmp_path / "dev.yaml"
    dev_file.write_text(yaml.safe_dump({"device": "cpu:runtime=onnxruntime,threads=1", "measure": MEASURE}))
    out = tmp_path / "t.json"
    with get_device(str(dev_file)) as dev:
        table = profile(dev, space, [32], out, cache_dir=tmp_path / "cache", progress=False).table
        result = calibrate(table, dev, space, MIN_NETWORKS, seed=1, cache_dir=tmp_path / "cache", progress=False,
                           jobs=1, passes=2, extra_passes=1)
    c = result.candidate
    assert c.n_fit == MIN_NETWORKS and c.scale > 0 and len(c.details["fit_archs"]) == MIN_NETWORKS
    rec = result.record  # held-out fidelity and the measurement noise, whether adopted or not
    assert rec["held_out"]["calibrated_mape"] == pytest.approx(c.details["loo_mape"])
    assert rec["adopted"] == (rec["held_out"]["calibrated_mape"] < rec["held_out"]["raw_mape"])
    assert rec["noise"]["n_passes"] >= 2 * MIN_NETWORKS and rec["noise"]["single_measurement_sd_pct"] >= 0
    saved = result.apply(table)
    saved.save(out)
    back = LatencyTable.load(out)
    assert back.provenance["fidelity"]["held_out"] == rec["held_out"]
    assert (back.calibration is not None) == rec["adopted"]
    plot = tmp_path / "scatter.png"
    res = run_cli(["lut", "validate", "--lut", str(out), "--device", str(dev_file), "--samples", "6",
                   "--seed", "9", "--cache-dir", str(tmp_path / "cache"), "--plot", str(plot), "--no-progress", "-j", "1",
                   "--json"], env=cli_env)
    assert res.code == 0, res.err
    rep = json.loads(res.out)
    assert len(rep["archs"]) == 6 and rep["raw"] and rep["noise"]["n_passes"] >= 6 * 2
    assert set(rep["verdict"]) >= {"meets_5pct", "text"}
    row = rep["archs"][0]
    if back.calibration is not None:
        assert row["calibrated_ms"] == pytest.approx(back.predict(space, row["arch"]))
    assert row["measured_ms"] > 0 and -1 <= rep["raw"]["spearman"] <= 1
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
