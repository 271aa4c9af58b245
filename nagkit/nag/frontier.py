"""The surrogate-assisted frontier search of NAG v3 (docs/decisions.md 37), in ask/tell style.

Accuracy queries are the currency; computation on the surrogate is almost free. So each round:

1. draw ``budgets`` budgets across the table's whole latency range: one in each of equal slices,
   half the slices of log-latency (as v2's search: the frontier climbs fastest at the low end)
   and half of latency (the top of the range, where the frontier is flat and its best archs are
   hard to find, gets its share; decisions 48; :func:`nagkit.nag.guided.stratified`);
2. per budget, seed a population with its ``parents`` most accurate *queried* archs within it,
   whoever found them, and evolve it for ``generations`` generations on the surrogate alone:
   ``children`` mutants per budget and generation (small moves, a share crossed over, repaired
   down to the budget), the ``population`` best by the surrogate survive. Every budget of the
   round is one batch: one latency lookup and one surrogate pass per generation for all of them;
3. ``ask()`` returns each budget's ``picks`` best archs that were never queried; ``tell(pool)``
   adds their accuracies and refits the surrogate, warm, for ``round_steps`` steps.

A query is spent only where the surrogate, corrected by every earlier query, expects the frontier
to be; where it was wrong, the next fit knows.

With ``limited`` > 0 (off by default; decisions 52) that share of each round's budgets also
carries a parameter limit, and its parents and children must meet it too: the search then also
queries the frontiers of parameter-limited networks, which a latency-only search never reaches.

With ``explore`` > 0 (a re-targeted search: 4; decisions 53) the first rounds rank their
populations by MACs instead of the surrogate: they query the most capable archs within each
budget. A surrogate fitted on another table's frontier is pessimistic where that table's slow
archs are the new one's fast ones (all-wide networks on a GPU); a few queries there correct it.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from nagkit.latency.slots import SlotLatency
from nagkit.nag.config import ActiveConfig, SurrogateConfig
from nagkit.nag.guided import stratified
from nagkit.nag.surrogate import Surrogate
from nagkit.space import sampling as ops
from nagkit.space.decisions import Decisions, Pool, dedupe, key_bytes, rank_in_groups
from nagkit.space.resources import SlotResources
from nagkit.space.space import SearchSpace


class ActiveSearch:
    """Ask/tell surrogate-assisted search over the whole range; see the module doc.

    ``known``: queried archs (accuracy as fractions, as the sources give it); the populations hold
    the surrogate's scores (percent). ``cap``: new queries this search may make."""

    def __init__(self, space: SearchSpace, latency: SlotLatency, cfg: ActiveConfig, sur_cfg: SurrogateConfig,
                 surrogate: Surrogate, known: Pool, *, cap: int, seed: int):
        self.space, self.latency, self.cfg, self.sur_cfg = space, latency, cfg, sur_cfg
        self.surrogate, self.known, self.cap = surrogate, known, int(cap)
        self.rng = np.random.default_rng(seed)
        self.fit_rng = np.random.default_rng(seed + 1)
        self.draw = stratified(latency.fastest_ms, latency.slowest_ms, cfg.budgets, cfg.spacing)
        self.seen = set(key_bytes(space, known.dec))
        self.used = 0
        self.rounds = 0
        self.refilled = 0  # rounds filled from the children beyond the populations
        self.explored = 0  # picks of the rounds ranked by MACs (``explore``)
        self._reserve: list[Pool] = []
        self.fits: list[dict] = []
        self._res = SlotResources(space) if cfg.limited > 0 else None
        self._capacity = SlotResources(space) if cfg.explore > 0 else None
        self._known_params = self._params(known.dec) if self._res else None

    @property
    def finished(self) -> bool:
        return self.used >= self.cap

    def fit(self, steps: int, focus: int = 0) -> dict:
        rep = self.surrogate.fit(self.known.dec, self.known.accuracy, steps, self.fit_rng, focus=focus)
        self.fits.append(rep)
        return rep

    def ask(self) -> Pool:
        """This round's picks: new archs, each within the budget it was found for."""
        cfg = self.cfg
        budgets = np.sort(self.draw(self.rng))
        limits = self._limits(budgets)
        pop = self._parents(budgets, limits)
        self._reserve = []
        for _ in range(cfg.generations):
            pop = self._generation(pop, budgets, limits)
        room = self.cap - self.used
        self.rounds += 1
        n_max = min(room, cfg.picks * len(budgets))
        picks = self._picks(pop, n_max)
        if len(picks) < n_max and self._reserve:  # the populations ran out of new archs: see _picks
            more = self._picks(_concat(self._reserve), n_max - len(picks))
            picks = picks + more
            self.refilled += 1
        self._reserve = []
        if self.rounds <= cfg.explore:
            self.explored += len(picks)
        return picks

    def _params(self, dec: Decisions) -> np.ndarray:
        return self._res.per_row("params", dec)

    def _fitness(self, dec: Decisions) -> np.ndarray:
        """The order of a round's populations and picks: the surrogate's accuracy (exact where
        queried), or in the first ``explore`` rounds the log of the MACs (decisions 53)."""
        if self.rounds < self.cfg.explore:
            return np.log(self._capacity.per_row("macs", dec))
        return self.surrogate.predict(dec)

    def _limits(self, budgets: np.ndarray) -> np.ndarray:
        """Each budget's parameter limit: none (inf), or for a ``limited`` share of the budgets a
        limit drawn uniformly between the fewest parameters of a queried arch within the budget and
        those of the most accurate one (above that, the limit would not bind)."""
        out = np.full(len(budgets), np.inf)
        n = int(round(self.cfg.limited * len(budgets)))
        if n <= 0:
            return out
        k = self.known
        for g in self.rng.choice(len(budgets), n, replace=False):
            inside = np.flatnonzero(k.latency <= budgets[g])
            if len(inside) < 2:
                continue
            p = self._known_params[inside]
            hi, lo = p[np.argmax(k.accuracy[inside])], p.min()
            out[g] = lo + self.rng.random() * (hi - lo)
        return out

    def _parents(self, budgets: np.ndarray, limits: np.ndarray) -> Pool:
        """Per budget, its ``parents`` most accurate queried archs within it and its parameter
        limit (group = budget)."""
        k = self.known
        order = np.argsort(-k.accuracy, kind="stable")
        lat = k.latency[order]
        par = self._known_params[order] if self._known_params is not None else None
        rows, groups = [], []
        for g, b in enumerate(budgets):
            inside = lat <= b
            if np.isfinite(limits[g]):
                inside &= par <= limits[g]
            top = order[inside][:self.cfg.parents]
            rows.append(top)
            groups.append(np.full(len(top), g))
        idx = np.concatenate(rows).astype(np.int64)
        pop = Pool(k.dec.select(idx), np.concatenate(groups), k.latency[idx])
        pop.accuracy = self._fitness(pop.dec)  # the surrogate, exact for these (remembered); MACs while exploring
        return pop

    def _generation(self, pop: Pool, budgets: np.ndarray, limits: np.ndarray) -> Pool:
        cfg, rng, sp = self.cfg, self.rng, self.space
        pop = pop.select(np.argsort(pop.group, kind="stable"))
        count = np.bincount(pop.group, minlength=len(budgets))
        start = np.r_[0, np.cumsum(count)[:-1]]
        grp = np.repeat(np.arange(len(budgets)), cfg.children)
        grp = grp[count[grp] > 0]
        if not len(grp):
            return pop
        rows = start[grp] + (rng.random(len(grp)) * count[grp]).astype(np.int64)
        kids = ops.small_moves(sp, pop.dec.select(rows), rng, max_changes=cfg.max_changes, res_step=cfg.res_step)
        if cfg.crossover > 0:
            cross = rng.random(len(grp)) < cfg.crossover
            mates = start[grp[cross]] + (rng.random(int(cross.sum())) * count[grp[cross]]).astype(np.int64)
            mixed = ops.crossover(pop.dec.select(rows[cross]), pop.dec.select(mates), rng)
            for name in ("r", "depth", "k", "e"):
                getattr(kids, name)[cross] = getattr(mixed, name)
        bud = budgets[grp]
        lat = self.latency(kids)
        if cfg.repair > 0:
            lat = ops.repair_down(sp, kids, lat, bud, self.latency, rng, cfg.repair)
        ok = lat <= bud
        if np.isfinite(limits).any():
            ok &= self._params(kids) <= limits[grp]
        fit = np.flatnonzero(ok)
        kids = Pool(kids.select(fit), grp[fit], lat[fit])
        kids.accuracy = self._fitness(kids.dec)
        self._reserve.append(kids)
        both = pop + kids
        both = both.select(dedupe(sp, both.dec, both.group))
        return both.select(np.flatnonzero(rank_in_groups(both.group, both.accuracy) < cfg.population))

    def _picks(self, pop: Pool, n_max: int) -> Pool:
        """Each budget's ``picks`` best never-queried archs (budgets in turn, best first). Where
        budgets have fewer new archs than that (the low end of the range holds few archs), the
        others give more, up to ``n_max``: every round queries about the same number, so the
        number of rounds (and of refits) does not depend on the table.

        Late in a long search the surviving populations can hold almost nothing new (the queried
        archs, exact, outrank the surrogate's guesses); ``ask`` then fills the round from every
        child the round's generations scored, by the same rule (decisions 44). Before, such a
        round queried a few dozen archs instead of 200: a 50,000-query training on ofa-cpu-w1.0
        went on for over 1,000 rounds, a refit each."""
        keys = key_bytes(self.space, pop.dec)
        order = np.lexsort((-pop.accuracy, pop.group))
        taken = np.zeros(int(pop.group.max()) + 1 if len(pop) else 0, dtype=np.int64)
        out: list[int] = []
        used = np.zeros(len(pop), dtype=bool)
        cap = self.cfg.picks
        while len(out) < n_max:
            before = len(out)
            for i in order:
                if len(out) >= n_max:
                    break
                g = pop.group[i]
                if used[i] or taken[g] >= cap or keys[i] in self.seen:
                    continue
                self.seen.add(keys[i])
                used[i] = True
                taken[g] += 1
                out.append(int(i))
            if len(out) == before or cap >= len(pop):
                break
            cap *= 2
        idx = np.asarray(out, dtype=np.int64)
        picks = pop.select(idx)
        picks.accuracy = np.full(len(idx), np.nan)
        return picks

    def tell(self, pool: Pool) -> None:
        """Add queried picks (``pool.accuracy`` as fractions) and refit the surrogate."""
        if not len(pool):
            return
        self.used += len(pool)
        self.known = self.known + Pool(pool.dec, np.zeros(len(pool)), pool.latency, pool.accuracy)
        if self._res is not None:
            self._known_params = np.concatenate([self._known_params, self._params(pool.dec)])
        self.fit(self.sur_cfg.round_steps, focus=len(pool) if self.sur_cfg.focus else 0)


def run_active(search: ActiveSearch, query: Callable[[Decisions], np.ndarray],
               progress: Callable[[int, int], None] | None = None, patience: int = 3) -> Pool:
    """Drive ask/tell until the cap or ``patience`` rounds in a row with nothing new to query;
    ``query`` returns accuracies as fractions. Returns everything known."""
    empty = 0
    while not search.finished:
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


def _concat(pools: list[Pool]) -> Pool:
    out = pools[0]
    for p in pools[1:]:
        out = out + p
    return out


__all__ = ["ActiveSearch", "run_active", "Decisions"]
