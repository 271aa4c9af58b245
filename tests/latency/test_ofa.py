"""OFA note10 import: the committed table reproduces OFA's own summed latency."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import yaml

from nagkit.latency.ofa import import_ofa
from nagkit.latency.table import LatencyTable
from nagkit.space import get_space, sample_many
from tests.cli.helpers import run_cli
from tests.latency.conftest import NOTE10_DIR
from tests.shared_data import needs_shared

note10_yaml = needs_shared(NOTE10_DIR)

COMMITTED = Path(__file__).resolve().parents[2] / "nagkit" / "resources" / "latency_tables" / "note10.json"

# OFA w1.2 layout, written out from the rules in the data folder's README (not from nagkit).
WIDTHS = [24, 32, 48, 96, 136, 192]
STRIDES = [2, 2, 2, 1, 2]
SE = [0, 1, 0, 1, 1]
HS = [0, 0, 1, 1, 1]


def ofa_sum(yamls: dict, ofa: dict) -> float:
    """OFA's LatencyEstimator sum for one arch, straight from the YAML of its resolution."""
    r = ofa["r"]
    t = yamls[r]
    f = (r + 1) // 2
    total = t[f"Conv-input:{r}x{r}x3-output:{f}x{f}x24"]["mean"]
    total += t[f"expanded_conv-input:{f}x{f}x24-output:{f}x{f}x24-expand:24-kernel:3-stride:1-"
               "idskip:1-se:0-hs:0"]["mean"]
    cin = 24
    for s in range(5):
        for i in range(ofa["d"][s]):
            idx = s * 4 + i
            stride = STRIDES[s] if i == 0 else 1
            out = int((f - 1) / stride + 1)
            cout = WIDTHS[s + 1]
            mid = round(cin * ofa["e"][idx])
            key = (f"expanded_conv-input:{f}x{f}x{cin}-output:{out}x{out}x{cout}-expand:{mid}-"
                   f"kernel:{ofa['ks'][idx]}-stride:{stride}-idskip:{0 if i == 0 else 1}-"
                   f"se:{SE[s]}-hs:{HS[s]}")
            total += t[key]["mean"]
            f, cin = out, cout
    total += t[f"Conv_1-input:{f}x{f}x192-output:{f}x{f}x1152"]["mean"]
    total += t[f"AvgPool2D-input:{f}x{f}x1152-output:1x1x1152"]["mean"]
    total += t["Conv_2-input:1x1x1152-output:1x1x1536"]["mean"]
    total += t["Logits-input:1x1x1536-output:1000"]["mean"]
    return total


@pytest.fixture(scope="module")
def yamls():
    out = {}
    for p in Path(NOTE10_DIR).glob("*_lookup_table.yaml"):
        with open(p) as fh:
            out[int(p.name.split("_")[0])] = yaml.safe_load(fh)
    return out


@pytest.fixture(scope="module")
def space():
    return get_space("ofa-mbv3-w1.2")


@pytest.fixture(scope="module")
def committed():
    return LatencyTable.load(COMMITTED)


@note10_yaml
def test_committed_note10_equals_a_fresh_import(committed, space):
    fresh = import_ofa(NOTE10_DIR, space)
    assert fresh.entries == committed.entries
    assert committed.space_name == "ofa-mbv3-w1.2" and committed.stat == "mean_ms"


def test_smallest_and_largest_match_ofa(committed, space):
    assert committed.predict(space, space.smallest(160)) == pytest.approx(9.9, abs=0.05)
    assert committed.predict(space, space.largest(224)) == pytest.approx(92.4, abs=0.05)
    assert committed.latency_range(space) == pytest.approx(
        (committed.predict(space, space.smallest(160)), committed.predict(space, space.largest(224))))


@note10_yaml
def test_random_archs_match_an_independent_sum_over_the_yaml(committed, space, yamls):
    archs = sample_many(space, 200, seed=7)
    ours = committed.predict_many(space, archs)
    theirs = np.array([ofa_sum(yamls, space.to_ofa_dict(a)) for a in archs])
    np.testing.assert_allclose(ours, theirs, rtol=1e-12)
    assert ours[0] == pytest.approx(committed.predict(space, archs[0]))


def test_predict_many_equals_predict_arch_by_arch(committed, space):
    # Its speed (16,000 archs) is measured in benchmarks/latency/bench_predict_many.py.
    archs = sample_many(space, 1500, seed=1)
    pred = committed.predict_many(space, archs)
    one = np.array([committed.predict(space, a) for a in archs])
    assert pred.shape == (1500,) and np.all(pred > 0)
    np.testing.assert_allclose(pred, one, rtol=1e-12, atol=1e-12)


def test_missing_folder_hint_names_no_machine_path(tmp_path, space):
    from nagkit.errors import BadInputError

    with pytest.raises(BadInputError) as ei:
        import_ofa(tmp_path / "nowhere", space)
    assert "160_lookup_table.yaml" in ei.value.hint and "note10_lut" in ei.value.hint
    assert not re.search(r"(^|[\s'\"(])/[A-Za-z]", ei.value.hint), ei.value.hint


@note10_yaml
def test_cli_predict_accepts_ofa_dict_and_string(space, cli_env, yamls):
    arch = sample_many(space, 1, seed=11)[0]
    ofa = space.to_ofa_dict(arch)
    res = run_cli(["lut", "predict", "--lut", str(COMMITTED), "--arch", json.dumps(ofa),
                   "--arch", str(arch), "--json"], env=cli_env)
    assert res.code == 0, res.err
    out = json.loads(res.out)
    want = ofa_sum(yamls, ofa)
    assert [p["predicted_ms"] for p in out["predictions"]] == pytest.approx([want, want])
    assert out["calibrated"] is False


@note10_yaml
def test_import_refuses_wrong_space(tmp_path):
    from nagkit.errors import ArtifactError

    with pytest.raises(ArtifactError, match="lack"):
        import_ofa(NOTE10_DIR, get_space("ofa-mbv3-w1.0").replace(resolutions=(160, 224)))


@note10_yaml
def test_cli_import_and_show(tmp_path, capsys, committed):
    from tests.cli.helpers import run_cli_inproc

    out = tmp_path / "n10.json"
    res = run_cli_inproc(["lut", "import-ofa", NOTE10_DIR, "--out", str(out), "--json"], capsys)
    assert res.code == 0, res.err
    assert json.loads(res.out)["entries"] == len(committed.entries)
    assert LatencyTable.load(out).entries == committed.entries
    shown = run_cli_inproc(["lut", "show", str(out), "--json"], capsys)
    assert shown.code == 0, shown.err
    s = json.loads(shown.out)
    assert s["missing_keys"] == 0 and s["latency_range_ms"] == pytest.approx([9.89, 92.40], abs=0.01)
    assert s["entries_by_kind"]["stem"] == 17


# ---- hostile OFA tables (issue 13) --------------------------------------------------------

STEM = "Conv-input:160x160x3-output:80x80x24"


def _bomb_yaml(levels: int) -> str:
    """A nested alias bomb as a stem entry's mean: ~400 bytes that expand to 9**(levels+1) values."""
    defs = ["&a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    defs += [f"&a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, levels + 1)]
    return f"{STEM}:\n  std: 0.1\n  count: 10\n  defs: [{', '.join(defs)}]\n  mean: *a{levels}\n"


@pytest.mark.parametrize("levels", [5, 8])
def test_d2_alias_bomb_is_refused_fast_in_one_line(tmp_path, capsys, levels):
    """D2 (OFA part): `lut import-ofa` expanded a nested alias bomb (through repr(value) in the
    entry check's message): a minute and 2.5 GB for a few hundred bytes."""
    from tests.cli.helpers import run_cli_inproc
    from tests.fuzzing import no_hang

    d = tmp_path / "lut"
    d.mkdir()
    (d / "160_lookup_table.yaml").write_text(_bomb_yaml(levels))
    with no_hang(30):
        res = run_cli_inproc(["lut", "import-ofa", str(d), "--out", str(tmp_path / "t.json")], capsys)
    assert res.code == 2 and res.err.startswith("error: ") and len(res.err) < 600
    assert "160_lookup_table.yaml" in res.err.splitlines()[0]


@pytest.mark.parametrize("text, match", [
    ("a: [1,\n b: c\n", "is not valid YAML: .*\\(line 3, column 1\\)"),
    (f"{STEM}: {{mean: 1, std: 0, count: {'9' * 5000}}}\n", "integer has more than 100 characters"),
    (f"{STEM}: " + "[" * 10_000 + "\n", "nested more than"),
    ("Conv-input:١٦٠x160x3-output:80x80x24: {mean: 1, std: 0, count: 10}\n", "unrecognised OFA latency key"),
    ("? [1, 2]\n: {mean: 1, std: 0, count: 10}\n", "not valid YAML|not a string"),
    ("1: {mean: 1, std: 0, count: 10}\n", "key 1 is not a string"),
    (f"{STEM}: {{mean: '{'x' * 100_000}', std: 0, count: 10}}\n", "mean_ms='xxx"),
])
def test_hostile_ofa_yaml_gives_one_short_line(tmp_path, text, match):
    from nagkit.errors import ArtifactError

    d = tmp_path / "lut"
    d.mkdir()
    (d / "160_lookup_table.yaml").write_text(text)
    with pytest.raises(ArtifactError, match=match) as ei:
        import_ofa(d, get_space("ofa-mbv3-w1.2"), check_complete=False)
    assert "\n" not in ei.value.message and len(ei.value.message) < 400
