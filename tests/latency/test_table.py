"""Latency table schema: round trip, strict loading, prediction, ranges."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest

from nagkit.errors import ArtifactError
from nagkit.latency.keys import block_key, parse_key
from nagkit.latency.table import Calibration, LatencyTable, MissingBlockError
from nagkit.space import Arch, sample_many
from tests.cli.helpers import run_cli


def all_archs(space):
    per_stage = []
    blocks = list(itertools.product(space.ks_list, space.expand_list))
    for _ in range(space.n_stages):
        opts = []
        for d in space.depth_list:
            opts += list(itertools.product(blocks, repeat=d))
        per_stage.append(opts)
    for r in space.resolutions:
        for stages in itertools.product(*per_stage):
            yield Arch(r, tuple(stages))


def test_round_trip(lat_table, tmp_path):
    p = lat_table.save(tmp_path / "t.json")
    back = LatencyTable.load(p)
    assert back.entries == lat_table.entries
    assert back.device == lat_table.device and back.resolutions == lat_table.resolutions
    assert back.space().to_dict() == lat_table.space().to_dict()
    cal = Calibration.fit([1.0, 2.0, 3.0], [1.2, 2.3, 3.4])
    p2 = lat_table.with_calibration(cal).save(tmp_path / "t2.json")
    back2 = LatencyTable.load(p2)
    assert back2.calibration.scale == pytest.approx(1.1)
    assert back2.calibration.offset == pytest.approx(0.1)
    assert back2.calibration.n_fit == 3


def test_predict_is_sum_of_layer_entries(lat_space, lat_table):
    arch = sample_many(lat_space, 1, seed=3)[0]
    expected = sum(lat_table.entries[block_key(l)]["median_ms"] for l in lat_space.layers(arch))
    assert lat_table.predict(lat_space, arch) == pytest.approx(expected)
    assert lat_table.predict(lat_space, str(arch)) == pytest.approx(expected)


def test_predict_many_matches_predict_and_range_is_exact(lat_space, lat_table):
    archs = list(all_archs(lat_space))
    fast = lat_table.predict_many(lat_space, archs)
    slow = np.array([lat_table.predict(lat_space, a) for a in archs])
    np.testing.assert_allclose(fast, slow, rtol=1e-12)
    lo, hi = lat_table.latency_range(lat_space)
    assert lo == pytest.approx(slow.min()) and hi == pytest.approx(slow.max())


def test_calibration_is_applied_and_optional(lat_space, lat_table):
    arch = lat_space.largest()
    raw = lat_table.predict(lat_space, arch)
    cal = lat_table.with_calibration(Calibration(1.5, 0.25, 0.0, 3))
    assert cal.predict(lat_space, arch) == pytest.approx(1.5 * raw + 0.25)
    assert cal.predict(lat_space, arch, calibrated=False) == pytest.approx(raw)
    many = cal.predict_many(lat_space, [arch, arch], calibrated=True)
    assert many == pytest.approx([1.5 * raw + 0.25] * 2)


def test_calibration_fit_recovers_a_linear_relation():
    rng = np.random.default_rng(0)
    x = rng.uniform(5, 20, size=10)
    c = Calibration.fit(x, 1.08 * x + 0.3)
    assert c.scale == pytest.approx(1.08) and c.offset == pytest.approx(0.3)
    assert c.fit_error == pytest.approx(0.0, abs=1e-9)
    assert c.details["raw_mape"] > 5


def test_missing_block_names_key_and_command(lat_space, lat_table):
    arch = lat_space.largest()
    key = block_key(lat_space.layers(arch)[3])
    entries = {k: v for k, v in lat_table.entries.items() if k != key}
    t = LatencyTable.create(lat_space, entries, device={"spec": "cpu"}, runtime={},
                            resolutions=lat_space.resolutions)
    with pytest.raises(MissingBlockError) as ei:
        t.predict(lat_space, arch)
    assert key in ei.value.message and "nagkit profile --device cpu" in ei.value.hint
    with pytest.raises(MissingBlockError, match=key):
        t.predict_many(lat_space, [lat_space.smallest(), arch])
    assert t.missing_keys(lat_space) == [key]


def test_keys_round_trip_through_parse(lat_space):
    for layer in lat_space.layers(lat_space.largest()):
        d = parse_key(block_key(layer))
        assert d["kind"] == layer.kind and d["cin"] == layer.cin and d["cout"] == layer.cout
        if layer.kind == "mbconv":
            assert (d["mid"], d["k"], d["stride"], d["se"], d["skip"]) == (
                layer.mid, layer.k, layer.stride, layer.se, layer.skip)


def _write(tmp_path, obj_or_text):
    p = tmp_path / "bad.json"
    p.write_text(obj_or_text if isinstance(obj_or_text, str) else json.dumps(obj_or_text))
    return p


@pytest.mark.parametrize("case", ["truncated", "schema", "missing_field", "nan", "zero", "negative",
                                  "tampered", "entry_field", "not_object"])
def test_corrupt_tables_are_refused(lat_table, tmp_path, case):
    good = lat_table.to_dict()
    text = json.dumps(good)
    key = next(iter(good["entries"]))
    if case == "truncated":
        bad = text[: len(text) // 2]
        match = "truncated or corrupt"
    elif case == "schema":
        bad = {**good, "schema": 99}
        match = "schema version 99"
    elif case == "missing_field":
        bad = {k: v for k, v in good.items() if k != "runtime"}
        match = "missing field.*runtime"
    elif case == "entry_field":
        bad = json.loads(text)
        del bad["entries"][key]["n"]
        match = "missing field.*n"
    elif case == "not_object":
        bad = [1, 2]
        match = "JSON object"
    else:
        bad = json.loads(text)
        val = {"nan": math.nan, "zero": 0.0, "negative": -1.0, "tampered": 123.0}[case]
        bad["entries"][key]["median_ms"] = val
        match = "integrity check" if case == "tampered" else "finite and > 0"
        if case == "nan":
            bad = json.dumps(bad)  # json writes NaN, which json.loads reads back
    p = _write(tmp_path, bad)
    with pytest.raises(ArtifactError, match=match) as ei:
        LatencyTable.load(p)
    assert ei.value.hint and "nagkit" in ei.value.hint


def test_cli_refuses_corrupt_table_one_line_exit_2(lat_table, tmp_path, cli_env):
    p = lat_table.save(tmp_path / "t.json")
    data = p.read_bytes()
    p.write_bytes(data[: len(data) - 200])
    res = run_cli(["lut", "show", str(p)], env=cli_env)
    assert res.code == 2
    assert "Traceback" not in res.err
    assert res.err.startswith("error: ") and "truncated or corrupt" in res.err.splitlines()[0]
    assert res.out == ""


def test_latency_range_names_a_missing_block(lat_space, lat_table):
    key = next(k for k in lat_table.entries if k.startswith("final_expand-in4x4"))
    entries = {k: v for k, v in lat_table.entries.items() if k != key}
    t = LatencyTable.create(lat_space, entries, device={"spec": "cpu"}, runtime={},
                            resolutions=lat_space.resolutions)
    with pytest.raises(MissingBlockError, match=key):
        t.latency_range(lat_space)


def test_tables_follow_the_predictor_protocols(lat_space, lat_table):
    from nagkit.data.synthetic import MacsLatencyTable
    from nagkit.latency.predictor import LatencyPredictor, SlotLatencyPredictor

    assert isinstance(lat_table, SlotLatencyPredictor)
    fixed, slots = lat_table.slot_arrays(lat_space, lat_space.resolutions[0])
    assert slots.shape == (lat_space.n_block_slots, len(lat_space.ks_list), len(lat_space.expand_list))
    synthetic = MacsLatencyTable()
    assert isinstance(synthetic, LatencyPredictor)
    arch = lat_space.smallest()
    assert synthetic.predict(lat_space, arch, calibrated=False) == synthetic.predict(lat_space, arch)
