"""Latency table schema: round trip, strict loading, prediction, ranges."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from nagkit.errors import ArtifactError
from nagkit.latency.keys import block_key, parse_key
from nagkit.latency.table import Calibration, LatencyTable, MissingBlockError
from nagkit.space import Arch, sample_many
from tests.cli.helpers import run_cli
from tests.fuzzing import check_table, fuzz_examples, no_hang, run_campaign, table_inputs


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


# ---- hostile tables (issue 13) -------------------------------------------------------------


def _resealed(good: dict, **changes) -> dict:
    """A table dict with ``changes`` applied and entries_sha256 recomputed (as an attacker or a
    careless hand edit would), and no space_sha256 (as in tables written before it existed)."""
    from nagkit.latency.table import entries_digest

    bad = json.loads(json.dumps(good))
    bad.pop("space_sha256", None)
    for k, v in changes.items():
        bad[k] = v
    bad["entries_sha256"] = entries_digest(bad["entries"])
    return bad


def test_d4_huge_json_integers_are_artifact_errors(lat_table, tmp_path):
    """D4: very large JSON integers raised OverflowError (or ValueError past 4,300 digits)."""
    good = lat_table.to_dict()
    key = next(iter(good["entries"]))
    for field in ("median_ms", "p90_ms", "std_ms"):
        bad = json.loads(json.dumps(good))
        bad["entries"][key][field] = 10**400
        bad = _resealed(bad)
        with pytest.raises(ArtifactError, match=f"{field}=<int of about 401 digits>"):
            LatencyTable.from_dict(bad)
    text = json.dumps(good).replace('"n": 20', '"n": ' + "9" * 5000, 1)
    with pytest.raises(ArtifactError, match="holds an unreadable value"):
        LatencyTable.load(_write(tmp_path, text))
    cal = dict(Calibration(1.5, 0.25, 0.0, 3).to_dict(), scale=10**400)
    with pytest.raises(ArtifactError, match="calibration has invalid values .scale=<int of about 401"):
        LatencyTable.from_dict(_resealed(good, calibration=cal))


def test_d4_deeply_nested_table_json_is_an_artifact_error(lat_table, tmp_path):
    text = json.dumps(lat_table.to_dict())[:-1] + ', "x": ' + "[" * 100_000 + "]" * 100_000 + "}"
    with pytest.raises(ArtifactError, match="nested too deeply"):
        LatencyTable.load(_write(tmp_path, text))


@pytest.mark.parametrize("field, value, match", [
    ("stage_strides", [0, 2], "'stage_strides' is \\[0, 2\\]; it must be a list of integers in 1..64"),
    ("stem_stride", 0, "'stem_stride' is 0"),
    ("width_mult", "1.0", "'width_mult' is '1.0'; it must be a number"),
    ("base_stage_width", ["8", 8, 16, 24, 32, 64], "'base_stage_width'"),
    ("resolutions", [[32, 40]], "'resolutions' is \\[\\[32, 40\\]\\]"),
    ("stage_acts", [1, "relu"], "'stage_acts' is \\[1, 'relu'\\]; it must be a list of activation names"),
    ("stem_act", 7, "'stem_act' is 7"),
    ("stage_se", [0, 1], "'stage_se'"),
    ("ks_list", [3, 4], "odd integers"),
    pytest.param("n_classes", 10**5000, "'n_classes' is <int of about 5001 digits>", id="n_classes-huge"),
    ("bogus", 1, "unknown field"),
    ("stage_acts", ["relu"], "is inconsistent: .*stage_acts needs 2 entries"),
])
def test_d4_space_spec_is_validated_on_load(lat_table, lat_space, tmp_path, capsys, field, value, match):
    """D4: a table's space.spec was never checked: stride 0 gave ZeroDivisionError in
    `lut predict`, a width as a string or an activation as an int TypeError/AttributeError."""
    good = lat_table.to_dict()
    space = {"name": good["space"]["name"], "spec": {**good["space"]["spec"], field: value}}
    bad = _resealed(good, space=space)
    with pytest.raises(ArtifactError, match=match) as ei:
        LatencyTable.from_dict(bad)
    assert len(ei.value.message) < 500 and ei.value.hint
    if field == "stage_strides":  # end to end: exit 2 with one line, not a ZeroDivisionError
        from tests.cli.helpers import run_cli_inproc

        p = tmp_path / "t.json"
        p.write_text(json.dumps(bad))
        res = run_cli_inproc(["lut", "predict", "--lut", str(p), "--arch", str(lat_space.smallest())], capsys)
        assert res.code == 2 and res.err.startswith("error: ") and "space spec field 'stage_strides'" in res.err


def test_d4_space_spec_without_a_name_is_refused(lat_table):
    """Found by the fuzzer: a spec without 'name' raised TypeError from SearchSpace()."""
    good = lat_table.to_dict()
    spec = {k: v for k, v in good["space"]["spec"].items() if k != "name"}
    with pytest.raises(ArtifactError, match="space spec has no 'name'"):
        LatencyTable.from_dict(_resealed(good, space={"name": "tiny-test", "spec": spec}))


def test_d4_space_is_covered_by_space_sha256_and_old_tables_still_load(lat_table, tmp_path):
    good = lat_table.to_dict()
    assert "space_sha256" in good and LatencyTable.from_dict(good).space_spec == good["space"]["spec"]
    edited = json.loads(json.dumps(good))
    edited["space"]["spec"]["n_classes"] = 11  # a valid value, but not the one measured
    with pytest.raises(ArtifactError, match="integrity check: the space's sha256"):
        LatencyTable.from_dict(edited)
    old = {k: v for k, v in good.items() if k != "space_sha256"}  # tables written before it
    assert LatencyTable.from_dict(old).entries == lat_table.entries


def test_d4_shipped_tables_still_load():
    from pathlib import Path

    tables = sorted((Path(__file__).resolve().parents[2] / "nagkit" / "resources" / "latency_tables").glob("*.json"))
    assert len(tables) >= 5
    for p in tables:
        t = LatencyTable.load(p)
        assert t.space().name == t.space_name


@pytest.mark.parametrize("field, value, match", [
    ("raw_mape", "abc", "'raw_mape' is 'abc'; it must be a finite number >= 0"),
    ("loo_mape", None, "'loo_mape' is None"),
    ("raw_mape", -1.0, "'raw_mape' is -1.0"),
    ("fit_error_unit", 5, "'fit_error_unit' is 5"),
])
def test_d4_calibration_fields_are_type_checked(lat_table, field, value, match):
    """D4: a string raw_mape loaded, then crashed describe_calibration (`lut show`)."""
    good = lat_table.with_calibration(Calibration.fit([1.0, 2.0, 3.0], [1.2, 2.3, 3.4])).to_dict()
    extra = {"loo_within_5pct": 0.5} if field == "loo_mape" else {}
    bad = {**good, "calibration": {**good["calibration"], field: value, **extra}}
    with pytest.raises(ArtifactError, match=match):
        LatencyTable.from_dict(bad)
    from nagkit.cli.latency import describe_calibration

    assert "raw MAPE" in describe_calibration(LatencyTable.from_dict(good).calibration.to_dict())


def _alias_bomb(levels: int, width: int = 9):
    """What yaml.safe_load makes of a nested alias bomb: one list shared width**levels times."""
    node = ["lol"] * width
    for _ in range(levels):
        node = [node] * width
    return node


@pytest.mark.parametrize("levels", [6, 9])
def test_d2_entry_errors_never_format_unbounded_values(lat_table, levels):
    """D2 (table part): `_check_entry` put repr(value) in its message; for an alias bomb that is
    gigabytes (9 levels: 3.9e9 leaves)."""
    good = lat_table.to_dict()
    key = next(iter(good["entries"]))
    bad = json.loads(json.dumps(good))
    bad["entries"][key]["mean_ms"] = _alias_bomb(levels)  # the dict form: never serialised
    with no_hang(30), pytest.raises(ArtifactError) as ei:
        LatencyTable.from_dict(bad)
    assert "mean_ms=[[[" in ei.value.message and len(ei.value.message) < 400
    huge_key = "mbconv-" + "x" * 1_000_000
    entries = {huge_key: good["entries"][key]}
    with pytest.raises(ArtifactError) as ei:
        LatencyTable.from_dict(_resealed(good, entries=entries, space={"name": "tiny-test", "spec": {"bogus": 1}}))
    assert len(ei.value.message) < 600
    with pytest.raises(ArtifactError) as ei:
        LatencyTable.from_dict(_resealed(good, entries={huge_key: {"median_ms": -1}}))
    assert len(ei.value.message) < 400


def test_table_messages_and_hints_stay_short(lat_table):
    good = lat_table.to_dict()
    bad = _resealed(good, schema="9" * 1_000_000, device={"spec": "d" * 1_000_000})
    with pytest.raises(ArtifactError) as ei:
        LatencyTable.from_dict(bad)
    assert len(ei.value.message) < 300 and len(ei.value.hint) < 300


# ---- property tests (hypothesis; issue 13) ------------------------------------------------


@given(table_inputs())
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_table_loader_returns_a_working_table_or_an_artifact_error(raw):
    check_table(raw)


@pytest.mark.slow
def test_table_loader_long_fuzz_run():
    """NAGKIT_FUZZ_EXAMPLES inputs (default 500; benchmarks/fuzz/run_fuzz.py runs 100,000)."""
    camp = run_campaign("latency_table", fuzz_examples(), seed=12)
    assert camp.failure_count == 0, camp.failures[:5]
    assert camp.inputs >= fuzz_examples() * 0.9


def test_entries_whose_sum_overflows_are_artifact_errors(lat_table, lat_space):
    """Issue 35's 10^5 fuzz run: finite entries near the float maximum loaded, and latency_range
    returned inf (predict and predict_many too): the sum is checked, one ArtifactError."""
    good = lat_table.to_dict()
    bad = json.loads(json.dumps(good))
    for v in bad["entries"].values():
        for f in ("median_ms", "mean_ms", "p10_ms", "p90_ms"):
            if v.get(f) is not None:
                v[f] = 1e308
        if v.get("std_ms") is not None:
            v["std_ms"] = 0.0
    t = LatencyTable.from_dict(_resealed(bad))
    arch = lat_space.largest()
    with pytest.raises(ArtifactError, match="too large to represent"):
        t.latency_range(lat_space)
    with pytest.raises(ArtifactError, match="too large to represent"):
        t.predict(lat_space, arch)
    with pytest.raises(ArtifactError, match="too large to represent"):
        t.predict_many(lat_space, [arch])
    # the fuzz check: before, an AssertionError (latency_range gave inf); now the refusals are nagkit's
    assert check_table(json.dumps(_resealed(bad)).encode()) == "accepted"
