"""Unique block enumeration and the conversion cache."""

from __future__ import annotations

import os

import pytest

from nagkit.latency.blocks import BlockCache, unique_layers
from nagkit.latency.keys import block_key
from nagkit.space import get_space, sample_many


def expected_count(space, n_res: int) -> int:
    per_choice = len(space.ks_list) * len(space.expand_list)
    # stem, first block, slot 0 and the repeated slots of every stage, final expand, pool
    per_res = 2 + space.n_stages * 2 * per_choice + 2
    return n_res * per_res + 2  # feature mix and classifier are 1x1: shared by all resolutions


def test_counts_on_tiny_space(lat_space):
    layers = unique_layers(lat_space)
    assert len(layers) == expected_count(lat_space, 2) == 42
    kinds = [l.kind for l in layers.values()]
    assert kinds.count("stem") == 2 and kinds.count("classifier") == 1
    assert kinds.count("mbconv") == 2 * (1 + 2 * 2 * 4)
    assert all(block_key(l) == k for k, l in layers.items())


def test_counts_on_ofa_space_at_one_resolution():
    sp = get_space("ofa-mbv3-w1.0")
    assert len(unique_layers(sp, [224])) == expected_count(sp, 1) - 0 == 96


def test_every_arch_layer_is_enumerated(lat_space):
    keys = set(unique_layers(lat_space))
    for arch in sample_many(lat_space, 50, seed=0):
        assert {block_key(l) for l in lat_space.layers(arch)} <= keys


def test_unknown_resolution_is_refused(lat_space):
    from nagkit.errors import BadInputError

    with pytest.raises(BadInputError, match="allowed: 32, 40"):
        unique_layers(lat_space, [33])


@pytest.mark.slow
def test_tflite_cache_converts_once(lat_space, tmp_path):
    layers = dict(list(unique_layers(lat_space, [32]).items())[:2])
    cache = BlockCache("tflite", tmp_path)
    cache.prepare(layers, jobs=1, progress=False)
    paths = {k: cache.path_for(k) for k in layers}
    assert all(p.is_file() and p.stat().st_size > 0 for p in paths.values())
    mtimes = {k: os.stat(p).st_mtime_ns for k, p in paths.items()}
    again = BlockCache("tflite", tmp_path)
    again.prepare(layers, jobs=1, progress=False)
    for k, layer in layers.items():
        assert again.get(k, layer) == paths[k]
    assert again.hits == 2 and again.misses == 0
    assert {k: os.stat(p).st_mtime_ns for k, p in paths.items()} == mtimes
    assert "litert-torch" in again.versions


def test_default_conversion_jobs_follow_nagkit_jobs(monkeypatch):
    """$NAGKIT_JOBS sets how many conversion processes a profile starts when --jobs is not given
    (the suite's xdist workers set 1: one per core, as OMP_NUM_THREADS); unset: the usable cores."""
    from nagkit.errors import BadInputError
    from nagkit.latency.blocks import default_jobs

    monkeypatch.delenv("NAGKIT_JOBS", raising=False)
    assert default_jobs() == len(os.sched_getaffinity(0))
    monkeypatch.setenv("NAGKIT_JOBS", "3")
    assert default_jobs() == 3
    for bad in ("0", "two", "-1", "65"):
        monkeypatch.setenv("NAGKIT_JOBS", bad)
        with pytest.raises(BadInputError, match="NAGKIT_JOBS must be a number of conversion processes"):
            default_jobs()
