"""Limits beside the latency budget (issue 34, decisions 39): parsing, the decoder's masks (every
raw sample meets every limit), the unreachable case, and latency-only generation unchanged."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from nagkit.errors import BadInputError
from nagkit.latency.slots import SlotLatency
from nagkit.latency.table import LatencyTable
from nagkit.nag.config import GeneratorConfig
from nagkit.nag.constraints import Constraints, Limits, LimitsUnreachableError, parse_limit
from nagkit.nag.generator import sample_archs
from nagkit.space import get_space
from nagkit.space.resources import SlotResources

ROOT = Path(__file__).resolve().parents[2]
TABLES = ROOT / "nagkit" / "resources" / "latency_tables"


@pytest.fixture(scope="module")
def fmnist():
    """The default workspace's trained model (its generator, on its table)."""
    from nagkit.app.workspace import load_workspace

    return load_workspace(None).nag_model(with_source=False)


@pytest.fixture(scope="module")
def note10():
    """A fresh (untrained) generator on the paper-scale ofa-mbv3-w1.2 space and Note10 table."""
    from tests.nag.test_generator import fresh

    space = get_space("ofa-mbv3-w1.2")
    lat = SlotLatency(LatencyTable.load(TABLES / "note10.json"), space)
    return fresh(GeneratorConfig(hidden=16, token_dim=4), space, lat), lat, SlotResources(space)


def assert_all_meet(dec, lat, budget, cons, space):
    """Every row within the budget and every limit, from the layer lists themselves."""
    assert len(dec) and (lat(dec) <= budget + 1e-9).all()
    lim = cons.limits
    for a in dec.to_archs(space)[:: max(1, len(dec) // 100)]:  # the exact counts, row by row, on a subset
        if lim.max_params is not None:
            assert space.params(a) <= lim.max_params
        if lim.max_macs is not None:
            assert space.macs(a) <= lim.max_macs
        if lim.max_peak_kb is not None:
            assert space.peak_activation(a) * cons.act_bytes / 1000 <= lim.max_peak_kb
    assert cons.fits(dec).all()  # and all rows, vectorised


FMNIST_CASES = [  # (budget ms, limits): each binds somewhere in the space
    (3.0, Limits(max_params=650e3)),
    (3.0, Limits(max_macs=5e6)),
    (7.0, Limits(max_peak_kb=170)),
    (1.5, Limits(max_size_mb=2.7)),
    (2.0, Limits(max_params=600e3, max_macs=5e6, max_peak_kb=180)),
    (0.6, Limits(max_params=580e3, max_peak_kb=165)),
    (5.0, Limits(max_params=553_100)),  # within a few hundred parameters of the space's smallest
]


@pytest.mark.parametrize("budget,limits", FMNIST_CASES)
def test_every_raw_sample_meets_every_limit_on_the_default_workspace(fmnist, budget, limits):
    cons = fmnist.constraints(limits)
    cons.check(budget)
    for temperature in (1.0, 3.0):  # a flat policy explores the masks' edges
        dec, _ = sample_archs(fmnist.generator, [budget], 1000, seed=34, temperature=temperature,
                              limits=cons.tensors())
        assert len(dec) == 1000
        assert_all_meet(dec, fmnist.latency, budget, cons, fmnist.space)


@pytest.mark.parametrize("frac,limits", [
    (0.3, Limits(max_params=6e6)), (0.5, Limits(max_macs=400e6)), (0.8, Limits(max_peak_kb=6000)),
    (0.4, Limits(max_params=6e6, max_macs=350e6, max_peak_kb=7000)), (1.0, Limits(max_size_mb=20)),
])
def test_every_raw_sample_meets_every_limit_on_the_paper_scale_space(note10, frac, limits):
    gen, lat, res = note10
    cons = Constraints(lat, res, limits)
    budget = lat.fastest_ms + frac * (lat.slowest_ms - lat.fastest_ms)
    cons.check(budget)
    dec, _ = sample_archs(gen, [budget], 1000, seed=7, limits=cons.tensors())
    assert_all_meet(dec, lat, budget, cons, gen.space)


def test_a_limit_at_the_spaces_smallest_value_is_reachable_when_masks_are_exact(fmnist):
    """The peak's masks are exact: its smallest value in the space admits networks, and only
    those; a hair below it admits none (exit 1, naming the smallest value)."""
    lo = fmnist.constraints(Limits(max_peak_kb=1e6)).smallest()
    cons = fmnist.constraints(Limits(max_peak_kb=lo["peak_kb"]))
    dec, _ = sample_archs(fmnist.generator, [7.0], 200, seed=1, limits=cons.tensors())
    assert np.allclose(cons.reached(dec)["peak_kb"], lo["peak_kb"])
    below = fmnist.constraints(Limits(max_peak_kb=lo["peak_kb"] * 0.999))
    with pytest.raises(LimitsUnreachableError, match=r"--max-peak-kb .*the smallest in the space: 161\.7 kB, at fp32"):
        below.check(7.0)


def test_each_limit_at_its_smallest_value_is_reachable_where_the_floors_differ(fmnist):
    """On fmnist's table the fastest block of stage 0's first slot (k3e4) is not the smallest
    (k3e3: 296 parameters fewer): the smallest network and the fastest are both reachable, each
    with the other's limit loose."""
    lo = fmnist.constraints(Limits(max_params=1e9)).smallest()
    assert lo["params"] == 552_714
    for budget, lim in ((3.0, Limits(max_params=lo["params"], max_macs=lo["macs"], max_peak_kb=lo["peak_kb"])),
                        (fmnist.range_ms[0], Limits(max_params=553_010)),
                        (0.2, Limits(max_params=lo["params"], max_size_mb=3))):
        cons = fmnist.constraints(lim)
        cons.check(budget)
        dec, _ = sample_archs(fmnist.generator, [budget], 100, seed=2, limits=cons.tensors())
        assert_all_meet(dec, fmnist.latency, budget, cons, fmnist.space)


def test_unreachable_limits_name_each_smallest_value_and_generate_nothing(fmnist):
    """The fastest network (k3e4 in stage 0's first slot on this table) has 296 parameters more
    than the smallest: at its latency, a limit between the two admits no network."""
    fastest = fmnist.range_ms[0]
    with pytest.raises(LimitsUnreachableError) as e:
        fmnist.generate([fastest], limits=Limits(max_params=553_000, max_macs=10e6), display=False)
    msg = e.value.message
    assert "--max-params 553,000 (the smallest in the space: 552,714)" in msg
    assert "--max-macs 10,000,000 (the smallest in the space: 2,995,064)" in msg
    assert f"latency {fastest:g} ms (the smallest in the space: 0.1633 ms)" in msg and e.value.exit_code == 1
    assert "no network meets them together" in e.value.hint
    assert "\n" not in msg
    # each alone is reachable: it is the combination that fails
    assert fmnist.generate([fastest], display=False)[0].best.latency_ms <= fastest
    assert fmnist.generate([3.0], limits=Limits(max_params=553_000), display=False)[0].best.resources["params"] \
        <= 553_000


def test_generate_reports_what_the_best_reaches_and_what_binds(fmnist):
    r = fmnist.generate([2.0], limits=Limits(max_params=600e3, max_peak_kb=200), display=False, top=3)[0]
    c = r.extra["constraints"]
    assert set(c["constraints"]) == {"latency_ms", "params", "peak_kb"}
    best = r.best
    assert c["reached"]["params"] == fmnist.space.params(best.arch) == best.resources["params"]
    assert c["reached"]["peak_kb"] == fmnist.space.peak_activation(best.arch) * 4 / 1000
    share = {k: v["value"] / v["limit"] for k, v in c["constraints"].items()}
    assert c["binding"] == max(share, key=share.get) and max(share.values()) <= 1 + 1e-9
    for cand in r.candidates:  # every candidate, not only the best, is within the limits
        assert cand.resources["params"] <= 600e3 and cand.resources["peak_kb"] <= 200


# Latency-only generation is unchanged by this work: the archs main (139d503) generated.
GOLDEN = {
    0.5: "r32-k5e6.k5e3.k5e3-k7e4.k3e3.k3e6.k3e3-k7e4.k5e6.k5e3-k3e6.k3e3.k5e6.k5e3-k5e4.k5e3",
    1.5: "r36-k5e6.k5e6.k5e3.k5e6-k7e6.k5e4.k7e6.k7e3-k7e4.k7e4.k3e3.k3e3-k3e6.k3e4-k3e3.k3e6",
    3.0: "r36-k5e4.k7e6.k5e4-k7e6.k7e6.k5e3-k7e6.k5e6.k7e4-k7e4.k7e4-k7e3.k5e3.k3e4.k5e4",
}


def test_latency_only_generation_is_unchanged(fmnist):
    got = fmnist.generate(list(GOLDEN), samples=200, top=3, display=False)
    assert {r.budget_ms: str(r.best.arch) for r in got} == GOLDEN
    assert all("constraints" not in r.extra and r.best.resources is None for r in got)
    again = fmnist.generate([2.0], seed=7, display=False)[0]
    assert str(again.best.arch) == "r36-k5e4.k7e6.k5e4-k7e4.k7e6.k5e3-k5e3.k5e6.k7e4-k7e4.k7e4-k3e3.k5e4.k3e4.k5e4"
    # empty Limits are no limits: the same samples
    same = fmnist.generate([2.0], seed=7, display=False, limits=Limits())[0]
    assert [str(c.arch) for c in same.candidates] == [str(c.arch) for c in again.candidates]


def test_limits_far_above_every_network_change_no_sample(fmnist):
    """Masks that mask nothing leave the policy's draws as they were."""
    loose = fmnist.constraints(Limits(max_params=1e9, max_macs=1e12, max_peak_kb=1e6))
    a, _ = sample_archs(fmnist.generator, [2.5], 300, seed=3)
    b, _ = sample_archs(fmnist.generator, [2.5], 300, seed=3, limits=loose.tensors())
    assert (a.r == b.r).all() and (a.k == b.k).all() and (a.e == b.e).all() and (a.depth == b.depth).all()


@pytest.mark.parametrize("name,text,value", [
    ("max_params", "2.5M", 2.5e6), ("max_params", "2.5m", 2.5e6), ("max_params", "800K", 8e5),
    ("max_macs", "300M", 3e8), ("max_macs", "1.2G", 1.2e9), ("max_macs", "5e6", 5e6), ("max_params", 650_000, 65e4),
    ("max_peak_kb", "512", 512.0), ("max_size_mb", "2.5", 2.5), ("max_size_mb", 4, 4.0),
])
def test_limits_parse(name, text, value):
    assert parse_limit(text, name) == pytest.approx(value)


@pytest.mark.parametrize("name,text,says", [
    ("max_params", "2.5Q", "unknown suffix 'Q'"), ("max_params", "nan", "finite number > 0"),
    ("max_params", "0", "finite number > 0"), ("max_macs", "-1", "finite number > 0"),
    ("max_macs", "inf", "finite number > 0"), ("max_params", "", "is not a number"),
    ("max_params", "2.5 M", "is not a number"), ("max_params", "1e400", "finite number > 0"),
    ("max_size_mb", "5K", "MB take no suffix"), ("max_peak_kb", "1M", "kB take no suffix"),
    ("max_params", True, "is not a limit"), ("max_size_mb", float("nan"), "finite number > 0"),
    ("max_peak_kb", -3, "finite number > 0"), ("max_params", "1e16", "below 1e+15"),
])
def test_bad_limits_are_one_line_naming_the_value_and_the_valid_form(name, text, says):
    with pytest.raises(BadInputError) as e:
        parse_limit(text, name)
    msg = e.value.message
    assert says in msg and "\n" not in msg and "--max-" in msg and "e.g." in msg


def test_unknown_limit_keywords_are_refused():
    with pytest.raises(BadInputError, match="unknown limit.*max_param.*valid: max_params"):
        Limits.parse(max_param=3)


def test_an_int8_peak_limit_is_refused_not_guessed(fmnist):
    with pytest.raises(BadInputError, match="float graphs"):
        fmnist.constraints(Limits(max_peak_kb=300), precision="int8")
    # a size limit at int8 is modelled for TFLite (measured), not for ONNX
    assert fmnist.constraints(Limits(max_size_mb=1), precision="int8").bpw == 1.65
    with pytest.raises(BadInputError, match="no file-size model for onnx at int8"):
        fmnist.constraints(Limits(max_size_mb=1), formats=("onnx",), precision="int8")
