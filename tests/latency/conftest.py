"""Fixtures for latency tests: a tiny space and a synthetic table over it."""

from __future__ import annotations

import pytest

from nagkit.latency.blocks import unique_layers
from nagkit.latency.table import LatencyTable
from nagkit.space import SearchSpace
from nagkit.space.counts import layer_macs

from tests.shared_data import NOTE10

NOTE10_DIR = str(NOTE10 / "note10_lut")  # OFA's YAML tables (tests reading them are marked needs_shared)


def make_tiny_space(**over) -> SearchSpace:
    kw = dict(
        name="tiny-test",
        width_mult=1.0,
        base_stage_width=(8, 8, 16, 24, 32, 64),
        ks_list=(3, 5),
        expand_list=(3, 4),
        depth_list=(1, 2),
        resolutions=(32, 40),
        stage_strides=(2, 2),
        stage_acts=("relu", "h_swish"),
        stage_se=(False, True),
        n_classes=10,
    )
    kw.update(over)
    return SearchSpace(**kw)


def synthetic_entries(space: SearchSpace) -> dict:
    """A table whose block latency is a known function of its MACs (not a measurement)."""
    out = {}
    for key, layer in unique_layers(space).items():
        ms = 0.002 + layer_macs(layer) * 1e-6
        out[key] = {"median_ms": ms, "mean_ms": ms * 1.01, "std_ms": ms * 0.02,
                    "p10_ms": ms * 0.98, "p90_ms": ms * 1.03, "n": 20}
    return out


@pytest.fixture
def lat_space() -> SearchSpace:
    return make_tiny_space()


@pytest.fixture
def lat_table(lat_space) -> LatencyTable:
    return LatencyTable.create(
        lat_space, synthetic_entries(lat_space), device={"spec": "synthetic"},
        runtime={"name": "none"}, resolutions=lat_space.resolutions,
        provenance={"source": "test fixture"})
