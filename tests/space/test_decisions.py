"""Decision rows and the one set of batch search operators (OFA's mutation and crossover,
small moves, latency repair)."""

from __future__ import annotations

import numpy as np
import pytest

from nagkit.data.synthetic import MacsLatencyTable, tiny_space
from nagkit.latency.slots import SlotLatency
from nagkit.space import get_space, sample_many
from nagkit.space import sampling as ops
from nagkit.space.decisions import Pool, arch_keys, concat, dedupe, from_archs, key_bytes, rank_in_groups

W12 = get_space("ofa-mbv3-w1.2")
SP = tiny_space()


def test_decisions_round_trip_archs():
    archs = sample_many(W12, 50, seed=3)
    dec = from_archs(W12, archs)
    assert dec.to_archs(W12) == archs
    # inactive slots carry the stage's last block (as Arch.to_ofa_dict pads OFA's dict)
    md = W12.max_depth
    for i, a in enumerate(archs):
        for s, st in enumerate(a.stages):
            for j in range(len(st), md):
                assert (W12.ks_list[dec.k[i, s * md + j]], W12.expand_list[dec.e[i, s * md + j]]) == st[-1]


def test_keys_ignore_inactive_slots_and_dedupe_keeps_first():
    dec = from_archs(W12, sample_many(W12, 20, seed=1))
    twin = dec.copy()
    act = twin.active(W12)
    twin.k[~act] = (twin.k[~act] + 1) % 3  # only latent genes differ
    assert (arch_keys(W12, dec) == arch_keys(W12, twin)).all()
    both = concat(dec, twin)
    assert dedupe(W12, both).tolist() == list(range(20))
    assert dedupe(W12, both, np.r_[np.zeros(20), np.ones(20)]).tolist() == list(range(40))
    assert key_bytes(W12, dec) == key_bytes(W12, twin)


def test_ofa_mutation_resamples_kernel_and_expand_together_per_block():
    rng = np.random.default_rng(0)
    dec = ops.random_decisions(W12, 4000, rng)
    assert ops.mutate(W12, dec, rng, prob=0.0).to_archs(W12) == dec.to_archs(W12)
    m = ops.mutate(W12, dec, np.random.default_rng(1), prob=0.1)
    k_changed, e_changed = m.k != dec.k, m.e != dec.e
    # a block whose kernel changed was resampled, so its expand was redrawn too: it stays the
    # same only by chance (1/3), never more often
    both = (k_changed & e_changed).sum() / k_changed.sum()
    assert 0.55 < both < 0.78  # P(e changed | block resampled, k changed) = 2/3
    # each block is resampled with probability 0.1; a resample changes (k, e) w.p. 8/9
    block_changed = (k_changed | e_changed).mean()
    assert 0.1 * 8 / 9 - 0.01 < block_changed < 0.1 * 8 / 9 + 0.01
    assert 0.1 * 2 / 3 - 0.01 < (m.depth != dec.depth).mean() < 0.1 * 2 / 3 + 0.01
    nr = len(W12.resolutions)
    assert 0.1 * (nr - 1) / nr - 0.015 < (m.r != dec.r).mean() < 0.1 * (nr - 1) / nr + 0.015


def test_ofa_crossover_takes_every_gene_from_a_parent():
    rng = np.random.default_rng(2)
    a, b = ops.random_decisions(W12, 500, rng), ops.random_decisions(W12, 500, rng)
    c = ops.crossover(a, b, rng)
    for name in ("r", "depth", "k", "e"):
        x, y, z = getattr(a, name), getattr(b, name), getattr(c, name)
        assert ((z == x) | (z == y)).all()
        differ = x != y
        assert 0.45 < (z[differ] == x[differ]).mean() < 0.55  # genes independently, half from each
    # kernel and expand of a slot are crossed independently (OFA iterates the keys)
    both_differ = (a.k != b.k) & (a.e != b.e)
    from_a_k, from_a_e = (c.k == a.k)[both_differ], (c.e == a.e)[both_differ]
    assert 0.2 < (from_a_k & ~from_a_e).mean() < 0.3


def test_small_moves_change_the_arch_and_stay_valid():
    rng = np.random.default_rng(4)
    dec = ops.random_decisions(W12, 2000, rng)
    kids = ops.small_moves(W12, dec, rng, max_changes=1, res_step=2)
    for a in kids.to_archs(W12):
        W12.validate(a)
    changed = ~ops.same_arch(W12, dec, kids)
    assert changed.mean() > 0.9  # only a resolution or depth move at a bound can leave it unchanged
    assert np.abs(kids.r - dec.r).max() <= 2 and np.abs(kids.depth - dec.depth).max() <= 1


def test_repair_down_brings_rows_under_their_budget():
    lat = SlotLatency(MacsLatencyTable(), SP)
    rng = np.random.default_rng(5)
    dec = ops.random_decisions(SP, 300, rng)
    budgets = np.full(300, lat.fastest_ms + 0.3 * (lat.slowest_ms - lat.fastest_ms))
    before = lat(dec)
    after = ops.repair_down(SP, dec, before, budgets, lat, rng, steps=40)
    assert np.allclose(after, lat(dec))  # returned latencies are the rows' own
    assert (after <= budgets).mean() > (before <= budgets).mean()
    assert (after[before <= budgets] == before[before <= budgets]).all()  # rows within budget untouched


def test_pool_select_and_add_keep_rows_aligned():
    dec = from_archs(SP, sample_many(SP, 6, seed=0))
    p = Pool(dec, np.arange(6) % 2, np.arange(6.0))
    assert np.isnan(p.accuracy).all()
    q = p.select([4, 1]) + p.select([0])
    assert q.group.tolist() == [0, 1, 0] and q.latency.tolist() == [4.0, 1.0, 0.0]
    assert q.dec.to_archs(SP) == [dec.to_archs(SP)[i] for i in (4, 1, 0)]


def test_rank_in_groups():
    g = np.array([0, 1, 0, 1, 0])
    f = np.array([0.1, 0.5, 0.3, 0.2, 0.3])
    assert rank_in_groups(g, f).tolist() == [2, 0, 0, 1, 1]


@pytest.mark.parametrize("prob", [0.0, 1.0])
def test_arch_level_helpers(prob):
    rng = np.random.default_rng(7)
    a, b = sample_many(W12, 2, seed=9)
    m = ops.mutate_arch(W12, a, rng, prob)
    W12.validate(m)
    assert (m == a) == (prob == 0.0)
    c = ops.crossover_arch(W12, a, b, rng)
    assert c.r in (a.r, b.r)
