"""Inference-time local refinement: evaluator-guided mutation of the generator's samples.

Beyond the paper (docs/decisions.md): the generator's samples for a budget B seed a short,
vectorised evolutionary search in decision space whose fitness is the frozen evaluator's
R(alpha|B) for archs within B by the table latency; archs over B are never kept as results
(an over-budget member only survives while its group has nothing feasible, ranked by latency,
which repairs a budget the generator missed). It queries no accuracy source: the optional
re-ranking of :mod:`nagkit.nag.infer` does that, and is counted there.

:func:`source_search` (docs/decisions.md 11) is the accuracy-source-guided counterpart run
after re-ranking: small moves, latency repair, screening by a ridge model of the queried
accuracies, every query counted against a per-budget cap.

Everything runs on all budgets at once (one group per budget): numpy for mutation, selection
and the table lookup (:class:`DecisionLatency`), one torch call of the evaluator per round.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from nagkit.nag.decisions import Decisions, active_of
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
        if getattr(table, "slot_arrays", None) is not None:  # calibrated per block (grouped calibration too)
            def arrays(sp, r, _f=table.slot_arrays):
                return _f(sp, r, calibrated=True)

            self.calibration = None
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


def _queried_pool(space: SearchSpace, dec: Decisions, group, acc, budgets, latency_fn):
    """Start state of the source-guided searches: typed budgets, their count, group, accuracy,
    the table latency of ``dec``, the set of (group, arch) keys already queried, and a zero
    per-group count of new queries."""
    budgets = np.asarray(budgets, dtype=np.float64)
    m = len(budgets)
    group = np.asarray(group, dtype=np.int64)
    acc = np.asarray(acc, dtype=np.float64)
    lat = latency_fn(dec)
    seen = {bytes(k) for k in np.concatenate([group[:, None], arch_keys(space, dec)], axis=1).astype(np.int16)}
    return budgets, m, group, acc, lat, seen, np.zeros(m, dtype=np.int64)


def _cross_some(kids: Decisions, dec: Decisions, rows: np.ndarray, rows2: np.ndarray, rng: np.random.Generator,
                share: float) -> None:
    """Replace a ``share`` of ``kids`` (in place) by crossovers of parents ``rows`` and ``rows2``."""
    cross = rng.random(len(rows)) < share
    mixed = crossover(dec.select(rows[cross]), dec.select(rows2[cross]), rng)
    for name in ("r", "depth", "k", "e"):
        getattr(kids, name)[cross] = getattr(mixed, name)


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
    budgets, m, group, acc, lat, seen, n_new = _queried_pool(space, dec, group, acc, budgets, latency_fn)
    for _ in range(max(0, rounds)):
        rank = _rank_in_groups(group, acc)
        rows, g_child = _child_rows(group, rank, parents, children, m, rng)
        kids = mutate(space, dec.select(rows), rng, prob)
        if crossover_share > 0:  # some children cross two of the group's parents instead
            rows2, _ = _child_rows(group, rank, parents, children, m, rng)
            _cross_some(kids, dec, rows, rows2, rng, crossover_share)
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


class DecisionAccuracy:
    """Accuracy-source queries on :class:`Decisions`, counted on the source.

    For OFA's accuracy predictor (an MLP over the OFA one-hot encoding, with kernels 3/5/7,
    expands 3/4/6 and resolutions 112..239) the encoding is built in batch from the decision
    arrays and the MLP run directly; the source's ``queries`` counter is increased by the
    number of rows, and outputs are checked like ``BaseAccuracySource.evaluate`` does. Any
    other source is called through ``source.evaluate(dec.to_archs(space))``."""

    def __init__(self, source, space: SearchSpace):
        self.source, self.space = source, space
        self.layers = getattr(source, "_layers", None)
        ok = (self.layers is not None and tuple(space.ks_list) == (3, 5, 7) and tuple(space.expand_list) == (3, 4, 6)
              and all(112 <= r < 240 for r in space.resolutions))
        if ok:
            dim = space.n_block_slots * 6 + 8
            ok = self.layers[0][0].shape[1] == dim
        if not ok:
            self.layers = None
        self.r_bucket = (np.asarray(space.resolutions) - 112) // 16

    def encode(self, dec: Decisions) -> np.ndarray:
        n, slots = len(dec), self.space.n_block_slots
        act = dec.active(self.space)
        out = np.zeros((n, slots * 6 + 8), dtype=np.float32)
        rows = np.repeat(np.arange(n), slots)
        s = np.tile(np.arange(slots), n)
        a = act.reshape(-1)
        out[rows[a], (s * 3 + dec.k.reshape(-1))[a]] = 1
        out[rows[a], (slots * 3 + s * 3 + dec.e.reshape(-1))[a]] = 1
        out[np.arange(n), slots * 6 + self.r_bucket[dec.r]] = 1
        return out

    def __call__(self, dec: Decisions) -> np.ndarray:
        if len(dec) == 0:
            return np.zeros(0)
        if self.layers is None:
            return np.asarray(self.source.evaluate(dec.to_archs(self.space)), dtype=np.float64)
        import torch

        x = torch.from_numpy(self.encode(dec))
        with torch.no_grad():
            for j, (w, b) in enumerate(self.layers):
                x = torch.nn.functional.linear(x, w, b)
                if j < len(self.layers) - 1:
                    x = torch.relu(x)
        acc = x.reshape(-1).double().numpy()
        if (~np.isfinite(acc) | (acc < 0) | (acc > 1)).any():  # the checked path names the culprit
            return np.asarray(self.source.evaluate(dec.to_archs(self.space)), dtype=np.float64)
        self.source.queries += len(dec)
        return acc


def small_moves(space: SearchSpace, dec: Decisions, rng: np.random.Generator, *, max_changes: int = 2,
                res_step: int = 4) -> Decisions:
    """Mutants with 1..``max_changes`` small changes each (uniform count): a kernel or an
    expand of an active block resampled to another value, a stage's depth +-1, or the
    resolution moved by 1..``res_step`` steps either way (exactly ``-res_step`` steps when
    negative, e.g. the accuracy predictor's resolution granularity) (kinds 35/35/15/15%)."""
    out = dec.select(np.arange(len(dec)))
    out = Decisions(out.r.copy(), out.depth.copy(), out.k.copy(), out.e.copy())
    n = len(out)
    nk, ne, nd, nr = len(space.ks_list), len(space.expand_list), len(space.depth_list), len(space.resolutions)
    n_changes = rng.integers(1, max(1, max_changes) + 1, size=n)
    for c in range(max(1, max_changes)):
        rows = np.flatnonzero(n_changes > c)
        kind = np.searchsorted([0.35, 0.7, 0.85], rng.random(len(rows)), side="right")
        act = active_of(space, out.depth[rows])
        slot = (rng.random(act.shape) * act).argmax(axis=1)
        kr = rows[kind == 0]
        if nk > 1:
            out.k[kr, slot[kind == 0]] = (out.k[kr, slot[kind == 0]] + rng.integers(1, nk, size=len(kr))) % nk
        er = rows[kind == 1]
        if ne > 1:
            out.e[er, slot[kind == 1]] = (out.e[er, slot[kind == 1]] + rng.integers(1, ne, size=len(er))) % ne
        dr = rows[kind == 2]
        st = rng.integers(0, space.n_stages, size=len(dr))
        d = out.depth[dr, st] + np.where(rng.random(len(dr)) < 0.5, -1, 1)
        d = np.where(d < 0, 1, np.where(d >= nd, nd - 2, d)) if nd > 1 else out.depth[dr, st]
        out.depth[dr, st] = d
        rr = rows[kind == 3]
        if nr > 1:
            size = (rng.integers(1, res_step + 1, size=len(rr)) if res_step > 0
                    else np.full(len(rr), max(1, -res_step)))
            step = size * np.where(rng.random(len(rr)) < 0.5, -1, 1)
            out.r[rr] = np.clip(out.r[rr] + step, 0, nr - 1)
    return out


def repair_down(space: SearchSpace, dec: Decisions, lat: np.ndarray, budgets: np.ndarray,
                latency_fn: Callable[[Decisions], np.ndarray], rng: np.random.Generator, steps: int):
    """Bring rows over their budget down: up to ``steps`` times, each such row lowers the
    kernel or expand of a random active block by one choice (or, where both are the smallest,
    the depth of its stage by one). Changes ``dec`` in place; returns the new latencies
    (exact: recomputed by ``latency_fn`` for the changed rows at the end)."""
    lat = np.asarray(lat, dtype=np.float64).copy()
    table = getattr(latency_fn, "slots", None)
    if getattr(latency_fn, "calibration", None) is not None:
        table = None  # a total-level calibration: no per-block deltas
    md = space.max_depth
    depths = np.asarray(space.depth_list)
    touched = np.zeros(len(lat), dtype=bool)
    for _ in range(max(0, steps)):
        rows = np.flatnonzero(lat > budgets)
        if not len(rows):
            break
        touched[rows] = True
        act = active_of(space, dec.depth[rows])
        slot = (rng.random(act.shape) * act).argmax(axis=1)
        r, k, e = dec.r[rows], dec.k[rows, slot], dec.e[rows, slot]
        use_e = np.where((k > 0) & (e > 0), rng.random(len(rows)) < 0.5, e > 0)
        use_k = ~use_e & (k > 0)
        rest = ~use_e & ~use_k
        if table is not None:
            old = table[r, slot, k, e]
        dec.e[rows[use_e], slot[use_e]] -= 1
        dec.k[rows[use_k], slot[use_k]] -= 1
        if table is not None:
            delta = np.where(rest, 0.0, table[r, slot, dec.k[rows, slot], dec.e[rows, slot]] - old)
        if rest.any():
            rr, st = rows[rest], slot[rest] // md
            cur = dec.depth[rr, st]
            lower = cur > 0
            if table is not None:  # the stage's last active block goes
                last = st * md + depths[cur] - 1
                gone = table[dec.r[rr], last, dec.k[rr, last], dec.e[rr, last]]
                delta[np.flatnonzero(rest)] = np.where(lower, -gone, 0.0)
            dec.depth[rr, st] = np.maximum(0, cur - 1)
        if table is not None:
            lat[rows] += delta
        else:
            lat[rows] = latency_fn(dec.select(rows))
    if table is not None and touched.any():
        idx = np.flatnonzero(touched)
        lat[idx] = latency_fn(dec.select(idx))
    return lat


def _slot_features(space: SearchSpace, dec: Decisions) -> np.ndarray:
    """Kernel and expand one-hots of active slots and the resolution one-hot (a linear basis)."""
    n, slots = len(dec), space.n_block_slots
    nk, ne, nr = len(space.ks_list), len(space.expand_list), len(space.resolutions)
    act = dec.active(space)
    x = np.zeros((n, slots * (nk + ne) + nr + 1))
    rows = np.repeat(np.arange(n), slots)
    s = np.tile(np.arange(slots), n)
    a = act.reshape(-1)
    x[rows[a], (s * nk + dec.k.reshape(-1))[a]] = 1
    x[rows[a], (slots * nk + s * ne + dec.e.reshape(-1))[a]] = 1
    x[np.arange(n), slots * (nk + ne) + dec.r] = 1
    x[:, -1] = 1
    return x


class LinearSurrogate:
    """Per-group ridge regression of accuracy on :func:`_slot_features`, updated as queried
    archs arrive (normal equations kept per group; torch's single-threaded BLAS, since numpy's
    may spin threads on a busy CPU). A group with fewer than ``min_points`` predicts 0."""

    def __init__(self, space: SearchSpace, m: int, ridge: float = 1e-3, min_points: int = 20):
        import torch

        self.space, self.m, self.ridge, self.min_points = space, m, ridge, min_points
        d = len(space.resolutions) + space.n_block_slots * (len(space.ks_list) + len(space.expand_list)) + 1
        self.xtx = torch.zeros(m, d, d, dtype=torch.float64)
        self.xty = torch.zeros(m, d, dtype=torch.float64)
        self.n = np.zeros(m, dtype=np.int64)
        self.y0 = None
        self.w = None

    def add(self, dec: Decisions, group: np.ndarray, acc: np.ndarray) -> None:
        import torch

        if self.y0 is None:
            self.y0 = float(np.mean(acc)) if len(acc) else 0.0
        x = torch.from_numpy(_slot_features(self.space, dec))
        y = torch.from_numpy(np.asarray(acc, dtype=np.float64) - self.y0)
        group = np.asarray(group, dtype=np.int64)
        for gi in np.unique(group):
            rows = torch.from_numpy(np.flatnonzero(group == gi))
            xg = x[rows]
            self.xtx[gi] += xg.T @ xg
            self.xty[gi] += xg.T @ y[rows]
        self.n += np.bincount(group, minlength=self.m)
        self.w = None

    def predict(self, dec: Decisions, group: np.ndarray) -> np.ndarray:
        import torch

        if self.w is None:
            reg = torch.from_numpy(self.ridge * np.maximum(self.n, 1).astype(np.float64))[:, None, None]
            eye = torch.eye(self.xtx.shape[1], dtype=torch.float64)[None]
            self.w = torch.linalg.solve(self.xtx + reg * eye, self.xty)  # [m, d]
            sp = self.space
            ns, nk, ne = sp.n_block_slots, len(sp.ks_list), len(sp.expand_list)
            w = self.w.numpy()
            self._wk = w[:, :ns * nk].reshape(self.m, ns, nk)
            self._we = w[:, ns * nk:ns * (nk + ne)].reshape(self.m, ns, ne)
            self._wr, self._b = w[:, ns * (nk + ne):-1], w[:, -1]
        g = np.asarray(group, dtype=np.int64)
        # the linear model read off the decisions (same as features @ w, without the one-hots)
        slot = np.arange(self.space.n_block_slots)[None, :]
        per = self._wk[g[:, None], slot, dec.k] + self._we[g[:, None], slot, dec.e]
        out = np.where(dec.active(self.space), per, 0.0).sum(axis=1) + self._wr[g, dec.r] + self._b[g]
        return np.where(self.n[g] >= self.min_points, out, 0.0)


def source_search(space: SearchSpace, dec: Decisions, group: np.ndarray, acc: np.ndarray, budgets: np.ndarray,
                  latency_fn: Callable[[Decisions], np.ndarray], query_fn: Callable[[Decisions], np.ndarray], *,
                  rounds: int, queries: int, parents: int, children: int, seed: int, max_changes: int = 2,
                  res_step: int = 4, repair: int = 0, crossover_share: float = 0.0,
                  screen: int = 1):
    """Accuracy-source-guided local search from re-ranked candidates, all budgets batched.

    ``dec``/``group``/``acc``: archs already scored by the accuracy source (within budget).
    Each round mutates each group's ``parents`` most accurate archs by :func:`small_moves`
    into ``children`` mutants, drops those over budget by the table or already queried, and
    queries the source for all the rest in one batch (with ``repair`` > 0 an over-budget
    mutant first gets up to that many latency-lowering steps, :func:`repair_down`), until a group has used ``queries``
    (the cap per group, a number or one per group; a round never exceeds it). Returns the queried pool (decisions,
    group, accuracy, latency) and the number of new queries per group."""
    rng = np.random.default_rng(seed)
    budgets, m, group, acc, lat, seen, n_new = _queried_pool(space, dec, group, acc, budgets, latency_fn)
    cap = np.broadcast_to(np.asarray(queries, dtype=np.int64), (m,))
    if screen > 1:
        surr = LinearSurrogate(space, m)
        surr.add(dec, group, acc)
    for _ in range(max(0, rounds)):
        left = cap - n_new
        if (left <= 0).all():
            break
        rank = _rank_in_groups(group, acc)
        rows, g_child = _child_rows(group, rank, parents, children * max(1, screen), m, rng)
        live = left[g_child] > 0
        rows, g_child = rows[live], g_child[live]
        kids = small_moves(space, dec.select(rows), rng, max_changes=max_changes, res_step=res_step)
        if crossover_share > 0:  # some children cross two of the group's parents instead
            rows2, _ = _child_rows(group, rank, parents, children * max(1, screen), m, rng)
            _cross_some(kids, dec, rows, rows2[live], rng, crossover_share)
        k_lat = latency_fn(kids)
        if repair > 0:  # over-budget mutants give back latency elsewhere instead of being dropped
            k_lat = repair_down(space, kids, k_lat, budgets[g_child], latency_fn, rng, repair)
        if screen > 1:  # keep the `children` best mutants per group by a local linear model
            pred = surr.predict(kids, g_child)
            pred = np.where(k_lat <= budgets[g_child], pred, -np.inf)
            sel = np.flatnonzero(_rank_in_groups(g_child, pred) < children)
            kids, g_child, k_lat = kids.select(sel), g_child[sel], k_lat[sel]
        keys = np.concatenate([g_child[:, None], arch_keys(space, kids)], axis=1).astype(np.int16)
        take = np.zeros(len(kids), dtype=bool)
        used = np.zeros(m, dtype=np.int64)
        for i in np.flatnonzero(k_lat <= budgets[g_child]):
            g = g_child[i]
            if used[g] >= left[g]:
                continue
            kb = bytes(keys[i])
            if kb not in seen:
                seen.add(kb)
                take[i] = True
                used[g] += 1
        idx = np.flatnonzero(take)
        if not len(idx):
            continue
        kids, g_kids, k_lat = kids.select(idx), g_child[idx], k_lat[idx]
        k_acc = np.asarray(query_fn(kids), dtype=np.float64)
        n_new += np.bincount(g_kids, minlength=m)
        if screen > 1:
            surr.add(kids, g_kids, k_acc)
        dec = concat(dec, kids)
        group = np.concatenate([group, g_kids])
        acc = np.concatenate([acc, k_acc])
        lat = np.concatenate([lat, k_lat])
    return dec, group, acc, lat, n_new
