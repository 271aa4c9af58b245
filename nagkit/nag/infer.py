"""Inference: budgets in, ranked architectures out (the API `nagkit build` calls).

For each budget B: sample candidates from pi(.|B) (all budgets in one batch), keep those whose
table latency is <= B (resampling, bounded, when none fits), rank the unique feasible ones by
the evaluator R(alpha|B), optionally re-rank the top ``rerank`` by the accuracy source, and
report the accuracy of what is returned *from the accuracy source* (labelled as such). Every
accuracy-source query is counted in the result.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from nagkit.errors import CheckFailedError
from nagkit.nag.decisions import Decisions
from nagkit.nag.generator import sample_archs
from nagkit.space.arch import Arch


class NoFeasibleArchError(CheckFailedError):
    """No sampled architecture met the budget after bounded resampling (exit 1)."""


@dataclass
class Candidate:
    arch: Arch
    latency_ms: float
    evaluator_score: float
    accuracy: float | None = None  # from the accuracy source, when queried

    def to_dict(self, space) -> dict[str, Any]:
        return {"arch": str(self.arch), "ofa": space.to_ofa_dict(self.arch), "latency_ms": self.latency_ms,
                "evaluator_score": self.evaluator_score, "accuracy": self.accuracy}


@dataclass
class BudgetResult:
    budget_ms: float
    candidates: list[Candidate]  # best first
    n_sampled: int
    n_feasible: int
    rounds: int
    accuracy_source: str
    queries: int
    seconds: float
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def best(self) -> Candidate:
        return self.candidates[0]

    @property
    def feasible_rate(self) -> float:
        return self.n_feasible / self.n_sampled if self.n_sampled else 0.0

    def to_dict(self, space, top: int | None = None) -> dict[str, Any]:
        cands = self.candidates if top is None else self.candidates[:top]
        return {"budget_ms": self.budget_ms, "best": self.best.to_dict(space),
                "candidates": [c.to_dict(space) for c in cands], "n_sampled": self.n_sampled,
                "n_feasible": self.n_feasible, "feasible_rate": self.feasible_rate, "rounds": self.rounds,
                "accuracy_source": self.accuracy_source, "accuracy_queries": self.queries,
                "seconds": self.seconds}


class NagModel:
    """A loaded workspace model: space, table, evaluator, generator (and the accuracy source)."""

    def __init__(self, space, table, evaluator, generator, source=None):
        self.space, self.table, self.evaluator, self.generator = space, table, evaluator, generator
        self.source = source
        self.grid = generator.grid

    @classmethod
    def from_workspace(cls, workspace, with_source: bool = True) -> NagModel:
        from nagkit.nag.train import load_model
        from nagkit.workspace import load_workspace

        ws = load_workspace(workspace)
        ev, _ = load_model(ws.require_artifact("evaluator"), "evaluator", ws.space)
        gen, _ = load_model(ws.require_artifact("generator"), "generator", ws.space)
        return cls(ws.space, ws.latency_table, ev, gen, ws.open_accuracy_source() if with_source else None)

    def sample(self, budgets: Sequence[float], n: int, seed: int = 0) -> tuple[list[Arch], np.ndarray, np.ndarray]:
        """Raw samples: archs, their table latency and their budget (n per budget, batched)."""
        b = self.grid.check(budgets)
        dec, bud = sample_archs(self.generator, b, n, seed)
        archs = dec.to_archs(self.space)
        return archs, self.table.predict_many(self.space, archs), bud

    def scores(self, archs: Sequence[Arch], lat: np.ndarray, budgets: np.ndarray) -> np.ndarray:
        from nagkit.nag.decisions import from_archs

        ev = self.evaluator
        with torch.no_grad():
            x = ev.features(from_archs(self.space, archs), lat)
            return ev.score(x, torch.from_numpy(np.asarray(budgets, dtype=np.float64)).float()).numpy()

    def generate(self, budgets: Sequence[float], *, samples: int = 500, rerank: int = 0, max_rounds: int = 10,
                 seed: int = 0, top: int = 10, accuracy: bool = True) -> list[BudgetResult]:
        """Ranked candidates per budget. ``rerank`` > 0 re-scores the evaluator's top
        ``rerank`` feasible candidates with the accuracy source; ``accuracy`` queries the
        source for the returned candidates (``top`` of them) so they carry a real accuracy."""
        from nagkit.nag.train import torch_threads

        with torch_threads():
            return self._generate(budgets, samples=samples, rerank=rerank, max_rounds=max_rounds, seed=seed,
                                  top=top, accuracy=accuracy)

    def _unique_feasible(self, dec, budget: float) -> tuple[Decisions, np.ndarray, int]:
        """Unique rows of ``dec`` (inactive slots ignored), their table latency, and how many
        of the raw samples fit ``budget``. Only unique archs are built and looked up."""
        key = np.concatenate([dec.r[:, None], dec.depth, np.where(dec.active(self.space), dec.k + 1, 0),
                              np.where(dec.active(self.space), dec.e + 1, 0)], axis=1)
        _, first, inverse = np.unique(key, axis=0, return_index=True, return_inverse=True)
        uniq = dec.select(first)
        lat = self.table.predict_many(self.space, uniq.to_archs(self.space))
        n_fit = int((lat[inverse.reshape(-1)] <= budget).sum())
        keep = lat <= budget
        return uniq.select(np.flatnonzero(keep)), lat[keep], n_fit

    def _generate(self, budgets, *, samples, rerank, max_rounds, seed, top, accuracy) -> list[BudgetResult]:
        budgets = [float(b) for b in self.grid.check(budgets)]
        t0 = time.perf_counter()
        pool: dict[int, list[tuple[Decisions, np.ndarray]]] = {i: [] for i in range(len(budgets))}
        n_sampled = [0] * len(budgets)
        n_feas = [0] * len(budgets)
        rounds = [0] * len(budgets)
        todo = list(range(len(budgets)))
        for rnd in range(max(1, max_rounds)):
            if not todo:
                break
            dec, _ = sample_archs(self.generator, np.array([budgets[i] for i in todo]), samples,
                                  seed=seed + 7919 * rnd)
            for j, i in enumerate(todo):
                rounds[i] += 1
                n_sampled[i] += samples
                d, lat, n_fit = self._unique_feasible(dec.select(slice(j * samples, (j + 1) * samples)), budgets[i])
                n_feas[i] += n_fit
                if len(d):
                    pool[i].append((d, lat))
            todo = [i for i in todo if not pool[i]]
        if todo:
            i = todo[0]
            raise NoFeasibleArchError(
                f"no generated architecture met the budget {budgets[i]:g} ms after {rounds[i]} rounds of "
                f"{samples} samples", hint="raise the budget, pass more --samples, or retrain the generator")
        elapsed = time.perf_counter() - t0
        results = []
        for i, b in enumerate(budgets):
            t1 = time.perf_counter()
            d, lat = pool[i][0]
            for d2, l2 in pool[i][1:]:  # several rounds: merge (duplicates across rounds are dropped below)
                d = Decisions(np.concatenate([d.r, d2.r]), np.concatenate([d.depth, d2.depth]),
                              np.concatenate([d.k, d2.k]), np.concatenate([d.e, d2.e]))
                lat = np.concatenate([lat, l2])
            archs = d.to_archs(self.space)
            with torch.no_grad():
                x = self.evaluator.features(d, lat)
                sc = self.evaluator.score(x, torch.full((len(archs),), b)).numpy()
            order = np.argsort(-sc, kind="stable")
            seen: set[str] = set()
            cands = []
            for j in order:
                key = str(archs[j])
                if key not in seen:
                    seen.add(key)
                    cands.append(Candidate(archs[j], float(lat[j]), float(sc[j])))
            q0 = self.source.queries if self.source is not None else 0
            if rerank > 0 and self.source is not None:
                head = cands[:rerank]
                accs = self.source.evaluate([c.arch for c in head])
                for c, a in zip(head, accs):
                    c.accuracy = float(a)
                head.sort(key=lambda c: -c.accuracy)
                cands = head + cands[rerank:]
            if accuracy and self.source is not None:
                need = [c for c in cands[:top] if c.accuracy is None]
                if need:
                    for c, a in zip(need, self.source.evaluate([c.arch for c in need])):
                        c.accuracy = float(a)
            queries = (self.source.queries - q0) if self.source is not None else 0
            results.append(BudgetResult(b, cands, n_sampled[i], n_feas[i], rounds[i],
                                        self.source.name if self.source is not None else "none", queries,
                                        elapsed / len(budgets) + time.perf_counter() - t1))
        return results


def generate(workspace, budgets: Sequence[float], *, samples: int | None = None, rerank: int | None = None,
             seed: int = 0, top: int = 10, model: NagModel | None = None) -> list[BudgetResult]:
    """Ranked candidates for each budget (best first), for `nagkit generate` and `nagkit build`."""
    from nagkit.workspace import load_workspace

    ws = load_workspace(workspace)
    model = model or NagModel.from_workspace(ws)
    inf = ws.inference
    return model.generate(budgets, samples=samples or inf.samples,
                          rerank=inf.rerank if rerank is None else rerank, max_rounds=inf.max_rounds,
                          seed=seed, top=top)
