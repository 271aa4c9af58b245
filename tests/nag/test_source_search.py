"""Accuracy-source-guided local search at generation (docs/decisions.md 11): counted queries,
per-budget caps, feasibility, determinism; the decision-space OFA predictor path."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from nagkit.data.accuracy import open_accuracy_source
from nagkit.data.synthetic import MacsLatencyTable, synthetic_accuracy, tiny_space
from nagkit.nag.config import EvaluatorConfig, GeneratorConfig, InferenceConfig
from nagkit.nag.decisions import from_archs
from nagkit.nag.generator import Generator
from nagkit.nag.infer import NagModel
from nagkit.nag.local import (DecisionAccuracy, DecisionLatency, LinearSurrogate, _slot_features, arch_keys,
                              small_moves, source_search)
from nagkit.space import sample_many
from tests.nag.helpers import small_evaluator

SP = tiny_space()
TABLE = MacsLatencyTable()


def CountingSource():
    """nagkit's own synthetic accuracy source on SP (it counts its queries)."""
    return open_accuracy_source("synthetic:", SP)


def test_decision_accuracy_matches_the_ofa_predictor_and_counts(tmp_path):
    from nagkit.data.accuracy import OfaPredictorSource
    from nagkit.space import get_space

    sp = get_space("ofa-mbv3-w1.2")
    g = torch.Generator().manual_seed(0)
    dim = sp.n_block_slots * 6 + 8
    sd = {"0.weight": torch.randn(16, dim, generator=g) * 0.05, "0.bias": torch.zeros(16),
          "2.weight": torch.randn(1, 16, generator=g) * 0.05, "2.bias": torch.full((1,), 0.5)}
    torch.save(sd, tmp_path / "p.pth")
    src = OfaPredictorSource(sp, "ofa-predictor:p.pth", tmp_path / "p.pth")
    archs = sample_many(sp, 60, seed=3)
    fast = DecisionAccuracy(src, sp)
    assert fast.layers is not None  # the vectorised path
    got = fast(from_archs(sp, archs))
    assert src.queries == 60
    np.testing.assert_allclose(got, src.evaluate(archs), rtol=1e-5)
    assert src.queries == 120
    # any other source goes through evaluate()
    other = CountingSource()
    dec = from_archs(SP, sample_many(SP, 7, seed=1))
    assert len(DecisionAccuracy(other, SP)(dec)) == 7 and other.queries == 7


def test_linear_surrogate_recovers_a_linear_target():
    dec = from_archs(SP, sample_many(SP, 400, seed=5))
    x = _slot_features(SP, dec)
    w = np.random.default_rng(0).normal(size=x.shape[1]) * 0.01
    group = np.zeros(len(dec), dtype=np.int64)
    s = LinearSurrogate(SP, 1, ridge=1e-6)
    s.add(dec.select(np.arange(300)), group[:300], x[:300] @ w)
    new = dec.select(np.arange(300, 400))
    pred = s.predict(new, group[300:])
    # equal up to a constant (the intercept absorbs the centring)
    assert np.corrcoef(pred, x[300:] @ w)[0, 1] > 0.99


def test_small_moves_stay_in_the_space():
    dec = from_archs(SP, sample_many(SP, 200, seed=2))
    kids = small_moves(SP, dec, np.random.default_rng(0), max_changes=3, res_step=-1)
    for a in kids.to_archs(SP):
        SP.validate(a)
    assert (arch_keys(SP, kids) != arch_keys(SP, dec)).any(axis=1).mean() > 0.9


@pytest.mark.parametrize("screen,crossover", [(1, 0.0), (4, 0.0), (4, 0.5)])
def test_source_search_caps_queries_keeps_budgets_and_improves(screen, crossover):
    src = CountingSource()
    lat_fn = DecisionLatency(TABLE, SP)
    seeds = from_archs(SP, sample_many(SP, 60, seed=7))
    lat = lat_fn(seeds)
    budgets = np.array([np.quantile(lat, 0.3), np.quantile(lat, 0.8)])
    grp = np.repeat([0, 1], 30)
    keep = lat <= budgets[grp]
    seeds, grp = seeds.select(np.flatnonzero(keep)), grp[keep]
    acc0 = src.evaluate(seeds.to_archs(SP))
    src.queries = 0

    def query(d):
        return src.evaluate(d.to_archs(SP))

    out = source_search(SP, seeds, grp, acc0, budgets, lat_fn, query, rounds=8, queries=np.array([25, 40]),
                        parents=3, children=20, seed=0, repair=3, screen=screen, crossover_share=crossover)
    dec, g, acc, lat2, n_new = out
    assert list(n_new) == [int((g[len(grp):] == i).sum()) for i in range(2)]
    assert n_new[0] <= 25 and n_new[1] <= 40 and src.queries == n_new.sum() > 0
    assert (lat2 <= budgets[g]).all() and np.allclose(lat2, lat_fn(dec))
    np.testing.assert_allclose(acc, [synthetic_accuracy(SP, a) for a in dec.to_archs(SP)])
    for i in range(2):
        assert acc[g == i].max() >= acc0[grp == i].max()
    again = source_search(SP, seeds, grp, acc0, budgets, lat_fn, query, rounds=8, queries=np.array([25, 40]),
                          parents=3, children=20, seed=0, repair=3, screen=screen, crossover_share=crossover)
    assert (arch_keys(SP, again[0]) == arch_keys(SP, dec)).all()


def test_generate_with_source_search_counts_every_query_and_stays_within_budget():
    ev, grid, _ = small_evaluator(300, EvaluatorConfig(epochs=3, hidden=32, batch_size=64, budget_feature=True))
    gen = Generator(SP, grid, GeneratorConfig(hidden=16), embed_dim=8)
    inf = InferenceConfig(search_rounds=4, search_queries=12, search_children=10, search_parents=3,
                          search_screen=3, search_repair=2, search_max_changes=3)
    src = CountingSource()
    m = NagModel(SP, TABLE, ev, gen, src, inference=inf)
    budgets = list(grid.values[1:])
    res = m.generate(budgets, samples=30, rerank=6, top=2, seed=3)
    for r, b in zip(res, budgets):
        assert all(c.latency_ms <= b for c in r.candidates)
        assert r.queries <= 6 + 12 and r.extra["search_queries_cap"] == 12
        assert r.best.accuracy == max(c.accuracy for c in r.candidates if c.accuracy is not None)
    assert src.queries == sum(r.queries for r in res) > 6 * len(budgets)  # the search queried more
    again = m.generate(budgets, samples=30, rerank=6, top=2, seed=3)
    assert [str(r.best.arch) for r in res] == [str(r.best.arch) for r in again]
    # the per-call override: 0 turns the search off
    off = m.generate(budgets, samples=30, rerank=6, top=2, seed=3, search_queries=0)
    assert all(r.queries <= 6 for r in off)
