"""The frontier archive: the best queried archs of training, what the generator imitates.

`nagkit train` writes the archive artifact (docs/decisions.md 17): every arch that is among the
K most accurate of the training data (the uniform dataset and the frontier search's finds)
within its own latency, in the dataset's JSONL format. :meth:`Archive.targets` draws the
(budget, top archs within it) pairs the generator is trained to imitate; the optional
generation-time search (``--search-queries``) also starts from the archive's best archs within
B, re-queried from the accuracy source (counted), so a stale archive cannot leak a wrong
accuracy into a result.
"""

from __future__ import annotations

import heapq
from pathlib import Path

import numpy as np

from nagkit.space.decisions import Decisions, from_archs
from nagkit.space.space import SearchSpace


class Archive:
    def __init__(self, dec: Decisions, latency_ms: np.ndarray, accuracy: np.ndarray):
        order = np.argsort(latency_ms, kind="stable")
        self.dec = dec.select(order)
        self.latency_ms = np.asarray(latency_ms, dtype=np.float64)[order]
        self.accuracy = np.asarray(accuracy, dtype=np.float64)[order]

    def __len__(self) -> int:
        return len(self.latency_ms)

    @classmethod
    def from_arrays(cls, space: SearchSpace, archs, latency_ms, accuracy, k: int) -> Archive:
        """The first ``k`` frontier layers of (archs, latency, accuracy)."""
        lat = np.asarray(latency_ms, dtype=np.float64)
        acc = np.asarray(accuracy, dtype=np.float64)
        keep = frontier_layers(lat, acc, k)
        return cls(from_archs(space, [archs[i] for i in keep]), lat[keep], acc[keep])

    @classmethod
    def from_decisions(cls, dec: Decisions, latency_ms, accuracy, k: int, params=None) -> Archive:
        """The first ``k`` frontier layers of decision rows with known latency and accuracy; with
        ``params`` (each row's parameter count), also those of (latency, parameters): then every
        (budget, parameter limit) pair's ``k`` best known archs are in the archive (issue 34). The
        extra rows are never among a budget's top ``k`` alone, so imitation targets are the same."""
        lat = np.asarray(latency_ms, dtype=np.float64)
        acc = np.asarray(accuracy, dtype=np.float64)
        keep = frontier_layers(lat, acc, k)
        if params is not None:
            keep = np.union1d(keep, limited_layers(lat, params, acc, k))
        return cls(dec.select(keep), lat[keep], acc[keep])

    def top_within(self, k: int) -> np.ndarray:
        """[len + 1, k] indices: row ``n`` holds the ``k`` most accurate among the ``n`` fastest
        archs (best first; -1 where fewer than k)."""
        out = np.full((len(self) + 1, k), -1, dtype=np.int64)
        best: list[int] = []
        for n in range(len(self)):
            best = sorted(best + [n], key=lambda i: -self.accuracy[i])[:k]
            out[n + 1, :len(best)] = best
        return out

    def targets(self, lo: float, hi: float, k: int):
        """A sampler ``(n, rng) -> (budgets, decisions)`` of imitation pairs: budgets log-uniform in
        [lo, hi] (only where the archive has an arch within), each paired with one of its ``k``
        most accurate archs within the budget, uniformly."""
        table = self.top_within(k)
        lo = max(lo, float(self.latency_ms[0]))

        def draw(n: int, rng: np.random.Generator) -> tuple[np.ndarray, Decisions]:
            b = np.exp(np.log(lo) + rng.random(n) * (np.log(hi) - np.log(lo)))  # log-uniform, as the search
            m = np.searchsorted(self.latency_ms, b, side="right")
            cand = table[m]  # [n, k]
            have = (cand >= 0).sum(axis=1)
            pick = cand[np.arange(n), (rng.random(n) * have).astype(np.int64)]
            return b, self.dec.select(pick)

        return draw

    @classmethod
    def load(cls, path: str | Path, space: SearchSpace) -> Archive:
        """Read an archive artifact (the dataset JSONL format; refused when corrupt)."""
        from nagkit.data.dataset import load_dataset

        ds = load_dataset(path, space=space)
        return cls(from_archs(space, ds.archs), ds.latency_ms, ds.accuracy)

    def save(self, path: str | Path, space: SearchSpace, header: dict) -> Path:
        """Write atomically in the dataset format (``header`` is the first line)."""
        import json

        from nagkit.io import atomic_write_text

        lines = [json.dumps(header)]
        for i, a in enumerate(self.dec.to_archs(space)):
            lines.append(json.dumps({"i": i, "arch": str(a), "latency_ms": float(self.latency_ms[i]),
                                     "accuracy": float(self.accuracy[i])}))
        return atomic_write_text(Path(path), "\n".join(lines) + "\n")

    def seeds(self, budgets: np.ndarray, k: int) -> tuple[Decisions, np.ndarray, np.ndarray]:
        """For each budget (by its recorded latency), its ``k`` most accurate archs within it:
        (decisions, group index of each row, recorded accuracy of each row)."""
        rows, groups = [], []
        for i, b in enumerate(np.asarray(budgets, dtype=np.float64)):
            n = int(np.searchsorted(self.latency_ms, b, side="right"))
            if n == 0:
                continue
            top = np.argsort(-self.accuracy[:n], kind="stable")[:k]
            rows.append(top)
            groups.append(np.full(len(top), i, dtype=np.int64))
        idx = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)
        grp = np.concatenate(groups) if groups else np.zeros(0, dtype=np.int64)
        return self.dec.select(idx), grp, self.accuracy[idx]


def limited_layers(latency_ms: np.ndarray, resource: np.ndarray, accuracy: np.ndarray, k: int,
                   chunk: int = 512) -> np.ndarray:
    """Indices of the archs that are among the ``k`` most accurate of all archs at most as slow
    *and* at most as large (in ``resource``) as themselves: every (budget, resource limit) pair's
    top ``k`` is a subset of them."""
    lat = np.asarray(latency_ms, dtype=np.float64)
    res = np.asarray(resource, dtype=np.float64)
    acc = np.asarray(accuracy, dtype=np.float64)
    keep = []
    for s in range(0, len(lat), chunk):
        e = min(s + chunk, len(lat))
        better = (lat[None, :] <= lat[s:e, None]) & (res[None, :] <= res[s:e, None]) & (acc[None, :] > acc[s:e, None])
        keep.append(np.flatnonzero(better.sum(axis=1) < k) + s)
    return np.concatenate(keep) if keep else np.zeros(0, dtype=np.int64)


def frontier_layers(latency_ms: np.ndarray, accuracy: np.ndarray, k: int) -> np.ndarray:
    """Indices (by latency) of the archs that are among the ``k`` most accurate of all archs at
    most as slow as themselves: every budget's top ``k`` is a subset of them."""
    order = np.argsort(latency_ms, kind="stable")
    best: list[float] = []  # min-heap of the k best accuracies seen so far
    keep = []
    for i in order:
        a = float(accuracy[i])
        if len(best) < k:
            heapq.heappush(best, a)
            keep.append(i)
        elif a > best[0]:
            heapq.heapreplace(best, a)
            keep.append(i)
    return np.asarray(keep, dtype=np.int64)
