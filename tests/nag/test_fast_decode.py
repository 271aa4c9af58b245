"""Generation's NumPy decode (nagkit.nag.fast_decode) against Generator.forward, the decode it replaces
when sampling without further limits: the same archs from the same seeds."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from nagkit.app.workspace import load_workspace
from nagkit.nag import fast_decode
from nagkit.nag.config import GeneratorConfig, flush_denormals, torch_threads
from nagkit.nag.generator import Generator, sample_archs
from nagkit.space.decisions import Decisions


def _both(gen, budgets: np.ndarray, seed: int, greedy: bool, temperature: float = 1.0):
    rows = (np.arange(len(budgets)) % 17 == 0) if greedy else None
    with torch_threads(), flush_denormals(), torch.inference_mode():
        ref, _, _ = gen(torch.from_numpy(budgets), generator=torch.Generator().manual_seed(seed), stats=False,
                        greedy=torch.from_numpy(rows) if greedy else False, temperature=temperature)
        fast = Decisions(*fast_decode.sample(gen, budgets, torch.Generator().manual_seed(seed), rows, temperature))
    return ref, fast


def _mismatched_rows(a: Decisions, b: Decisions) -> int:
    same = (a.r == b.r) & (a.depth == b.depth).all(1) & (a.k == b.k).all(1) & (a.e == b.e).all(1)
    return int((~same).sum())


@pytest.mark.parametrize("name", ["fmnist", "ofa-note10"])
def test_the_numpy_decode_draws_the_archs_forward_draws(name):
    """Trained generators, budgets across the whole range, sampled and greedy rows, two
    temperatures. Only a draw within float32 rounding of a boundary may differ (none did in
    18,360 rows of the three shipped generators on the 2-core EPYC): at most one row in a thousand."""
    m = load_workspace(name).nag_model(with_source=False)
    lo, hi = m.range_ms
    rows = bad = 0
    for i, b in enumerate(np.geomspace(lo * 1.01, hi, 12)):
        for temperature in (1.0, 0.7):
            ref, fast = _both(m.generator, np.full(51, b), seed=i, greedy=i % 2 == 0, temperature=temperature)
            rows += len(ref)
            bad += _mismatched_rows(ref, fast)
            assert fast.r.dtype == ref.r.dtype and fast.k.shape == ref.k.shape
            assert (m.latency(fast) <= b * (1 + 1e-9)).all()  # constrained decoding: every sample fits
    assert bad <= rows // 1000, (bad, rows)


def test_an_untrained_generator_and_mixed_budgets_decode_the_same():
    """Random weights (every choice has mass) and one batch of many different budgets."""
    from nagkit.latency.slots import SlotLatency
    from nagkit.nag.budgets import BudgetGrid

    ws = load_workspace("fmnist")
    lat = SlotLatency(ws.latency_table, ws.space)
    torch.manual_seed(0)
    gen = Generator(ws.space, BudgetGrid.evenly(lat.fastest_ms, lat.slowest_ms, 5), GeneratorConfig()).bind(lat)
    gen.eval()
    budgets = np.random.default_rng(0).uniform(lat.fastest_ms * 1.01, lat.slowest_ms, 2000)
    ref, fast = _both(gen, budgets, seed=3, greedy=True)
    assert _mismatched_rows(ref, fast) <= 2
    assert len({tuple(r) for r in fast.k}) > 100  # many different archs: a real test of the draws


def test_sample_archs_uses_the_numpy_decode_without_limits_and_follows_retraining(monkeypatch):
    """sample_archs decodes in NumPy when there is no further limit; a changed weight is seen (the
    weights are read at every call), and the result is forward's."""
    m = load_workspace("fmnist").nag_model(with_source=False)
    gen = copy.deepcopy(m.generator)  # changed below
    calls = []
    real = fast_decode.sample
    monkeypatch.setattr(fast_decode, "sample", lambda *a, **k: calls.append(1) or real(*a, **k))
    b = float(np.mean(m.range_ms))
    before, _ = sample_archs(gen, [b], 200, seed=5)
    with torch.no_grad():
        gen.head_b.add_(torch.randn_like(gen.head_b) * 3.0)  # in place: the same storage, a new version
    after, _ = sample_archs(gen, [b], 200, seed=5)
    gen.head_b.data.copy_(torch.randn_like(gen.head_b) * 3.0)  # behind autograd's back: no new version
    hidden, _ = sample_archs(gen, [b], 200, seed=5)
    assert calls == [1, 1, 1]
    ref, _ = _both(gen, np.full(200, b), seed=5, greedy=False)
    assert _mismatched_rows(hidden, ref) == 0
    assert _mismatched_rows(before, after) > 0 and _mismatched_rows(after, hidden) > 0
