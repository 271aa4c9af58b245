"""One ask/tell interface for all baseline searches, with composable stopping rules.

A :class:`SearchProblem` binds a space, a latency table, an accuracy source and a budget. A
:class:`SearchMethod` proposes archs (``ask``) and learns from their accuracy and latency
(``tell``); an outside loop (:func:`run_search`) does the evaluation, so queries are counted
in one place and a run can stop on any :class:`StopRule`::

    stop = Steps(500) | TimeLimit(60) | Plateau(50) | QueryBudget(2000)

Latency comes from the table and costs nothing; accuracy comes from the source and every arch
evaluated is one query. With a query budget the last batch is truncated, so counts are exact.
"""

from __future__ import annotations

import math
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nagkit.errors import CheckFailedError
from nagkit.registry import Registry
from nagkit.space.arch import Arch
from nagkit.space.sampling import sample
from nagkit.space.space import SearchSpace


@dataclass
class SearchProblem:
    space: SearchSpace
    table: Any
    source: Any
    budget_ms: float
    # further limits beside the budget: Decisions -> [n] bool, every limit met (for example
    # nagkit.nag.constraints.Constraints.fits); None: the budget alone. Evolution rejects what fails it
    # as it rejects what is over the budget (the benchmarks' constrained baseline).
    fits: Callable[[Any], np.ndarray] | None = None

    def latency(self, archs: Sequence[Arch]) -> np.ndarray:
        return self.table.predict_many(self.space, list(archs))

    def accuracy(self, archs: Sequence[Arch]) -> np.ndarray:
        return self.source.evaluate(list(archs))

    def feasible_genomes(self, rng: np.random.Generator, n: int, make=None, max_draws: int = 2_000_000):
        """``n`` genomes whose arch fits the budget, by rejection sampling (batched)."""
        out, drawn = [], 0
        while len(out) < n:
            rate = (len(out) + 1) / (drawn + 1) if drawn else 0.5  # observed acceptance (smoothed)
            size = int(min(50_000, max(64, 1.2 * (n - len(out)) / rate)))
            batch = [make() for _ in range(size)] if make else self._uniform_genomes(rng, size)
            drawn += len(batch)
            lat = self.latency([g.to_arch(self.space) for g in batch])
            out += [g for g, l in zip(batch, lat) if l <= self.budget_ms]
            if drawn > max_draws and len(out) < n:
                raise CheckFailedError(
                    f"rejection sampling found only {len(out)} archs within {self.budget_ms:g} ms in {drawn} draws",
                    hint="raise the budget (see `nagkit lut show` for the table's range)")
        return out[:n]


    def _uniform_genomes(self, rng: np.random.Generator, size: int) -> list:
        """``size`` uniform genomes drawn with one vectorised call (same law as random_genome)."""
        from nagkit.space.sampling import Genome

        sp = self.space
        slots = sp.n_block_slots
        ki = rng.integers(len(sp.ks_list), size=(size, slots))
        ei = rng.integers(len(sp.expand_list), size=(size, slots))
        di = rng.integers(len(sp.depth_list), size=(size, sp.n_stages))
        ri = rng.integers(len(sp.resolutions), size=size)
        ks, es = np.asarray(sp.ks_list)[ki].tolist(), np.asarray(sp.expand_list)[ei].tolist()
        ds, rs = np.asarray(sp.depth_list)[di].tolist(), np.asarray(sp.resolutions)[ri].tolist()
        return [Genome(tuple(ks[i]), tuple(es[i]), tuple(ds[i]), rs[i]) for i in range(size)]


@dataclass
class SearchState:
    step: int = 0
    queries: int = 0
    started: float = field(default_factory=time.perf_counter)
    best_acc: float = -math.inf
    best_arch: Arch | None = None
    best_lat: float = math.nan
    since_improvement: int = 0
    history: list[tuple[int, float]] = field(default_factory=list)  # (queries, best acc)

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.started


class StopRule(ABC):
    @abstractmethod
    def should_stop(self, state: SearchState) -> bool: ...

    def remaining_queries(self, state: SearchState) -> float:
        return math.inf

    def __or__(self, other: StopRule) -> StopRule:
        return AnyOf((self, other))


@dataclass(frozen=True)
class AnyOf(StopRule):
    rules: tuple[StopRule, ...]

    def should_stop(self, state):
        return any(r.should_stop(state) for r in self.rules)

    def remaining_queries(self, state):
        return min(r.remaining_queries(state) for r in self.rules)

    def __or__(self, other):
        return AnyOf(self.rules + (other,))


@dataclass(frozen=True)
class Steps(StopRule):
    n: int

    def should_stop(self, state):
        return state.step >= self.n


@dataclass(frozen=True)
class TimeLimit(StopRule):
    seconds: float

    def should_stop(self, state):
        return state.elapsed >= self.seconds


@dataclass(frozen=True)
class Plateau(StopRule):
    """Stop after ``patience`` steps without the best feasible accuracy improving by ``min_delta``."""

    patience: int
    min_delta: float = 0.0

    def should_stop(self, state):
        return state.since_improvement >= self.patience


@dataclass(frozen=True)
class QueryBudget(StopRule):
    n: int

    def should_stop(self, state):
        return state.queries >= self.n

    def remaining_queries(self, state):
        return self.n - state.queries


class SearchMethod(ABC):
    """``ask() -> archs``; ``tell(archs, acc, lat)``. ``finished`` ends a method's own schedule."""

    name = "method"
    finished = False

    def __init__(self, problem: SearchProblem, seed: int = 0):
        self.problem = problem
        self.rng = np.random.default_rng(seed)
        self.seed = seed

    @abstractmethod
    def ask(self) -> list[Arch]: ...

    @abstractmethod
    def tell(self, archs: Sequence[Arch], acc: np.ndarray, lat: np.ndarray) -> None: ...

    def reported(self) -> tuple[Arch, float, float] | None:
        """The method's own answer (arch, accuracy, latency), where it differs from the best
        feasible arch told (OFA's evolution ignores its last children); None: that best."""
        return None

    def proposals(self, n: int) -> list[Arch]:
        """What the method would propose next, before any rejection (for feasibility rates)."""
        return [sample(self.problem.space, self.rng) for _ in range(n)]

    def settings(self) -> dict[str, Any]:
        return {}


@dataclass
class SearchResult:
    method: str
    budget_ms: float
    arch: Arch | None
    accuracy: float
    latency_ms: float
    queries: int
    steps: int
    seconds: float
    history: list[tuple[int, float]]
    settings: dict[str, Any]

    def to_dict(self, space: SearchSpace) -> dict[str, Any]:
        return {"method": self.method, "budget_ms": self.budget_ms, "arch": str(self.arch) if self.arch else None,
                "ofa": space.to_ofa_dict(self.arch) if self.arch else None, "accuracy": self.accuracy,
                "latency_ms": self.latency_ms, "accuracy_queries": self.queries, "steps": self.steps,
                "seconds": self.seconds, "settings": self.settings}


def run_search(method: SearchMethod, stop: StopRule, *, min_delta: float = 0.0, progress=None) -> SearchResult:
    """Drive ask/tell until ``stop`` (or the method's own schedule) ends; best feasible wins."""
    prob = method.problem
    st = SearchState()
    q0 = prob.source.queries
    while not method.finished and not stop.should_stop(st):
        archs = method.ask()
        room = stop.remaining_queries(st)
        if room < len(archs):
            archs = archs[: max(0, int(room))]
        if not archs:
            break
        lat = prob.latency(archs)
        acc = prob.accuracy(archs)
        method.tell(archs, acc, lat)
        st.queries = prob.source.queries - q0
        st.step += 1
        fit = lat <= prob.budget_ms
        if fit.any():
            j = int(np.argmax(np.where(fit, acc, -np.inf)))
            if acc[j] > st.best_acc + min_delta:
                st.best_acc, st.best_arch, st.best_lat = float(acc[j]), archs[j], float(lat[j])
                st.since_improvement = 0
            else:
                st.since_improvement += 1
        else:
            st.since_improvement += 1
        st.history.append((st.queries, st.best_acc))
        if progress:
            progress(st)
    own = method.reported()
    if own is not None:
        st.best_arch, st.best_acc, st.best_lat = own
    return SearchResult(method.name, prob.budget_ms, st.best_arch, st.best_acc if st.best_arch else math.nan,
                        st.best_lat, st.queries, st.step, st.elapsed, st.history, method.settings())


# name -> factory(problem, seed, **options) -> SearchMethod; nagkit.search.methods registers the
# built-in ones, nagkit.search.factory.make_method makes one by name
METHODS: Registry[Any] = Registry("search method", hint="see `nagkit search --help`")
