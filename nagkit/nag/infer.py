"""Inference: budgets in, ranked architectures out (the API `nagkit build` calls).

For each budget B: sample candidates from pi(.|B) (all budgets in one batch), keep those whose
table latency is <= B (resampling, bounded, when none fits), rank the unique feasible ones by
the evaluator R(alpha|B), optionally re-rank the top ``rerank`` by the accuracy source, and
report the accuracy of what is returned *from the accuracy source* (labelled as such). Every
accuracy-source query is counted in the result.

Beyond the paper (``InferenceConfig``, docs/decisions.md 10), off unless the workspace turns
them on: evaluator-guided local refinement of the samples (``local_*``, optionally in
resolution niches; no accuracy queries; it also repairs a budget no sample met) and, after
re-ranking, accuracy-source-guided polishing (``polish_*``; counted like the re-ranking) and
the accuracy-source-guided local search of docs/decisions.md 11 (``search_*``, capped at
``search_queries`` per budget; counted the same way). Only archs with table latency <= B are
ever returned.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from nagkit.errors import CheckFailedError
from nagkit.nag.config import InferenceConfig
from nagkit.nag.decisions import Decisions
from nagkit.nag.generator import sample_archs
from nagkit.space.arch import Arch


REPAIR_ROUNDS = 30  # local-search rounds that bring a budget no sample met down to it
CANDIDATES = 20  # ranked candidates kept per budget (build falls back along them)


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

    def __init__(self, space, table, evaluator, generator, source=None, inference: InferenceConfig | None = None,
                 archive=None):
        self.space, self.table, self.evaluator, self.generator = space, table, evaluator, generator
        self.source = source
        self.archive = archive  # nagkit.nag.archive.Archive: the second search population's seeds
        self.grid = generator.grid
        self.inference = inference or InferenceConfig()  # temperature and local refinement
        self._latency = None

    @classmethod
    def from_workspace(cls, workspace, with_source: bool = True) -> NagModel:
        from nagkit.nag.train import load_model
        from nagkit.app.workspace import load_workspace

        ws = load_workspace(workspace)
        ev, _ = load_model(ws.require_artifact("evaluator"), "evaluator", ws.space)
        gen, _ = load_model(ws.require_artifact("generator"), "generator", ws.space)
        archive = None
        if with_source and ws.inference.archive_seeds > 0:
            from nagkit.nag.archive import Archive

            archive = Archive.load(ws.require_artifact("archive"), ws.space)
        return cls(ws.space, ws.latency_table, ev, gen, ws.open_accuracy_source() if with_source else None,
                   inference=ws.inference, archive=archive)

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
                 seed: int = 0, top: int = 10, accuracy: bool = True,
                 search_queries: int | None = None) -> list[BudgetResult]:
        """Ranked candidates per budget. ``rerank`` > 0 re-scores the evaluator's top
        ``rerank`` feasible candidates with the accuracy source; ``accuracy`` queries the
        source for the returned candidates (``top`` of them) so they carry a real accuracy.
        ``search_queries`` overrides ``inference.search_queries`` (the per-budget cap of the
        source-guided local search after re-ranking; 0 turns it off)."""
        from nagkit.nag.train import torch_threads

        with torch_threads():
            return self._generate(budgets, samples=samples, rerank=rerank, max_rounds=max_rounds, seed=seed,
                                  top=top, accuracy=accuracy,
                                  search_queries=self.inference.search_queries if search_queries is None
                                  else search_queries)

    def _score_fn(self):
        ev = self.evaluator

        def score(dec: Decisions, lat: np.ndarray, budgets: np.ndarray) -> np.ndarray:
            if len(dec) == 0:
                return np.zeros(0)
            with torch.no_grad():
                return ev.score(ev.features(dec, lat), torch.from_numpy(np.asarray(budgets)).float()).numpy()

        return score

    def _add_archive_seeds(self, q_dec, q_grp, q_acc, q_lat, barr, lat_fn, acc_fn):
        """Append the archive's best archs within each budget (by the current table; those not
        already re-ranked) to the pool, with freshly queried (counted) accuracies."""
        from nagkit.nag.local import arch_keys, concat

        a_dec, a_grp, _ = self.archive.seeds(barr, self.inference.archive_seeds)
        a_lat = lat_fn(a_dec)
        have = {bytes(k) for k in np.concatenate([q_grp[:, None], arch_keys(self.space, q_dec)], axis=1)
                .astype(np.int16)}
        keys = np.concatenate([a_grp[:, None], arch_keys(self.space, a_dec)], axis=1).astype(np.int16)
        keep = np.array([a_lat[i] <= barr[a_grp[i]] and bytes(keys[i]) not in have for i in range(len(a_grp))],
                        dtype=bool)
        a_dec, a_grp, a_lat = a_dec.select(np.flatnonzero(keep)), a_grp[keep], a_lat[keep]
        a_acc = np.asarray(acc_fn(a_dec), float) if len(a_grp) else np.zeros(0)
        return (concat(q_dec, a_dec), np.concatenate([q_grp, a_grp]), np.concatenate([q_acc, a_acc]),
                np.concatenate([q_lat, a_lat]))

    def _generate(self, budgets, *, samples, rerank, max_rounds, seed, top, accuracy,
                  search_queries) -> list[BudgetResult]:
        from nagkit.nag.local import (DecisionAccuracy, DecisionLatency, concat, dedupe, fitness_of, local_search,
                                      polish, seed_niches, source_search)

        inf = self.inference
        search_rounds = inf.search_rounds
        budgets = [float(b) for b in self.grid.check(budgets)]
        m = len(budgets)
        barr = np.asarray(budgets)
        t0 = time.perf_counter()
        if self._latency is None:
            self._latency = DecisionLatency(self.table, self.space)
        lat_fn, score_fn = self._latency, self._score_fn()
        n_sampled, n_feas, rounds = np.zeros(m, int), np.zeros(m, int), np.zeros(m, int)
        parts: list[tuple[Decisions, np.ndarray, np.ndarray]] = []
        todo = np.arange(m)
        # with local refinement one round suffices: it repairs a budget with nothing feasible
        n_rounds = 1 if inf.local_rounds > 0 else max(1, max_rounds)
        for rnd in range(n_rounds):
            dec, _ = sample_archs(self.generator, barr[todo], samples, seed=seed + 7919 * rnd,
                                  temperature=inf.temperature)
            grp = np.repeat(todo, samples)
            lat = lat_fn(dec)
            fit = lat <= barr[grp]
            rounds[todo] += 1
            n_sampled[todo] += samples
            n_feas += np.bincount(grp[fit], minlength=m)
            parts.append((dec, grp, lat))
            todo = np.flatnonzero(n_feas == 0)
            if not len(todo):
                break
        dec = concat(*[p[0] for p in parts])
        grp = np.concatenate([p[1] for p in parts])
        lat = np.concatenate([p[2] for p in parts])
        niche = np.zeros(len(grp), dtype=np.int64)
        n_niche = 1
        if inf.local_rounds > 0:
            # resolution niches (local_niches > 1): each searched separately, so one resolution
            # cannot crowd out the others before re-ranking
            if inf.local_niches > 1:
                dec, sub, n_niche = seed_niches(self.space, dec, grp, inf.local_niches)
                lat = None
            else:
                sub = grp
            dec, sub, lat, sc = local_search(
                self.space, dec, sub, np.repeat(barr, n_niche), score_fn, lat_fn, rounds=inf.local_rounds,
                children=max(1, inf.local_children // n_niche), parents=max(2, inf.local_parents // n_niche),
                prob=inf.local_prob, keep=max(2, inf.local_keep // n_niche), seed=seed, lat=lat)
            grp, niche = sub // n_niche, sub % n_niche
        else:
            keep = lat <= barr[grp]
            miss = np.flatnonzero(np.bincount(grp[keep], minlength=m) == 0)
            if len(miss):  # repair: mutate the fastest samples of those budgets down to B
                sel = np.flatnonzero(np.isin(grp, miss))
                r_dec, r_grp, r_lat, _ = local_search(
                    self.space, dec.select(sel), grp[sel], barr, lambda d, l, b: np.zeros(len(d)), lat_fn,
                    rounds=REPAIR_ROUNDS, children=100, parents=10, keep=50, prob=0.1, seed=seed, lat=lat[sel])
                dec, grp, lat = concat(dec, r_dec), np.concatenate([grp, r_grp]), np.concatenate([lat, r_lat])
                keep = lat <= barr[grp]
            dec, grp, lat = dec.select(keep), grp[keep], lat[keep]
            idx = dedupe(self.space, dec, grp)
            dec, grp, lat = dec.select(idx), grp[idx], lat[idx]
            sc = score_fn(dec, lat, barr[grp])
            niche = np.zeros(len(grp), dtype=np.int64)
        ok = lat <= barr[grp]
        missing = [i for i in range(m) if not ok[grp == i].any()]
        if missing:
            i = missing[0]
            raise NoFeasibleArchError(
                f"no generated architecture met the budget {budgets[i]:g} ms after {rounds[i]} rounds of "
                f"{samples} samples and {REPAIR_ROUNDS} rounds of latency-reducing mutation",
                hint="raise the budget, pass more --samples, or retrain the generator")
        fit_all = fitness_of(sc, lat, barr[grp])
        # rank within (budget, niche); re-ranking takes the top of every niche in turn
        sub = grp * n_niche + niche
        order = np.lexsort((-fit_all, sub))
        order = order[ok[order]]
        rank = np.empty(len(grp), dtype=np.int64)
        rank[order] = np.arange(len(order)) - np.searchsorted(sub[order], sub[order], side="left")
        if n_niche > 1:
            rank = rank * n_niche + niche
        # re-ranking (and polishing) by the accuracy source, all budgets in one batch
        queried: dict[tuple[int, int], float] = {}  # (group, row in the extended pool) -> accuracy
        n_queries = np.zeros(m, dtype=np.int64)
        if rerank > 0 and self.source is not None:
            acc_fn = DecisionAccuracy(self.source, self.space)  # counted on the source
            head = np.flatnonzero(ok & (rank < rerank))
            head = head[np.lexsort((rank[head], grp[head]))]
            q_dec, q_grp, q_lat = dec.select(head), grp[head], lat[head]
            q_acc = np.asarray(acc_fn(q_dec), float)
            n_queries += np.bincount(q_grp, minlength=m)
            if inf.polish_rounds > 0:
                q_dec, q_grp, q_acc, q_lat, n_new = polish(
                    self.space, q_dec, q_grp, q_acc, barr, score_fn, lat_fn, acc_fn, rounds=inf.polish_rounds,
                    queries=inf.polish_queries, parents=inf.polish_parents, children=inf.polish_children,
                    prob=inf.local_prob, seed=seed + 1, crossover_share=inf.polish_crossover)
                n_queries += n_new
            pops = 1  # search populations per budget: the re-ranked samples (and the archive's seeds)
            if search_rounds > 0 and search_queries > 0 and inf.archive_seeds > 0 and self.archive is not None:
                n_before = len(q_grp)
                q_dec, q_grp, q_acc, q_lat = self._add_archive_seeds(q_dec, q_grp, q_acc, q_lat, barr, lat_fn,
                                                                     acc_fn)
                n_queries += np.bincount(q_grp[n_before:], minlength=m)
                q_grp = q_grp.copy()
                q_grp[n_before:] += m  # a population of its own: the samples' basin cannot absorb it
                pops = 2
            if search_rounds > 0 and search_queries > 0:
                share = inf.archive_share if pops == 2 else 0.0  # the archive population's share
                kw = dict(parents=inf.search_parents,
                          children=max(1, round(inf.search_children * max(share, 1 - share))),
                          max_changes=inf.search_max_changes, res_step=inf.search_res_step,
                          repair=inf.search_repair, crossover_share=inf.search_crossover,
                          screen=inf.search_screen)
                n_arch = int(round(search_queries * share))
                cap = search_queries if pops == 1 else np.r_[np.full(m, search_queries - n_arch),
                                                             np.full(m, n_arch)]
                q_dec, q_grp, q_acc, q_lat, n_new = source_search(
                    self.space, q_dec, q_grp, q_acc, np.tile(barr, pops), lat_fn, acc_fn, rounds=search_rounds,
                    queries=cap, seed=seed + 2, **kw)
                n_queries += n_new.reshape(pops, m).sum(axis=0)
                q_grp = q_grp % m
            # the queried archs join the pool (those from polishing and search are new rows)
            n_old = len(head)
            extra = q_dec.select(np.arange(n_old, len(q_grp)))
            dec = concat(dec, extra)
            grp = np.concatenate([grp, q_grp[n_old:]])
            lat = np.concatenate([lat, q_lat[n_old:]])
            new_sc = score_fn(extra, q_lat[n_old:], barr[q_grp[n_old:]])
            sc = np.concatenate([sc, new_sc])
            fit_all = np.concatenate([fit_all, new_sc])
            ok = np.concatenate([ok, np.ones(len(q_grp) - n_old, dtype=bool)])
            rows = np.concatenate([head, np.arange(len(grp) - (len(q_grp) - n_old), len(grp))])
            queried = {(int(g), int(r)): float(a) for g, r, a in zip(q_grp, rows, q_acc)}
        n_keep = max(rerank, top, CANDIDATES)
        elapsed = time.perf_counter() - t0
        results = []
        for i, b in enumerate(budgets):
            t1 = time.perf_counter()
            sel = np.flatnonzero((grp == i) & ok)
            n_unique = len(sel)
            acc_of = np.array([queried.get((i, int(j)), np.nan) for j in sel])
            has = np.isfinite(acc_of)
            # queried archs first, by accuracy; then the rest by the evaluator
            key = np.where(has, -acc_of, 0.0)
            sel = sel[np.lexsort((-fit_all[sel], key, ~has))][:n_keep]
            archs = dec.select(sel).to_archs(self.space)
            cands = [Candidate(a, float(lat[j]), float(sc[j]), queried.get((i, int(j)))) for a, j in zip(archs, sel)]
            q0 = self.source.queries if self.source is not None else 0
            if accuracy and self.source is not None:
                need = [c for c in cands[:top] if c.accuracy is None]
                if need:
                    for c, a in zip(need, self.source.evaluate([c.arch for c in need])):
                        c.accuracy = float(a)
            queries = int(n_queries[i]) + ((self.source.queries - q0) if self.source is not None else 0)
            results.append(BudgetResult(b, cands, int(n_sampled[i]), int(n_feas[i]), int(rounds[i]),
                                        self.source.name if self.source is not None else "none", queries,
                                        elapsed / len(budgets) + time.perf_counter() - t1,
                                        extra={"unique_feasible": n_unique, "local_rounds": inf.local_rounds,
                                               "polish_rounds": inf.polish_rounds if rerank > 0 else 0,
                                               "search_queries_cap": search_queries
                                               if rerank > 0 and search_rounds > 0 else 0}))
        return results


def generate(workspace, budgets: Sequence[float], *, samples: int | None = None, rerank: int | None = None,
             seed: int = 0, top: int = 10, model: NagModel | None = None,
             search_queries: int | None = None) -> list[BudgetResult]:
    """Ranked candidates for each budget (best first), for `nagkit generate` and `nagkit build`."""
    from nagkit.app.workspace import load_workspace

    ws = load_workspace(workspace)
    model = model or NagModel.from_workspace(ws)
    inf = ws.inference
    return model.generate(budgets, samples=samples or inf.samples,
                          rerank=inf.rerank if rerank is None else rerank, max_rounds=inf.max_rounds,
                          seed=seed, top=top, search_queries=search_queries)
