"""SlotLatency: table latency of decision rows and the bounds constrained decoding needs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from nagkit.data.synthetic import MacsLatencyTable, tiny_space
from nagkit.latency.slots import SlotLatency
from nagkit.latency.table import LatencyTable
from nagkit.space import get_space, sampling as ops

ROOT = Path(__file__).resolve().parents[2]


def tables():
    yield "note10", get_space("ofa-mbv3-w1.2"), LatencyTable.load(ROOT / "nagkit" / "resources" / "latency_tables" / "note10.json")
    yield "cpu", get_space("ofa-mbv3-w1.0").replace(resolutions=(224,)), LatencyTable.load(
        ROOT / "nagkit" / "resources" / "latency_tables" / "cpu-litert-1t-ofa-mbv3-w1.0.json")  # calibrated (grouped)
    yield "macs", tiny_space(), MacsLatencyTable()


@pytest.mark.parametrize("name,space,table", list(tables()), ids=lambda x: x if isinstance(x, str) else "")
def test_slot_latency_equals_the_tables_prediction_and_range(name, space, table):
    lat = SlotLatency(table, space)
    dec = ops.random_decisions(space, 400, np.random.default_rng(0))
    assert np.allclose(lat(dec), table.predict_many(space, dec.to_archs(space)), rtol=1e-9, atol=1e-9)
    lo, hi = table.latency_range(space)
    assert lat.fastest_ms == pytest.approx(lo) and lat.slowest_ms == pytest.approx(hi)
    fast, slow = lat.extreme(False), lat.extreme(True)
    assert lat(fast)[0] == pytest.approx(lo) and lat(slow)[0] == pytest.approx(hi)
    assert (lat(dec) >= lo - 1e-9).all() and (lat(dec) <= hi + 1e-9).all()


def test_per_resolution_bounds_hold_for_every_row():
    space, table = get_space("ofa-mbv3-w1.2"), LatencyTable.load(ROOT / "nagkit" / "resources" / "latency_tables" / "note10.json")
    lat = SlotLatency(table, space)
    dec = ops.random_decisions(space, 2000, np.random.default_rng(1))
    ms = lat(dec)
    assert (ms >= lat.r_min[dec.r] - 1e-9).all() and (ms <= lat.r_max[dec.r] + 1e-9).all()
    # the stage contribution of a depth choice with the cheapest blocks is a lower bound
    md = space.max_depth
    for s in range(space.n_stages):
        part = np.where(dec.active(space)[:, s * md:(s + 1) * md],
                        lat.slots[dec.r[:, None], np.arange(s * md, (s + 1) * md)[None], dec.k[:, s * md:(s + 1) * md],
                                  dec.e[:, s * md:(s + 1) * md]], 0).sum(1)
        assert (part >= lat.depth_min[dec.r, s, dec.depth[:, s]] - 1e-9).all()
        assert (part <= lat.depth_max[dec.r, s, dec.depth[:, s]] + 1e-9).all()
