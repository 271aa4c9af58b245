"""Inference: budgets in, ranked architectures out (the API `nagkit generate` and `build` call).

**Zero-query generation** (the default): for a budget B, sample ``samples`` archs from
pi(.|B) with constrained decoding (all fit B on the table by construction) plus the greedy
decode, rank the unique ones by the evaluator R(alpha|B), return them best first. No
accuracy-source query is made to choose (``selection_queries`` = 0).

Each budget is generated on its own, from a random stream derived from (seed, budget), so a
budget's result does not depend on the other budgets of the call.

Budgets: NaN, infinite or <= 0 is bad input; below the fastest network of the space on the
table fails naming that latency; above the slowest network generates for the slowest (every
network fits: the most accurate one is returned) and says so in ``note``.

Limits beside the budget (``limits``: parameters, file size, MACs, peak activation memory) act
through the decoder's masks alone (:mod:`nagkit.nag.constraints`): the same generator and
evaluator, every sample within every limit, ``extra["constraints"]`` says what the best reaches
and which limit binds; limits no network meets together fail before any work (exit 1).

Options, every query counted: ``search_queries = N`` runs the accuracy-guided local search
(:mod:`nagkit.nag.guided`) per budget from the evaluator's best samples and the frontier
archive's best archs within B (re-queried), at most N queries per budget; ``display``
queries the accuracy of the returned arch only to show it (``display_queries``; never for an
expensive source unless its cache has the value).
"""

from __future__ import annotations

import hashlib
import os
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from nagkit.errors import BadInputError, check_int, check_seed
from nagkit.latency.slots import SlotLatency
from nagkit.nag.budgets import BudgetBelowRangeError, check_budget  # noqa: F401 - re-exported
from nagkit.nag.config import MAX_SAMPLES, InferenceConfig, flush_denormals, torch_threads
from nagkit.nag.constraints import Constraints, Limits, report
from nagkit.nag.generator import sample_archs
from nagkit.nag.guided import GuidedSearch, run_guided
from nagkit.space.arch import Arch
from nagkit.space.decisions import Decisions, Pool, concat, dedupe
from nagkit.space.resources import SlotResources

CANDIDATES = 20  # ranked candidates kept per budget (build falls back along them)


@dataclass
class Candidate:
    arch: Arch
    latency_ms: float
    evaluator_score: float
    accuracy: float | None = None  # from the accuracy source, when queried
    resources: dict[str, float] | None = None  # params, macs, peak_kb (and size_mb): with limits

    def to_dict(self, space) -> dict[str, Any]:
        d = {"arch": str(self.arch), "ofa": space.to_ofa_dict(self.arch), "latency_ms": self.latency_ms,
             "evaluator_score": self.evaluator_score, "accuracy": self.accuracy}
        return d if self.resources is None else {**d, "resources": self.resources}


@dataclass
class BudgetResult:
    budget_ms: float
    candidates: list[Candidate]  # best first
    n_sampled: int
    n_unique: int
    accuracy_source: str
    selection_queries: int
    display_queries: int
    seconds: float
    effective_budget_ms: float | None = None
    note: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def best(self) -> Candidate:
        return self.candidates[0]

    @property
    def queries(self) -> int:
        return self.selection_queries + self.display_queries

    def to_dict(self, space, top: int | None = None) -> dict[str, Any]:
        cands = self.candidates if top is None else self.candidates[:top]
        return {"budget_ms": self.budget_ms, "effective_budget_ms": self.effective_budget_ms, "note": self.note,
                "best": self.best.to_dict(space), "candidates": [c.to_dict(space) for c in cands],
                "n_sampled": self.n_sampled, "n_unique": self.n_unique, "accuracy_source": self.accuracy_source,
                "selection_queries": self.selection_queries, "display_queries": self.display_queries,
                "seconds": self.seconds, **self.extra}


def budget_seed(seed: int, budget: float) -> int:
    """The random stream of one budget: a function of (seed, budget) only."""
    h = hashlib.sha256(f"{int(seed)}:{float(budget)!r}".encode()).digest()
    return int.from_bytes(h[:8], "little") & ((1 << 63) - 1)


class NagModel:
    """A trained workspace model: space, table, evaluator, generator (and optionally the
    accuracy source and the frontier archive, for ``search_queries`` and ``display``)."""

    def __init__(self, space, table, evaluator, generator, source=None, inference: InferenceConfig | None = None,
                 archive=None):
        self.space, self.table, self.evaluator, self.generator = space, table, evaluator, generator
        self.source, self.archive = source, archive
        self.inference = inference or InferenceConfig()
        self.latency = SlotLatency(table, space)
        self._resources: SlotResources | None = None  # built on the first call with limits
        generator.bind(self.latency)
        self.grid = generator.grid

    @classmethod
    def load(cls, space, table, paths: dict[str, Any], *, source=None, inference: InferenceConfig | None = None):
        """From artifact paths (``evaluator``, ``generator``, optional ``archive``); refuses a set
        that comes from different training runs."""
        import json

        from nagkit.nag.archive import Archive
        from nagkit.nag.train import check_pair, load_model

        ev, _ = load_model(paths["evaluator"], "evaluator", space)
        gen, gen_meta = load_model(paths["generator"], "generator", space)
        archive, header = None, None
        if paths.get("archive") is not None and os.path.lexists(paths["archive"]):
            from nagkit.io import input_file

            input_file(paths["archive"], "archive", hint="retrain with `nagkit train --workspace W`")
            with open(paths["archive"], encoding="utf-8") as f:
                try:
                    header = json.loads(f.readline())
                except (json.JSONDecodeError, UnicodeDecodeError):
                    header = None
            archive = Archive.load(paths["archive"], space)
        check_pair(paths["evaluator"], gen_meta, header)
        return cls(space, table, ev, gen, source, inference=inference, archive=archive)

    @property
    def range_ms(self) -> tuple[float, float]:
        return self.latency.fastest_ms, self.latency.slowest_ms

    def sample(self, budget: float, n: int, seed: int = 0) -> tuple[Decisions, np.ndarray]:
        """Raw samples of pi(.|B) for one budget: decisions and their table latency."""
        dec, _ = sample_archs(self.generator, [budget], n, seed, temperature=self.inference.temperature)
        return dec, self.latency(dec)

    def scores(self, dec: Decisions, lat: np.ndarray, budget: float) -> np.ndarray:
        with torch.no_grad():
            x = self.evaluator.features(dec, lat)
            return self.evaluator.score(x, torch.full((len(dec),), float(budget))).numpy()

    def constraints(self, limits: Limits, *, formats: Sequence[str] = ("tflite",), precision: str = "fp32"):
        """The :class:`~nagkit.nag.constraints.Constraints` of ``limits`` on this space and table."""
        if self._resources is None:
            self._resources = SlotResources(self.space)
        return Constraints(self.latency, self._resources, limits, formats=tuple(formats), precision=precision)

    def generate(self, budgets: Sequence[float], *, samples: int | None = None, seed: int = 0, top: int = 10,
                 search_queries: int | None = None, display: bool = True, limits: Limits | None = None,
                 formats: Sequence[str] = ("tflite",), precision: str = "fp32") -> list[BudgetResult]:
        """Ranked candidates per budget (best first); see the module doc. ``limits``: further
        limits every sample meets by construction (:mod:`nagkit.nag.constraints`), the file size
        and activation bytes as ``formats`` at ``precision`` export them."""
        lo, hi = self.range_ms
        checked = [check_budget(b, lo, hi) for b in budgets]  # all checked before any work
        cons = self.constraints(limits, formats=formats, precision=precision) if limits and limits.active else None
        if cons is not None:
            for eff, _ in checked:
                cons.check(eff)  # no network meets them all: exit 1 before any work
            if search_queries:
                raise BadInputError("--search-queries does not take --max-params, --max-size-mb, --max-macs or "
                                    "--max-peak-kb (its local search knows the latency budget only)",
                                    hint="drop --search-queries (zero-query generation meets every limit)")
        n = self.inference.samples if samples is None else check_int(samples, 1, MAX_SAMPLES, "samples (--samples)")
        check_seed(seed, "seed (--seed)")
        sq = self.inference.search.queries if search_queries is None else int(search_queries)
        if sq < 0:
            raise BadInputError(f"--search-queries must be >= 0, got {sq}")
        if sq > 0 and self.source is None:
            raise BadInputError("--search-queries needs the workspace's accuracy source")
        with torch_threads(), flush_denormals():
            return [self._one(float(req), eff, note, n, seed, top, sq, display, cons)
                    for req, (eff, note) in zip(budgets, checked)]

    def _one(self, requested: float, b: float, note: str | None, n: int, seed: int, top: int, sq: int,
             display: bool, cons: Constraints | None = None) -> BudgetResult:
        t0 = time.perf_counter()
        s = budget_seed(seed, b)
        dec, _ = sample_archs(self.generator, [b], n + 1, s, temperature=self.inference.temperature, greedy=True,
                              limits=cons.tensors() if cons is not None else None)
        known = self._known_candidates(b, cons)
        if len(known):
            dec = concat(dec, known)
        lat = self.latency(dec)
        keep = dedupe(self.space, dec)
        keep = keep[lat[keep] <= b * (1 + 1e-12)]  # constrained decoding: all fit (kept as a guard)
        if cons is not None:
            keep = keep[cons.fits(dec.select(keep))]  # and every limit (the same guard)
        dec, lat = dec.select(keep), lat[keep]
        sc = self.scores(dec, lat, b)
        order = np.argsort(-sc, kind="stable")[:max(top, CANDIDATES)]
        pool = Pool(dec.select(order), np.zeros(len(order)), lat[order])
        extra: dict[str, Any] = {}
        sel_q = 0
        if sq > 0:
            pool, sel_q, extra = self._search(pool, b, sq, s)
        pool_scores = self.scores(pool.dec, pool.latency, b) if sq > 0 else sc[order]  # unchanged pool: scored
        cands = [Candidate(a, float(l), float(x), None if math.isnan(c) else float(c))
                 for a, l, x, c in zip(pool.dec.to_archs(self.space), pool.latency, pool_scores, pool.accuracy)]
        if cons is not None:
            reached = cons.reached(pool.dec)
            for i, c in enumerate(cands):
                c.resources = {k: float(v[i]) for k, v in reached.items() if not np.isnan(v[i])}
            extra["constraints"] = report(cons.limits, b, cands[0].latency_ms, cands[0].resources)
            extra["constraints"]["precision"] = cons.precision
        disp_q = self._display(cands[:1]) if display else 0
        name = self.source.name if self.source is not None else "none"
        extra["archive_candidates"] = len(known)
        return BudgetResult(requested, cands, n + 1, len(keep), name, sel_q, disp_q, time.perf_counter() - t0,
                            effective_budget_ms=b, note=note, extra=extra)

    def _known_candidates(self, b: float, cons: Constraints | None) -> Decisions:
        """The frontier archive's ``[inference] archive`` most accurate archs within B (and every
        limit): archs the training queried, which join the generator's samples for the evaluator
        to rank (decisions 41). None without an archive or with ``archive = 0``."""
        k = self.inference.archive
        arc = self.archive
        if not k or arc is None or not len(arc):
            return Decisions.empty(self.space)
        lat = self.latency(arc.dec)
        ok = lat <= b * (1 + 1e-12)
        if cons is not None and ok.any():
            idx = np.flatnonzero(ok)
            ok[idx] = cons.fits(arc.dec.select(idx))
        idx = np.flatnonzero(ok)
        top = idx[np.argsort(-arc.accuracy[idx], kind="stable")[:k]]
        return arc.dec.select(top)

    def _search(self, pool: Pool, b: float, cap: int, seed: int) -> tuple[Pool, int, dict]:
        """The optional accuracy-guided search for one budget: seeds are the evaluator's best
        samples and the archive's best archs within B, all queried (counted)."""
        cfg = self.inference.search
        q0 = self.source.queries
        seeds = pool.select(np.arange(min(len(pool), cfg.parents)))
        if self.archive is not None and len(self.archive):
            a_dec, _, _ = self.archive.seeds(np.array([b]), cfg.parents)
            a_lat = self.latency(a_dec)
            seeds = seeds + Pool(a_dec, np.zeros(len(a_dec)), a_lat)
        seeds = seeds.select(dedupe(self.space, seeds.dec)[:cap])
        seeds.accuracy = np.asarray(self.source.evaluate_decisions(seeds.dec), dtype=np.float64)
        search = GuidedSearch(self.space, self.latency, cfg, seeds, lambda _rng: np.array([b]),
                              cap=max(0, cap - len(seeds)), shared=False, seed=seed)
        known = run_guided(search, self.source.evaluate_decisions, rounds=cfg.rounds)
        order = np.argsort(-known.accuracy, kind="stable")
        rest = pool.select(np.arange(len(seeds), len(pool))) if len(pool) > len(seeds) else None
        out = known.select(order)
        if rest is not None:
            out = out + rest
        out = out.select(dedupe(self.space, out.dec))  # queried first: they keep their accuracy
        return out, self.source.queries - q0, {"search_rounds": search.rounds}

    def _display(self, cands: list[Candidate]) -> int:
        """Query the accuracy of ``cands`` only to show it; an expensive source only from its
        cache. Returns the number of queries made."""
        src = self.source
        need = [c for c in cands if c.accuracy is None]
        if src is None or not need:
            return 0
        if getattr(src, "expensive", False):
            look = getattr(src, "cached", None)
            for c in need:
                v = look(c.arch) if look is not None else None
                c.accuracy = None if v is None else float(v)
            return 0
        q0 = src.queries
        for c, a in zip(need, src.evaluate([c.arch for c in need])):
            c.accuracy = float(a)
        return src.queries - q0
