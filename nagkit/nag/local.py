"""Inference-time local refinement: evaluator-guided mutation of the generator's samples.

Beyond the paper (docs/decisions.md): the generator's samples for a budget B seed a short,
vectorised evolutionary search in decision space whose fitness is the frozen evaluator's
R(alpha|B) for archs within B by the table latency; archs over B are never kept as results
(an over-budget member only survives while its group has nothing feasible, ranked by latency,
which repairs a budget the generator missed). It queries no accuracy source: the optional
re-ranking of :mod:`nagkit.nag.infer` does that, and is counted there.

Everything runs on all budgets at once (one group per budget): numpy for mutation, selection
and the table lookup (:class:`DecisionLatency`), one torch call of the evaluator per round.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from nagkit.nag.decisions import Decisions
from nagkit.space.space import SearchSpace


class DecisionLatency:
    """Table latency (ms, calibrated) of :class:`Decisions`, without building ``Arch`` objects.

    Uses the per-slot arrays of a block lookup table (``fixed + sum of active slots``, the
    same sums as ``LatencyTable.predict_many``); any other table falls back to
    ``table.predict_many(space, dec.to_archs(space))``."""

    def __init__(self, table, space: SearchSpace):
        self.table, self.space = table, space
        self.fixed = self.slots = None
        self.calibration = getattr(table, "calibration", None)
        arrays = getattr(table, "_arrays", None)
        if arrays is None:
            return
        nr = len(space.resolutions)
        fixed = np.full(nr, np.nan)
        slots = np.full((nr, space.n_block_slots, len(space.ks_list), len(space.expand_list)), np.nan)
        for i, r in enumerate(space.resolutions):
            try:
                f, s = arrays(space, int(r))
            except Exception:  # noqa: BLE001 - e.g. a resolution the table lacks: predict_many names it
                continue
            if np.isfinite(f) and np.all(np.isfinite(s)):
                fixed[i], slots[i] = f, s
        if np.isfinite(fixed).any():
            self.fixed, self.slots = fixed, slots

    def __call__(self, dec: Decisions) -> np.ndarray:
        if len(dec) == 0:
            return np.zeros(0)
        if self.slots is None:
            return np.asarray(self.table.predict_many(self.space, dec.to_archs(self.space)), dtype=np.float64)
        slot_ix = np.arange(self.space.n_block_slots)[None, :]
        per = self.slots[dec.r[:, None], slot_ix, dec.k, dec.e]
        out = self.fixed[dec.r] + np.where(dec.active(self.space), per, 0.0).sum(axis=1)
        if self.calibration is not None:
            out = self.calibration.apply(out)
        bad = ~np.isfinite(out)
        if bad.any():  # resolutions without complete arrays: the table's own lookup (or its error)
            out[bad] = self.table.predict_many(self.space, dec.select(np.flatnonzero(bad)).to_archs(self.space))
        return out


def arch_keys(space: SearchSpace, dec: Decisions) -> np.ndarray:
    """One integer row per arch that ignores the latent values of inactive slots."""
    act = dec.active(space)
    return np.concatenate([dec.r[:, None], dec.depth, np.where(act, dec.k + 1, 0), np.where(act, dec.e + 1, 0)],
                          axis=1)


def concat(*ds: Decisions) -> Decisions:
    return Decisions(np.concatenate([d.r for d in ds]), np.concatenate([d.depth for d in ds]),
                     np.concatenate([d.k for d in ds]), np.concatenate([d.e for d in ds]))


def mutate(space: SearchSpace, dec: Decisions, rng: np.random.Generator, prob: float) -> Decisions:
    """OFA-style mutation on decision rows: every gene (kernel and expand of every slot, active
    or not, each stage's depth) is resampled with probability ``prob`` and the resolution moves
    to a neighbouring one with probability ``prob``; rows
    that would come out unchanged get one active kernel-or-expand gene resampled instead."""
    n = len(dec)
    nk, ne, nd, nr = len(space.ks_list), len(space.expand_list), len(space.depth_list), len(space.resolutions)

    def resample(x, k):
        m = rng.random(x.shape) < prob
        return np.where(m, rng.integers(0, k, size=x.shape), x), m

    k, mk = resample(dec.k, nk)
    e, me = resample(dec.e, ne)
    depth, md = resample(dec.depth, nd)
    # resolution: a step to a neighbouring resolution (a local move; uniform resampling would
    # mostly jump far over or under the budget)
    step = np.where(rng.random(n) < 0.5, -1, 1) * (rng.random(n) < prob)
    r = np.clip(dec.r + step, 0, nr - 1) if nr > 1 else dec.r.copy()
    out = Decisions(r, depth, k, e)
    same = (arch_keys(space, out) == arch_keys(space, dec)).all(axis=1)
    if same.any():  # force one visible change
        rows = np.flatnonzero(same)
        act = dec.active(space)[rows]
        # a random active slot per row (every stage has >= 1 active slot)
        u = rng.random(act.shape) * act
        slot = u.argmax(axis=1)
        which = rng.random(len(rows)) < 0.5
        if nk > 1:
            kr = rows[which]
            out.k[kr, slot[which]] = (dec.k[kr, slot[which]] + rng.integers(1, nk, size=len(kr))) % nk
        if ne > 1:
            er = rows[~which]
            out.e[er, slot[~which]] = (dec.e[er, slot[~which]] + rng.integers(1, ne, size=len(er))) % ne
    return out


def seed_niches(space: SearchSpace, dec: Decisions, group: np.ndarray, niches: int):
    """Resolution niches: every row also seeds each of ``niches`` resolutions (evenly spread
    over the space's) as a copy with its resolution replaced. Returns the seeds, their
    sub-group ``group * n + niche`` and ``n`` (1 and the input unchanged when off)."""
    nr = len(space.resolutions)
    group = np.asarray(group, dtype=np.int64)
    if niches <= 1 or nr <= 1:
        return dec, group, 1
    r_idx = np.unique(np.linspace(0, nr - 1, niches).round().astype(np.int64))
    n = len(r_idx)
    seeds = concat(*[Decisions(np.full(len(dec), r, dtype=dec.r.dtype), dec.depth, dec.k, dec.e) for r in r_idx])
    niche = np.repeat(np.arange(n), len(group))
    return seeds, np.tile(group, n) * n + niche, n


def crossover(a: Decisions, b: Decisions, rng: np.random.Generator) -> Decisions:
    """OFA-style crossover row by row: every gene (resolution, depths, kernels, expands) from
    either parent with probability 1/2."""

    def pick(x, y):
        return np.where(rng.random(x.shape) < 0.5, x, y)

    return Decisions(pick(a.r, b.r), pick(a.depth, b.depth), pick(a.k, b.k), pick(a.e, b.e))


ScoreFn = Callable[[Decisions, np.ndarray, np.ndarray], np.ndarray]  # (dec, latency, budgets) -> R


def _rank_in_groups(group: np.ndarray, fitness: np.ndarray) -> np.ndarray:
    """0-based rank of each row within its group by descending fitness (stable)."""
    order = np.lexsort((-fitness, group))
    g_sorted = group[order]
    start = np.r_[0, np.flatnonzero(np.diff(g_sorted)) + 1]
    counts = np.diff(np.r_[start, len(order)])
    ranks_sorted = np.arange(len(order)) - np.repeat(start, counts)
    ranks = np.empty(len(order), dtype=np.int64)
    ranks[order] = ranks_sorted
    return ranks


def fitness_of(score: np.ndarray, lat: np.ndarray, budget: np.ndarray) -> np.ndarray:
    """Evaluator score where the arch fits its budget; below every feasible arch otherwise,
    ordered by latency (smaller first), so a group with nothing feasible climbs down to B."""
    return np.where(lat <= budget, score, -1e9 - lat)


def packed_keys(space: SearchSpace, dec: Decisions, group: np.ndarray | None = None) -> np.ndarray:
    """:func:`arch_keys` (plus the group) packed into uint64 columns, a few bits per digit."""
    k = arch_keys(space, dec)
    if group is not None:
        k = np.concatenate([np.asarray(group, dtype=np.int64)[:, None], k], axis=1)
    bits = np.maximum(1, np.ceil(np.log2(k.max(axis=0) + 2))).astype(np.int64)  # per digit
    cols, acc, used = [], np.zeros(len(k), dtype=np.uint64), 0
    for j in range(k.shape[1]):
        if used + bits[j] > 64:
            cols.append(acc)
            acc, used = np.zeros(len(k), dtype=np.uint64), 0
        acc = (acc << np.uint64(bits[j])) | k[:, j].astype(np.uint64)
        used += bits[j]
    cols.append(acc)
    return np.stack(cols, axis=1)


def dedupe(space: SearchSpace, dec: Decisions, group: np.ndarray) -> np.ndarray:
    """Indices (ascending) of the first occurrence of each (group, arch)."""
    if len(dec) == 0:
        return np.zeros(0, dtype=np.int64)
    key = packed_keys(space, dec, group)
    order = np.lexsort(key.T[::-1])  # stable: equal keys keep their original order
    ks = key[order]
    first = np.r_[True, (ks[1:] != ks[:-1]).any(axis=1)]
    return np.sort(order[first])


def local_search(space: SearchSpace, dec: Decisions, group: np.ndarray, budgets: np.ndarray,
                 score_fn: ScoreFn, latency_fn: Callable[[Decisions], np.ndarray], *, rounds: int,
                 children: int, parents: int, prob: float, keep: int, seed: int,
                 lat: np.ndarray | None = None, score: np.ndarray | None = None):
    """Evaluator-guided evolution per group (budget), all groups batched.

    ``dec``/``group``: the seed archs and the index (into ``budgets``) of the budget each belongs
    to. Each round makes ``children`` mutants per group from its top ``parents`` (by
    :func:`fitness_of`), scores them, and keeps the best ``keep`` unique archs per group.
    Returns the final pool: decisions, group, latency, evaluator score (not sorted)."""
    rng = np.random.default_rng(seed)
    budgets = np.asarray(budgets, dtype=np.float64)
    group = np.asarray(group, dtype=np.int64)
    idx = dedupe(space, dec, group)
    dec, group = dec.select(idx), group[idx]
    lat = latency_fn(dec) if lat is None else np.asarray(lat)[idx]
    score = score_fn(dec, lat, budgets[group]) if score is None else np.asarray(score)[idx]
    m = len(budgets)
    for _ in range(max(0, rounds)):
        fit = fitness_of(score, lat, budgets[group])
        rows, g_child = _child_rows(group, _rank_in_groups(group, fit), parents, children, m, rng)
        kids = mutate(space, dec.select(rows), rng, prob)
        k_lat = latency_fn(kids)
        k_score = score_fn(kids, k_lat, budgets[g_child])
        dec = concat(dec, kids)
        group = np.concatenate([group, g_child])
        lat = np.concatenate([lat, k_lat])
        score = np.concatenate([score, k_score])
        idx = dedupe(space, dec, group)
        dec, group, lat, score = dec.select(idx), group[idx], lat[idx], score[idx]
        rank = _rank_in_groups(group, fitness_of(score, lat, budgets[group]))
        sel = np.flatnonzero(rank < keep)
        dec, group, lat, score = dec.select(sel), group[sel], lat[sel], score[sel]
    return dec, group, lat, score


def _child_rows(group: np.ndarray, rank: np.ndarray, parents: int, children: int, m: int,
                rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(parent row, group) of ``children`` draws per group, uniform among its top ``parents``."""
    par = np.flatnonzero(rank < parents)
    par_group = group[par]
    counts = np.bincount(par_group, minlength=m)
    starts = np.r_[0, np.cumsum(counts)[:-1]]
    par_sorted = par[np.argsort(par_group, kind="stable")]
    g_child = np.repeat(np.arange(m)[counts > 0], children)
    pick = starts[g_child] + (rng.random(len(g_child)) * counts[g_child]).astype(np.int64)
    return par_sorted[pick], g_child


def polish(space: SearchSpace, dec: Decisions, group: np.ndarray, acc: np.ndarray, budgets: np.ndarray,
           score_fn: ScoreFn, latency_fn: Callable[[Decisions], np.ndarray],
           query_fn: Callable[[Decisions], np.ndarray], *, rounds: int, queries: int, parents: int,
           children: int, prob: float, seed: int, crossover_share: float = 0.0):
    """Accuracy-source-guided refinement of re-ranked candidates, all budgets batched.

    ``dec``/``group``/``acc``: archs already scored by the accuracy source (all within their
    budget). Each round mutates each group's ``parents`` most accurate archs into ``children``
    mutants (a ``crossover_share`` of them crossovers of two such parents instead), drops those over budget or already queried, and queries the accuracy source
    (``query_fn``) for the ``queries`` best of the rest by the evaluator. Returns the queried
    pool (decisions, group, accuracy, latency) and the number of new queries per group."""
    rng = np.random.default_rng(seed)
    budgets = np.asarray(budgets, dtype=np.float64)
    m = len(budgets)
    group = np.asarray(group, dtype=np.int64)
    acc = np.asarray(acc, dtype=np.float64)
    lat = latency_fn(dec)
    seen = {bytes(k) for k in np.concatenate([group[:, None], arch_keys(space, dec)], axis=1).astype(np.int16)}
    n_new = np.zeros(m, dtype=np.int64)
    for _ in range(max(0, rounds)):
        rank = _rank_in_groups(group, acc)
        rows, g_child = _child_rows(group, rank, parents, children, m, rng)
        kids = mutate(space, dec.select(rows), rng, prob)
        if crossover_share > 0:  # some children cross two of the group's parents instead
            rows2, g2 = _child_rows(group, rank, parents, children, m, rng)
            cross = rng.random(len(rows)) < crossover_share
            mixed = crossover(dec.select(rows[cross]), dec.select(rows2[cross]), rng)
            for name in ("r", "depth", "k", "e"):
                getattr(kids, name)[cross] = getattr(mixed, name)
        k_lat = latency_fn(kids)
        keys = np.concatenate([g_child[:, None], arch_keys(space, kids)], axis=1).astype(np.int16)
        ok = k_lat <= budgets[g_child]
        fresh = np.zeros(len(kids), dtype=bool)
        for i in np.flatnonzero(ok):
            kb = bytes(keys[i])
            if kb not in seen:
                seen.add(kb)
                fresh[i] = True
        idx = np.flatnonzero(fresh)
        if not len(idx):
            continue
        kids, g_kids, k_lat = kids.select(idx), g_child[idx], k_lat[idx]
        k_score = score_fn(kids, k_lat, budgets[g_kids])
        sel = np.flatnonzero(_rank_in_groups(g_kids, k_score) < queries)
        kids, g_kids, k_lat = kids.select(sel), g_kids[sel], k_lat[sel]
        k_acc = np.asarray(query_fn(kids), dtype=np.float64)
        n_new += np.bincount(g_kids, minlength=m)
        dec = concat(dec, kids)
        group = np.concatenate([group, g_kids])
        acc = np.concatenate([acc, k_acc])
        lat = np.concatenate([lat, k_lat])
    return dec, group, acc, lat, n_new
