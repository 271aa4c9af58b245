"""The accuracy-guided local search (ask/tell): caps, budgets, no repeated queries, progress."""

from __future__ import annotations

import numpy as np
import pytest

from nagkit.data.accuracy import open_accuracy_source
from nagkit.nag.config import SearchConfig
from nagkit.nag.guided import GuidedSearch, ridge_scores, run_guided, slot_features, stratified
from nagkit.space.decisions import Pool, from_archs, key_bytes
from tests.nag.helpers import LAT, SP, synthetic_data

CFG = SearchConfig(parents=4, children=10, screen=4, max_changes=2, res_step=1, repair=3, window=0.5)


def known_pool(n=150, seed=0):
    archs, lat, acc = synthetic_data(n, seed=seed)
    return Pool(from_archs(SP, archs), np.zeros(n), lat, acc)


def test_ridge_recovers_a_linear_target():
    archs, _, _ = synthetic_data(400, seed=1)
    x = slot_features(SP, from_archs(SP, archs))
    w = np.random.default_rng(0).normal(size=x.shape[1])
    y = x @ w
    pred = ridge_scores(x[:300], y[:300], x[300:], ridge=1e-6)
    assert np.corrcoef(pred, y[300:])[0, 1] > 0.99


def test_shared_search_spends_exactly_its_cap_within_budgets_without_repeats():
    src = open_accuracy_source("synthetic:", SP)
    pool = known_pool()
    draw = stratified(LAT.fastest_ms, LAT.slowest_ms, 5)
    search = GuidedSearch(SP, LAT, CFG, pool, draw, cap=137, shared=True, seed=0)
    seen = set(key_bytes(SP, pool.dec))
    asked = []
    while not search.finished:
        p = search.ask()
        assert len(p) and len(p) <= 137
        assert (p.latency <= LAT.slowest_ms).all() and np.allclose(p.latency, LAT(p.dec))
        keys = key_bytes(SP, p.dec)
        assert not (set(keys) & seen) and len(set(keys)) == len(keys)  # nothing asked twice
        seen |= set(keys)
        p.accuracy = src.evaluate_decisions(p.dec)
        asked.append(p)
        search.tell(p)
    assert search.used == 137 == src.queries and len(search.known) == 150 + 137


def test_per_budget_search_caps_each_budget_and_keeps_within_it():
    src = open_accuracy_source("synthetic:", SP)
    budgets = np.array([LAT.fastest_ms * 1.6, (LAT.fastest_ms + LAT.slowest_ms) / 2])
    seeds = known_pool(60)
    groups = []
    for g, b in enumerate(budgets):
        sel = np.flatnonzero(seeds.latency <= b)[:5]
        groups.append(Pool(seeds.dec.select(sel), np.full(len(sel), g), seeds.latency[sel], seeds.accuracy[sel]))
    start = groups[0] + groups[1]
    search = GuidedSearch(SP, LAT, CFG, start, lambda rng: budgets, cap=23, shared=False, seed=1)
    known = run_guided(search, src.evaluate_decisions, rounds=20)
    new = known.select(np.arange(len(start), len(known)))
    assert src.queries == len(new) <= 46
    for g, b in enumerate(budgets):
        assert (new.latency[new.group == g] <= b).all()
        assert search.used_per.get(g, 0) <= 23
        # the search found something at least as good within the budget as where it started
        assert known.accuracy[known.group == g].max() >= start.accuracy[start.group == g].max()


def test_search_improves_the_best_known_arch_within_a_budget():
    src = open_accuracy_source("synthetic:", SP)
    pool = known_pool(60, seed=3)
    b = (LAT.fastest_ms + LAT.slowest_ms) / 3
    best0 = pool.accuracy[pool.latency <= b].max()
    search = GuidedSearch(SP, LAT, CFG, pool, lambda rng: np.array([b]), cap=200, shared=True, seed=2)
    known = run_guided(search, src.evaluate_decisions)
    assert known.accuracy[known.latency <= b].max() > best0


@pytest.mark.parametrize("seed", [0, 1])
def test_same_seed_same_search(seed):
    runs = []
    for _ in range(2):
        src = open_accuracy_source("synthetic:", SP)
        s = GuidedSearch(SP, LAT, CFG, known_pool(), stratified(LAT.fastest_ms, LAT.slowest_ms, 3), cap=50,
                         shared=True, seed=seed)
        runs.append(key_bytes(SP, run_guided(s, src.evaluate_decisions).dec))
    assert runs[0] == runs[1]


def test_stratified_budgets_are_one_per_log_slice():
    b = stratified(1.0, 100.0, 4)(np.random.default_rng(0))
    edges = np.exp(np.linspace(0, np.log(100), 5))
    assert all(edges[i] <= x < edges[i + 1] for i, x in enumerate(b))
