"""The accuracy-guided local search, in the ask/tell style of :mod:`nagkit.search`.

One loop serves two places:

- **training** (``shared=True``): the frontier search of ``nagkit train``. Every round draws
  budgets across the whole latency range; each budget's parents are the most accurate archs
  known so far within it, whoever found them, so a find at one budget seeds its neighbours.
  Everything it queries is counted and becomes training data; its best archs within each
  latency form the frontier archive the generator imitates.
- **generation** (``shared=False``): ``nagkit generate --search-queries N``, per budget, from
  the evaluator's ranked samples, each budget with its own queries and its own cap.

Each round, per budget B: parents make ``children * screen`` mutants
(:func:`nagkit.space.sampling.small_moves`, a share crossed over with another parent), those
over B get latency-lowering steps (:func:`~nagkit.space.sampling.repair_down`), and a ridge
model of accuracy on the known archs with latency in [(1 - window) B, B] keeps the ``children``
most promising new ones: ``ask()`` returns them as a :class:`~nagkit.space.decisions.Pool`,
``tell(pool)`` hands back their queried accuracies.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from nagkit.latency.slots import SlotLatency
from nagkit.nag.config import SPACINGS, SearchConfig
from nagkit.space import sampling as ops
from nagkit.space.decisions import Decisions, Pool, concat, key_bytes
from nagkit.space.space import SearchSpace

MIN_FIT_POINTS = 30  # known archs near B below which the ridge model is not used (random order)


def slot_features(space: SearchSpace, dec: Decisions) -> np.ndarray:
    """Kernel and expand one-hots of active slots, the resolution one-hot and a bias column."""
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


def ridge_scores(x_known: np.ndarray, y_known: np.ndarray, x_new: np.ndarray, ridge: float = 1e-2) -> np.ndarray:
    """Predictions for ``x_new`` of a ridge regression fitted on (``x_known``, ``y_known``)."""
    import torch

    xk = torch.from_numpy(x_known)
    y = torch.from_numpy(y_known - y_known.mean())
    a = xk.T @ xk + ridge * len(y_known) * torch.eye(xk.shape[1], dtype=torch.float64)
    w = torch.linalg.solve(a, xk.T @ y)
    return (torch.from_numpy(x_new) @ w).numpy()


class GuidedSearch:
    """Ask/tell accuracy-guided search; see the module docstring.

    ``known``: archs with queried accuracy (their ``group`` is the budget index they belong to
    when not ``shared``). ``budgets_fn(rng) -> budgets`` gives each round's budgets (training:
    fresh stratified draws; generation: the fixed requested budgets). ``cap``: total queries
    (``shared``) or queries per budget."""

    def __init__(self, space: SearchSpace, latency: SlotLatency, cfg: SearchConfig, known: Pool,
                 budgets_fn: Callable[[np.random.Generator], np.ndarray], *, cap: int, shared: bool, seed: int):
        self.space, self.latency, self.cfg = space, latency, cfg
        self.known, self.budgets_fn, self.cap, self.shared = known, budgets_fn, int(cap), shared
        self.rng = np.random.default_rng(seed)
        self.seen = {(0 if shared else int(g), kb) for g, kb in zip(known.group, key_bytes(space, known.dec))}
        self.used = 0  # queries so far, all budgets
        self.used_per: dict[int, int] = {}  # per budget (not shared)
        self.rounds = 0
        self._features = slot_features(space, known.dec)

    @property
    def finished(self) -> bool:
        return self.shared and self.used >= self.cap

    def ask(self) -> Pool:
        """The children to query this round (new archs within their budget)."""
        budgets = np.asarray(self.budgets_fn(self.rng), dtype=np.float64)
        out: list[Pool] = []
        for g, b in enumerate(budgets):
            if self.shared:
                room = self.cap - self.used - sum(len(p) for p in out)
            else:
                room = self.cap - self.used_per.get(g, 0)
            if room <= 0:
                continue
            kids = self._children(g, b, min(room, self.cfg.children))
            if kids is not None:
                out.append(kids)
        self.rounds += 1
        if not out:
            return Pool(Decisions.empty(self.space), np.zeros(0), np.zeros(0))
        pool = out[0]
        for p in out[1:]:
            pool = pool + p
        return pool

    def _eligible(self, g: int, b: float) -> np.ndarray:
        k = self.known
        ok = (k.latency <= b) & np.isfinite(k.accuracy)
        if not self.shared:
            ok &= k.group == g
        return np.flatnonzero(ok)

    def _children(self, g: int, b: float, n_take: int) -> Pool | None:
        cfg, rng, sp = self.cfg, self.rng, self.space
        elig = self._eligible(g, b)
        if not len(elig):
            return None
        acc = self.known.accuracy
        parents = elig[np.argsort(-acc[elig], kind="stable")[:cfg.parents]]
        n_make = n_take * max(1, cfg.screen)
        rows = parents[rng.integers(len(parents), size=n_make)]
        kids = ops.small_moves(sp, self.known.dec.select(rows), rng, max_changes=cfg.max_changes,
                               res_step=cfg.res_step)
        if cfg.crossover > 0 and len(parents) > 1:
            cross = rng.random(n_make) < cfg.crossover
            mates = parents[rng.integers(len(parents), size=int(cross.sum()))]
            mixed = ops.crossover(self.known.dec.select(rows[cross]), self.known.dec.select(mates), rng)
            for name in ("r", "depth", "k", "e"):
                getattr(kids, name)[cross] = getattr(mixed, name)
        lat = self.latency(kids)
        if cfg.repair > 0:
            lat = ops.repair_down(sp, kids, lat, np.full(len(lat), b), self.latency, rng, cfg.repair)
        fit = np.flatnonzero(lat <= b)
        if not len(fit):
            return None
        kids, lat = kids.select(fit), lat[fit]
        order = self._screen(elig, b, kids)
        keys = key_bytes(sp, kids)
        gkey = 0 if self.shared else g
        take = []
        for i in order:
            if (gkey, keys[i]) in self.seen:
                continue
            self.seen.add((gkey, keys[i]))
            take.append(i)
            if len(take) >= n_take:
                break
        if not take:
            return None
        idx = np.asarray(take, dtype=np.int64)
        return Pool(kids.select(idx), np.full(len(idx), g), lat[idx])

    def _screen(self, elig: np.ndarray, b: float, kids: Decisions) -> np.ndarray:
        """Order of ``kids`` by the ridge model fitted near B (random where too few points)."""
        k = self.known
        near = elig[k.latency[elig] >= (1.0 - self.cfg.window) * b]
        if self.cfg.screen <= 1 or len(near) < MIN_FIT_POINTS:
            return self.rng.permutation(len(kids))
        pred = ridge_scores(self._features[near], k.accuracy[near], slot_features(self.space, kids))
        return np.argsort(-pred, kind="stable")

    def tell(self, pool: Pool) -> None:
        """Add queried children (``pool.accuracy`` set) to what the search knows."""
        if not len(pool):
            return
        self.used += len(pool)
        if self.shared:
            pool = Pool(pool.dec, np.zeros(len(pool)), pool.latency, pool.accuracy)
        else:
            for g, c in zip(*np.unique(pool.group, return_counts=True)):
                self.used_per[int(g)] = self.used_per.get(int(g), 0) + int(c)
        self.known = self.known + pool
        self._features = np.concatenate([self._features, slot_features(self.space, pool.dec)])


def run_guided(search: GuidedSearch, query: Callable[[Decisions], np.ndarray], rounds: int | None = None,
               progress: Callable[[int, int], None] | None = None, patience: int = 3) -> Pool:
    """Drive ask/tell until the cap, ``rounds`` rounds, or ``patience`` rounds in a row with
    nothing new to query; returns everything known."""
    empty = 0
    while not search.finished and (rounds is None or search.rounds < rounds):
        pool = search.ask()
        if not len(pool):
            empty += 1
            if empty >= patience:
                break
            continue
        empty = 0
        pool.accuracy = np.asarray(query(pool.dec), dtype=np.float64)
        search.tell(pool)
        if progress:
            progress(search.used, search.cap)
    return search.known


def stratified(lo: float, hi: float, n: int, spacing: str = "log") -> Callable[[np.random.Generator], np.ndarray]:
    """Budgets for each round: one draw in each of ``n`` slices of [lo, hi] of equal width in
    log-latency (the frontier climbs fastest at the low end, where a millisecond buys most);
    ``spacing`` "linear": equal width in latency; "mixed": half the slices each way."""
    if spacing not in SPACINGS:
        raise ValueError(f"spacing {spacing!r} is not one of {', '.join(SPACINGS)}")

    def draw(rng: np.random.Generator) -> np.ndarray:
        if spacing == "mixed":
            k = n // 2
            return np.concatenate([_slices(lo, hi, k, True, rng), _slices(lo, hi, n - k, False, rng)])
        return _slices(lo, hi, n, spacing != "linear", rng)

    return draw


def _slices(lo: float, hi: float, n: int, log: bool, rng: np.random.Generator) -> np.ndarray:
    if not log:
        edges = np.linspace(lo, hi, n + 1)
        return edges[:-1] + rng.random(n) * np.diff(edges)
    edges = np.linspace(np.log(lo), np.log(hi), n + 1)
    return np.exp(edges[:-1] + rng.random(n) * np.diff(edges))


__all__ = ["GuidedSearch", "run_guided", "stratified", "slot_features", "ridge_scores", "concat"]
