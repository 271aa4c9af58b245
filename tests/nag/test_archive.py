"""The frontier archive: which archs it keeps, its file format, the imitation targets it draws."""

from __future__ import annotations

import json

import numpy as np
import pytest

from nagkit.data.synthetic import synthetic_accuracy
from nagkit.errors import ArtifactError
from nagkit.nag.archive import Archive, frontier_layers, limited_layers
from tests.nag.helpers import SP, synthetic_data


@pytest.mark.parametrize("k", [1, 3, 10])
def test_frontier_layers_hold_every_budgets_top_k(k):
    rng = np.random.default_rng(k)
    lat, acc = rng.random(400) * 10, rng.random(400)
    keep = set(frontier_layers(lat, acc, k).tolist())
    assert len(keep) < 400
    for b in np.linspace(0.2, 10, 40):
        ok = np.flatnonzero(lat <= b)
        top = ok[np.argsort(-acc[ok])[:k]]
        assert set(top.tolist()) <= keep
    # and nothing else: each kept arch is in the top k of its own latency
    for i in keep:
        assert (acc[lat <= lat[i]] > acc[i]).sum() < k


@pytest.mark.parametrize("k", [1, 3])
def test_parameter_layers_hold_every_budget_and_limits_top_k(k):
    """Issue 34 (decisions 52): the archs among the k best of their own (latency, parameters) box
    hold the k best within any budget and parameter limit, and nothing else."""
    rng = np.random.default_rng(10 + k)
    lat, par, acc = rng.random(500) * 10, rng.integers(1, 1000, 500).astype(float), rng.random(500)
    keep = set(limited_layers(lat, par, acc, k, chunk=64).tolist())  # several chunks
    assert len(set(frontier_layers(lat, acc, k).tolist())) < len(keep) < 500
    for b, p in zip(rng.random(300) * 10, rng.random(300) * 1000):
        ok = np.flatnonzero((lat <= b) & (par <= p))
        top = ok[np.argsort(-acc[ok])[:k]]
        assert set(top.tolist()) <= keep
    for i in keep:
        assert (acc[(lat <= lat[i]) & (par <= par[i])] > acc[i]).sum() < k


def test_an_archive_with_parameter_layers_keeps_the_same_imitation_targets():
    from nagkit.space.decisions import from_archs
    from nagkit.space.resources import SlotResources

    archs, lat, acc = synthetic_data(400, seed=3)
    dec = from_archs(SP, archs)
    plain = Archive.from_decisions(dec, lat, acc, 3)
    wide = Archive.from_decisions(dec, lat, acc, 3, params=SlotResources(SP).per_row("params", dec))
    assert len(plain) < len(wide)
    for b in np.quantile(lat, [0.05, 0.3, 0.6, 1.0]):  # each budget's top 3: the same archs
        a, _, _ = plain.seeds(np.array([b]), 3)
        w, _, _ = wide.seeds(np.array([b]), 3)
        assert [str(x) for x in a.to_archs(SP)] == [str(x) for x in w.to_archs(SP)]


def test_archive_seeds_save_and_load(tmp_path):
    archs, lat, acc = synthetic_data()
    ar = Archive.from_arrays(SP, archs, lat, acc, 5)
    budgets = np.quantile(lat, [0.2, 0.5, 0.9])
    dec, grp, sacc = ar.seeds(budgets, 5)
    got = dec.to_archs(SP)
    for i, b in enumerate(budgets):
        ok = np.flatnonzero(lat <= b)
        want = {str(archs[j]) for j in ok[np.argsort(-acc[ok])[:5]]}
        assert {str(a) for a, g in zip(got, grp) if g == i} == want
    np.testing.assert_allclose(sacc, [synthetic_accuracy(SP, a) for a in got])
    path = ar.save(tmp_path / "archive.jsonl", SP, {"nagkit_dataset": 1, "space": SP.name})
    back = Archive.load(path, SP)
    assert len(back) == len(ar) and np.allclose(back.accuracy, ar.accuracy)
    d2, g2, _ = back.seeds(budgets, 5)
    assert [str(a) for a in d2.to_archs(SP)] == [str(a) for a in got] and (g2 == grp).all()
    path.write_text(path.read_text().replace('"accuracy"', '"acc"', 1))
    with pytest.raises(ArtifactError, match="corrupt"):
        Archive.load(path, SP)


def test_imitation_targets_are_among_the_top_k_within_each_budget():
    archs, lat, acc = synthetic_data(400, seed=2)
    from nagkit.space.decisions import from_archs

    ar = Archive.from_decisions(from_archs(SP, archs), lat, acc, 3)
    draw = ar.targets(float(lat.min()), float(lat.max()), 3)
    bud, dec = draw(500, np.random.default_rng(0))
    got = dec.to_archs(SP)
    assert (bud >= lat.min()).all() and (bud <= lat.max()).all()
    picks = {}
    for b, a in zip(bud, got):
        ok = np.flatnonzero(lat <= b)
        top = {str(archs[j]) for j in ok[np.argsort(-acc[ok], kind="stable")[:3]]}
        assert str(a) in top
        picks.setdefault(tuple(sorted(top)), set()).add(str(a))
    assert any(len(v) > 1 for v in picks.values())  # not only the best one
    # the same stream gives the same pairs
    bud2, dec2 = draw(500, np.random.default_rng(0))
    assert (bud2 == bud).all() and dec2.to_archs(SP) == got
