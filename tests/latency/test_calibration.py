"""Grouped calibration: fit, prediction paths, storage, refit, and refusal of bad records."""

from __future__ import annotations

import json

import numpy as np
import pytest

from nagkit.errors import ArtifactError, BadInputError
from nagkit.latency.calibration import fit_grouped, group_sums, refit_calibration
from nagkit.latency.keys import block_group
from nagkit.latency.table import Calibration, LatencyTable
from nagkit.latency.validate import random_archs
from tests.cli.helpers import run_cli_inproc
from tests.latency.test_table import all_archs


def true_factor(group: str) -> float:
    """Known per-group multipliers: depend on kind, input size and kernel."""
    if not group.startswith("mbconv"):
        return 1.3
    hw = int(group.split("-in")[1].split("-")[0])
    k = int(group.rsplit("-k", 1)[1])
    return 0.8 + 0.04 * k + 0.01 * (hw % 7)


def synthetic_measurements(table, space, archs, intercept=0.05):
    groups, s = group_sums(table, space, archs, "kind-in-k")
    return intercept + s @ np.array([true_factor(g) for g in groups])


def test_block_group_schemes():
    key = "mbconv-in28x28x40-out14x14x80-mid240-k5-s2-se0-hswish-skip0"
    assert block_group(key, "kind") == "mbconv"
    assert block_group(key, "kind-in") == "mbconv-in28"
    assert block_group(key, "kind-in-k") == "mbconv-in28-k5"
    assert block_group("r224/" + key) == "mbconv-in28-k5"
    assert block_group("stem-in224x224x3-out112x112x16-k3-s2-hswish") == "stem-in224-k3"
    assert block_group("pool-in7x7x960-out1x1x960") == "pool-in7"
    with pytest.raises(BadInputError, match="group scheme"):
        block_group(key, "by-colour")


def test_grouped_fit_recovers_known_group_multipliers(lat_space, lat_table):
    archs = random_archs(lat_space, 300, seed=5)
    meas = synthetic_measurements(lat_table, lat_space, archs)
    cal = fit_grouped(lat_table, lat_space, archs, meas, shrinkage=0.05)  # group_by="auto"
    assert cal.model == "grouped" and cal.group_by == "kind-in-k" and cal.n_fit == 300
    sel = cal.details["group_by_selection"]["loo_mape"]  # the true scheme wins the leave-one-out test
    assert set(sel) == {"global", "kind", "kind-in", "kind-in-k"} and min(sel, key=sel.get) == "kind-in-k"
    assert sel["kind"] > 5 * sel["kind-in-k"]
    groups, s = group_sums(lat_table, lat_space, archs)
    varying = [g for g, col in zip(groups, s.T) if np.ptp(col) > 0 and g.startswith("mbconv")]
    assert len(varying) >= 4
    for g in varying:  # identifiable groups: their factor is recovered
        assert cal.group_scales[g] == pytest.approx(true_factor(g), rel=0.02), g
    assert cal.fit_error < 0.5 and cal.details["loo_mape"] < 0.5
    assert cal.details["global_linear_mape"] > 5 * cal.fit_error  # one global scale cannot do this
    # unseen archs are predicted as the true model says
    new = random_archs(lat_space, 50, seed=6, exclude=archs)
    t = lat_table.with_calibration(cal)
    np.testing.assert_allclose(t.predict_many(lat_space, new), synthetic_measurements(lat_table, lat_space, new),
                               rtol=0.01)
    # the fit data are recorded for an offline refit
    assert cal.details["fit_archs"] == [str(a) for a in archs]
    assert cal.details["loo_within_5pct"] == 1.0
    assert cal.details["fit_measured_ms"] == pytest.approx(list(meas))


def test_shrinkage_pulls_rare_groups_to_the_global_scale(lat_space, lat_table):
    archs = random_archs(lat_space, 40, seed=2)
    meas = synthetic_measurements(lat_table, lat_space, archs)
    loose = fit_grouped(lat_table, lat_space, archs, meas, shrinkage=0.01)
    tight = fit_grouped(lat_table, lat_space, archs, meas, shrinkage=1e4)
    spread = lambda c: max(abs(v - c.default_scale) for v in c.group_scales.values())  # noqa: E731
    assert spread(tight) < 0.1 * spread(loose) and spread(loose) > 0.05
    with pytest.raises(BadInputError, match="shrinkage"):
        fit_grouped(lat_table, lat_space, archs, meas, shrinkage=0)


def test_grouped_predictions_agree_on_every_path(lat_space, lat_table):
    archs = random_archs(lat_space, 60, seed=3)
    t = lat_table.with_calibration(fit_grouped(lat_table, lat_space, archs,
                                               synthetic_measurements(lat_table, lat_space, archs)))
    every = list(all_archs(lat_space))
    fast = t.predict_many(lat_space, every)
    slow = np.array([t.predict(lat_space, a) for a in every])
    by_blocks = np.array([t.calibration.apply_blocks(t.breakdown(lat_space, a)) for a in every[:50]])
    np.testing.assert_allclose(fast, slow, rtol=1e-12)
    np.testing.assert_allclose(fast[:50], by_blocks, rtol=1e-12)
    lo, hi = t.latency_range(lat_space)
    assert lo == pytest.approx(slow.min()) and hi == pytest.approx(slow.max())
    raw = t.predict_many(lat_space, every, calibrated=False)
    np.testing.assert_allclose(raw, lat_table.predict_many(lat_space, every), rtol=1e-12)
    assert not np.allclose(raw, fast)


def test_grouped_calibration_round_trips(lat_space, lat_table, tmp_path):
    archs = random_archs(lat_space, 30, seed=1)
    t = lat_table.with_calibration(fit_grouped(lat_table, lat_space, archs,
                                               synthetic_measurements(lat_table, lat_space, archs), seed=1))
    back = LatencyTable.load(t.save(tmp_path / "t.json"))
    c = back.calibration
    assert c.model == "grouped" and c.group_scales == t.calibration.group_scales
    assert c.intercept == t.calibration.intercept and c.details["seed"] == 1
    np.testing.assert_allclose(back.predict_many(lat_space, archs), t.predict_many(lat_space, archs), rtol=1e-12)


OLD_RECORD = {"scale": 1.25, "offset": 0.5, "fit_error": 1.5, "n_fit": 2, "fit_error_unit": "MAPE %",
              "raw_mape": 9.0, "seed": 1, "device": "cpu", "fit_archs": None, "fit_raw_ms": [1.0, 2.0],
              "fit_measured_ms": [1.7, 3.0]}


def _with_calibration(table: LatencyTable, path, cal: dict):
    d = table.to_dict()
    d["calibration"] = cal
    path.write_text(json.dumps(d))
    return path


def test_old_linear_calibration_still_loads(lat_space, lat_table, tmp_path):
    archs = random_archs(lat_space, 2, seed=0)
    rec = {**OLD_RECORD, "fit_archs": [str(a) for a in archs]}  # exactly what tables before grouping hold
    t = LatencyTable.load(_with_calibration(lat_table, tmp_path / "old.json", rec))
    c = t.calibration
    assert c.model == "linear" and c.scale == 1.25 and c.offset == 0.5 and c.details["seed"] == 1
    raw = lat_table.predict_many(lat_space, archs)
    np.testing.assert_allclose(t.predict_many(lat_space, archs), 1.25 * raw + 0.5)
    assert t.predict(lat_space, archs[0]) == pytest.approx(1.25 * raw[0] + 0.5)
    # and it is written back in the same form (no grouped fields)
    again = t.to_dict()["calibration"]
    assert again["model"] == "linear" and "group_scales" not in again
    # an old record with its fit data can be refitted into a grouped one offline
    g = refit_calibration(t, lat_space).calibration
    assert g.model == "grouped" and g.n_fit == 2 and g.details["refit_from"] == "linear"


def _grouped_record(lat_space, lat_table):
    archs = random_archs(lat_space, 12, seed=4)
    cal = fit_grouped(lat_table, lat_space, archs, synthetic_measurements(lat_table, lat_space, archs))
    return cal.to_dict()


@pytest.mark.parametrize("change, match", [
    ({"model": "cubic"}, "unknown model"),
    ({"group_by": "colour"}, "unknown group_by"),
    ({"intercept_ms": float("nan")}, "intercept_ms"),
    ({"intercept_ms": "0.1"}, "intercept_ms"),
    ({"default_scale": -1.0}, "default_scale"),
    ({"group_scales": {}}, "group_scales"),
    ({"group_scales": {"mbconv-in16-k3": -0.5}}, "factor"),
    ({"group_scales": {"mbconv-in16-k3": None}}, "factor"),
    ({"group_scales": [1.0, 2.0]}, "group_scales"),
    ({"fit_measured_ms": [1.0]}, "fit_measured_ms"),
    ({"fit_archs": "r32-k3e3"}, "fit_archs"),
    ({"n_fit": 0}, "invalid values"),
    ({"scale": float("inf")}, "invalid values"),
])
def test_corrupt_grouped_calibration_is_refused(lat_space, lat_table, tmp_path, change, match):
    rec = {**_grouped_record(lat_space, lat_table), **change}
    p = tmp_path / "bad.json"
    p.write_text(json.dumps({**lat_table.to_dict(), "calibration": rec}, allow_nan=True))
    with pytest.raises(ArtifactError, match=match) as ei:
        LatencyTable.load(p)
    assert "calibration" in ei.value.message and "nagkit lut calibrate" in ei.value.hint


@pytest.mark.parametrize("drop", ["group_scales", "intercept_ms", "default_scale", "group_by"])
def test_grouped_calibration_missing_a_field_is_refused(lat_space, lat_table, tmp_path, drop):
    rec = {k: v for k, v in _grouped_record(lat_space, lat_table).items() if k != drop}
    with pytest.raises(ArtifactError, match=f"missing {drop}"):
        LatencyTable.load(_with_calibration(lat_table, tmp_path / "bad.json", rec))


def test_linear_record_with_grouped_fields_is_refused(lat_space, lat_table, tmp_path):
    rec = {**OLD_RECORD, "fit_archs": ["a", "b"], "group_scales": {"mbconv": 1.0}}
    with pytest.raises(ArtifactError, match="grouped fields"):
        LatencyTable.load(_with_calibration(lat_table, tmp_path / "bad.json", rec))


def test_refit_reproduces_the_fit_and_needs_fit_data(lat_space, lat_table):
    archs = random_archs(lat_space, 25, seed=8)
    meas = synthetic_measurements(lat_table, lat_space, archs)
    t = lat_table.with_calibration(fit_grouped(lat_table, lat_space, archs, meas, seed=8))
    again = refit_calibration(t, lat_space).calibration
    assert again.group_scales == pytest.approx(t.calibration.group_scales)
    assert again.details["seed"] == 8
    coarse = refit_calibration(t, group_by="kind").calibration
    assert set(coarse.group_scales) <= {"stem", "mbconv", "final_expand", "pool", "feature_mix", "classifier"}
    with pytest.raises(BadInputError, match="fit data"):
        refit_calibration(lat_table.with_calibration(Calibration(1.1, 0.0, 0.0, 3)), lat_space)
    with pytest.raises(BadInputError, match="fit data"):
        refit_calibration(lat_table, lat_space)


def test_cli_refit_and_show(lat_space, lat_table, tmp_path, capsys):
    archs = random_archs(lat_space, 20, seed=9)
    t = lat_table.with_calibration(Calibration.fit(
        lat_table.predict_many(lat_space, archs), synthetic_measurements(lat_table, lat_space, archs),
        fit_archs=[str(a) for a in archs],
        fit_measured_ms=[float(x) for x in synthetic_measurements(lat_table, lat_space, archs)]))
    p = t.save(tmp_path / "t.json")
    res = run_cli_inproc(["lut", "calibrate", "--lut", str(p), "--refit", "--out", str(tmp_path / "g.json"),
                          "--json"], capsys)
    assert res.code == 0, res.err
    out = json.loads(res.out)
    assert out["model"] == "grouped" and out["n_fit"] == 20 and "fit_archs" not in out
    # 20 networks do not suffice for kind-in-k here: auto picks among the schemes they suffice for
    fitted = out["fidelity"]["plan"]["fitted_schemes"]
    assert "kind-in-k" not in fitted and out["group_by"] in fitted and out["adopted"] is True
    res = run_cli_inproc(["lut", "show", str(tmp_path / "g.json")], capsys)
    assert res.code == 0 and f"grouped ({out['group_by']}," in res.out
