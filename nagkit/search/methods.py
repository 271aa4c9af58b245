"""Baseline searches behind the ask/tell interface of :mod:`nagkit.search.base`.

- ``evolution``: OFA's ``EvolutionFinder`` exactly (its tutorial version): a random feasible
  population of 100; then 500 generations, each keeping the 25 most accurate as parents and
  making 50 mutants (resolution, each block's kernel *and* expand together, each depth:
  resampled with probability 0.1 each) and 50 crossovers (every gene from either parent), each
  redrawn until it fits the budget (rejection sampling). 100 + 500 x 100 = 50,100 queries. The
  result is OFA's: the best parent seen at the start of a generation (the last generation's
  children are evaluated but never considered, as in OFA).
- ``random``: uniform samples within the budget (rejection sampling), batches of 100.
- ``mnasnet`` / ``tunas``: REINFORCE on a factorised categorical policy with MnasNet's reward
  acc * (lat/B)^w (w = -0.07) or TuNAS's acc + beta * |lat/B - 1| (beta = -0.07).
- ``nsga2``: pymoo's NSGA-II on integer genomes, objectives (-acc, latency), constraint
  latency <= B; driven through pymoo's own ask/tell.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from nagkit.errors import CheckFailedError
from nagkit.registry import Registry
from nagkit.search.base import METHODS, SearchMethod, SearchProblem
from nagkit.space import sampling as ops
from nagkit.space.arch import Arch
from nagkit.space.decisions import Decisions, concat, n_choices, step_layout
from nagkit.space.sampling import Genome

MAX_REDRAWS = 100_000  # rejection sampling: redraws of one batch before giving up (OFA loops forever)


class Evolution(SearchMethod):
    name = "evolution"

    def __init__(self, problem: SearchProblem, seed: int = 0, population: int = 100, parent_ratio: float = 0.25,
                 mutation_ratio: float = 0.5, mutate_prob: float = 0.1, generations: int = 500):
        super().__init__(problem, seed)
        from nagkit.latency.slots import SlotLatency

        self.population_size, self.generations = population, generations
        self.n_parents = int(round(population * parent_ratio))
        self.n_mutate = int(round(population * mutation_ratio))
        self.n_cross = population - self.n_mutate
        self.mutate_prob = mutate_prob
        self.latency = SlotLatency(problem.table, problem.space)
        self.pop: tuple[Decisions, np.ndarray, np.ndarray] | None = None  # decisions, accuracy, latency
        self.parents: tuple[Decisions, np.ndarray, np.ndarray] | None = None
        self._pending: tuple[Decisions, np.ndarray] | None = None
        self.best: tuple[Arch, float, float] | None = None  # OFA's best_info: (arch, accuracy, latency)
        self.gen = 0

    @property
    def finished(self) -> bool:  # type: ignore[override]
        return self.gen > self.generations

    def _feasible(self, make, n: int) -> tuple[Decisions, np.ndarray]:
        """``n`` rows of ``make(rows)``, each row redrawn (same parents) until it fits."""
        dec = make(np.arange(n))
        lat = self.latency(dec)
        bad = np.flatnonzero(~self._fits(dec, lat))
        for _ in range(MAX_REDRAWS):
            if not len(bad):
                return dec, lat
            new = make(bad)
            nl = self.latency(new)
            ok = self._fits(new, nl)
            for name in ("r", "depth", "k", "e"):
                getattr(dec, name)[bad[ok]] = getattr(new, name)[ok]
            lat[bad[ok]] = nl[ok]
            bad = bad[~ok]
        raise CheckFailedError(f"evolution: {len(bad)} children still over {self.problem.budget_ms:g} ms or a limit after "
                               f"{MAX_REDRAWS} redraws", hint="raise the budget")

    def _fits(self, dec: Decisions, lat: np.ndarray) -> np.ndarray:
        """Within the budget, and every further limit of the problem (OFA checks one constraint; a
        limit more is one more condition of the same rejection)."""
        ok = lat <= self.problem.budget_ms
        if self.problem.fits is not None:
            ok &= np.asarray(self.problem.fits(dec), dtype=bool)
        return ok

    def _select_parents(self) -> None:
        """The n_parents most accurate (OFA: ``sorted(population)[::-1][:parents_size]``) and
        OFA's running best among them."""
        dec, acc, lat = self.pop
        order = np.argsort(acc, kind="stable")[::-1][: self.n_parents]
        self.parents = (dec.select(order), acc[order], lat[order])
        if self.best is None or acc[order[0]] > self.best[1]:
            self.best = (dec.select(order[:1]).to_archs(self.problem.space)[0], float(acc[order[0]]),
                         float(lat[order[0]]))

    def _children(self, n_mut: int, n_cross: int) -> tuple[Decisions, np.ndarray]:
        sp, rng = self.problem.space, self.rng
        par = self.parents[0]
        pm = par.select(rng.integers(len(par), size=n_mut))
        mut = self._feasible(lambda rows: ops.mutate(sp, pm.select(rows), rng, self.mutate_prob), n_mut)
        p1 = par.select(rng.integers(len(par), size=n_cross))
        p2 = par.select(rng.integers(len(par), size=n_cross))
        cross = self._feasible(lambda rows: ops.crossover(p1.select(rows), p2.select(rows), rng), n_cross)
        return concat(mut[0], cross[0]), np.concatenate([mut[1], cross[1]])

    def ask(self) -> list[Arch]:
        sp = self.problem.space
        if self.gen == 0:
            self._pending = self._feasible(lambda rows: ops.random_decisions(sp, len(rows), self.rng),
                                           self.population_size)
        else:
            self._select_parents()
            self._pending = self._children(self.n_mutate, self.n_cross)
        return self._pending[0].to_archs(sp)

    def tell(self, archs, acc, lat) -> None:
        n = len(archs)
        dec, lt = self._pending[0].select(np.arange(n)), self._pending[1][:n]
        told = (dec, np.asarray(acc, dtype=np.float64), lt)
        if self.gen == 0:
            self.pop = told
        else:
            pd, pa, pl = self.parents
            self.pop = (concat(pd, told[0]), np.concatenate([pa, told[1]]), np.concatenate([pl, told[2]]))
        self.gen += 1

    def reported(self) -> tuple[Arch, float, float] | None:
        return self.best

    def proposals(self, n: int) -> list[Arch]:
        """Children of the current parents before rejection (mutations and crossovers)."""
        sp, rng = self.problem.space, self.rng
        if self.parents is None:
            par = ops.random_decisions(sp, self.n_parents, rng)
        else:
            par = self.parents[0]
        a = par.select(rng.integers(len(par), size=n))
        b = par.select(rng.integers(len(par), size=n))
        kids = ops.mutate(sp, a, rng, self.mutate_prob)
        cross = rng.random(n) >= self.n_mutate / self.population_size
        mixed = ops.crossover(a, b, rng)
        for name in ("r", "depth", "k", "e"):
            getattr(kids, name)[cross] = getattr(mixed, name)[cross]
        return kids.to_archs(sp)

    def settings(self) -> dict[str, Any]:
        return {"population": self.population_size, "parents": self.n_parents, "mutations": self.n_mutate,
                "crossovers": self.n_cross, "mutate_prob": self.mutate_prob, "generations": self.generations,
                "constraint": "rejection sampling" + (" (budget and limits)" if self.problem.fits else ""),
                "implementation": "OFA EvolutionFinder (tutorial), exact"}


class RandomSearch(SearchMethod):
    name = "random"

    def __init__(self, problem: SearchProblem, seed: int = 0, batch: int = 100):
        super().__init__(problem, seed)
        self.batch = batch

    def ask(self) -> list[Arch]:
        return [g.to_arch(self.problem.space) for g in self.problem.feasible_genomes(self.rng, self.batch)]

    def tell(self, archs, acc, lat) -> None:
        pass

    def settings(self) -> dict[str, Any]:
        return {"batch": self.batch, "constraint": "rejection sampling"}


# -- RL baselines ----------------------------------------------------------------------------
REWARDS: Registry[Any] = Registry("reward")
REWARDS.register("mnasnet", lambda acc, lat, b, w=-0.07: acc * (lat / b) ** w)
REWARDS.register("tunas", lambda acc, lat, b, beta=-0.07: acc + beta * np.abs(lat / b - 1.0))


class PolicySearch(SearchMethod):
    """REINFORCE on independent categorical decisions (the layout of the NAG generator)."""

    def __init__(self, problem: SearchProblem, seed: int = 0, reward: str = "mnasnet", batch: int = 50,
                 lr: float = 0.1, baseline_decay: float = 0.9, coef: float = -0.07):
        super().__init__(problem, seed)
        self.name, self.reward_name, self.coef = reward, reward, coef
        self.reward = REWARDS.get(reward)
        self.batch, self.lr, self.decay = batch, lr, baseline_decay
        sp = problem.space
        self.layout = step_layout(sp)
        self.logits = [np.zeros(n_choices(sp, kind)) for kind, _, _ in self.layout]
        self.baseline: float | None = None
        self._choices: np.ndarray | None = None

    def _sample(self, n: int) -> tuple[np.ndarray, list[Arch]]:
        sp = self.problem.space
        ch = np.zeros((n, len(self.layout)), dtype=np.int64)
        for t, lg in enumerate(self.logits):
            p = np.exp(lg - lg.max())
            p /= p.sum()
            ch[:, t] = self.rng.choice(len(p), size=n, p=p)
        return ch, self._to_decisions(ch).to_archs(sp)

    def _to_decisions(self, ch: np.ndarray) -> Decisions:
        sp = self.problem.space
        md, n = sp.max_depth, len(ch)
        r = np.zeros(n, dtype=np.int64)
        depth = np.zeros((n, sp.n_stages), dtype=np.int64)
        k = np.zeros((n, sp.n_block_slots), dtype=np.int64)
        e = np.zeros((n, sp.n_block_slots), dtype=np.int64)
        for t, (kind, s, j) in enumerate(self.layout):
            if kind == "r":
                r = ch[:, t]
            elif kind == "depth":
                depth[:, s] = ch[:, t]
            else:
                (k if kind == "k" else e)[:, s * md + j] = ch[:, t]
        return Decisions(r, depth, k, e)

    def ask(self) -> list[Arch]:
        self._choices, archs = self._sample(self.batch)
        return archs

    def tell(self, archs, acc, lat) -> None:
        ch = self._choices[: len(archs)]
        arg = {"w": self.coef} if self.reward_name == "mnasnet" else {"beta": self.coef}
        rew = self.reward(np.asarray(acc), np.asarray(lat), self.problem.budget_ms, **arg)
        mean = float(rew.mean())
        self.baseline = mean if self.baseline is None else self.decay * self.baseline + (1 - self.decay) * mean
        adv = (rew - self.baseline) / (rew.std() + 1e-8)
        active = self._to_decisions(ch).active(self.problem.space)
        for t, (kind, s, j) in enumerate(self.layout):
            lg = self.logits[t]
            p = np.exp(lg - lg.max())
            p /= p.sum()
            live = active[:, s * self.problem.space.max_depth + j] if kind in ("k", "e") else np.ones(len(ch), bool)
            onehot = np.eye(len(lg))[ch[:, t]]
            grad = ((onehot - p) * (adv * live)[:, None]).mean(axis=0)
            self.logits[t] = lg + self.lr * grad

    def proposals(self, n: int) -> list[Arch]:
        return self._sample(n)[1]

    def settings(self) -> dict[str, Any]:
        coef = "w" if self.reward_name == "mnasnet" else "beta"
        return {"reward": self.reward_name, coef: self.coef, "batch": self.batch, "lr": self.lr,
                "baseline_decay": self.decay}


class NSGA2Search(SearchMethod):
    name = "nsga2"

    def __init__(self, problem: SearchProblem, seed: int = 0, population: int = 100, offspring: int = 75):
        super().__init__(problem, seed)
        from pymoo.algorithms.moo.nsga2 import NSGA2
        from pymoo.core.problem import Problem
        from pymoo.operators.crossover.sbx import SBX
        from pymoo.operators.mutation.pm import PM
        from pymoo.operators.repair.rounding import RoundingRepair
        from pymoo.operators.sampling.rnd import IntegerRandomSampling

        sp = problem.space
        self.layout = step_layout(sp)
        ub = np.array([n_choices(sp, kind) - 1 for kind, _, _ in self.layout])
        self._pm_problem = Problem(n_var=len(ub), n_obj=2, n_ieq_constr=1, xl=np.zeros(len(ub)), xu=ub, vtype=int)
        self.algorithm = NSGA2(pop_size=population, n_offsprings=offspring, sampling=IntegerRandomSampling(),
                               crossover=SBX(prob=0.9, eta=15, vtype=float, repair=RoundingRepair()),
                               mutation=PM(eta=20, vtype=float, repair=RoundingRepair()),
                               eliminate_duplicates=True)
        self.algorithm.setup(self._pm_problem, seed=seed, verbose=False)
        self._policy = PolicySearch(problem, seed)  # reuse its choices -> arch mapping
        self._pop = None
        self._recent: list[Arch] = []
        self.population, self.offspring = population, offspring

    def ask(self) -> list[Arch]:
        self._pop = self.algorithm.ask()
        x = np.asarray(self._pop.get("X")).round().astype(np.int64)
        archs = self._policy._to_decisions(x).to_archs(self.problem.space)
        self._recent = (self._recent + archs)[-1000:]
        return archs

    def tell(self, archs, acc, lat) -> None:
        from pymoo.core.evaluator import Evaluator
        from pymoo.problems.static import StaticProblem

        pop = self._pop[: len(archs)]
        f = np.stack([-np.asarray(acc), np.asarray(lat)], axis=1)
        g = (np.asarray(lat) - self.problem.budget_ms).reshape(-1, 1)
        Evaluator().eval(StaticProblem(self._pm_problem, F=f, G=g), pop)
        self.algorithm.tell(infills=pop)

    def proposals(self, n: int) -> list[Arch]:
        recent = self._recent or self._policy._sample(n)[1]
        return [recent[i % len(recent)] for i in range(n)]

    def settings(self) -> dict[str, Any]:
        return {"population": self.population, "offspring": self.offspring, "library": "pymoo NSGA2",
                "constraint": "latency <= budget (constrained domination)"}


METHODS.register("evolution", lambda p, s, **kw: Evolution(p, s, **kw))
METHODS.register("random", lambda p, s, **kw: RandomSearch(p, s, **kw))
METHODS.register("mnasnet", lambda p, s, **kw: PolicySearch(p, s, reward="mnasnet", **kw))
METHODS.register("tunas", lambda p, s, **kw: PolicySearch(p, s, reward="tunas", **kw))
METHODS.register("nsga2", lambda p, s, **kw: NSGA2Search(p, s, **kw))


def default_stop(name: str, queries: int | None = None):
    """Each method's default schedule; a query budget caps any of them."""
    from nagkit.search.base import QueryBudget, Steps

    steps = {"evolution": 501, "random": 376, "mnasnet": 752, "tunas": 752, "nsga2": 501}[name]
    stop = Steps(steps)
    return stop | QueryBudget(queries) if queries else stop


def genomes_to_archs(space, genomes: Sequence[Genome]) -> list[Arch]:
    return [g.to_arch(space) for g in genomes]


__all__ = ["Evolution", "RandomSearch", "PolicySearch", "NSGA2Search", "REWARDS", "default_stop", "genomes_to_archs"]
