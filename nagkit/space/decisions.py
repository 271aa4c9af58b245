"""Architectures as integer decision arrays: the batch currency of searches and the generator.

For a space with S stages of up to D blocks and R resolutions, a row is ``r`` (index into
``resolutions``), ``depth[S]`` (index into ``depth_list``), ``k[S*D]`` and ``e[S*D]``
(indices into ``ks_list`` / ``expand_list``). Like OFA's genome, every slot carries a kernel and
an expand ratio, active or not: a slot beyond its stage's depth keeps a latent value that
becomes visible if the depth grows. Two rows are the same architecture when they agree on
the resolution, the depths and the active slots (:func:`arch_keys`).

:class:`Pool` carries a batch of candidates through a search: decisions plus, per row, the
group (budget) it belongs to, its table latency and its accuracy (NaN until queried).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from nagkit.space.arch import Arch
from nagkit.space.space import SearchSpace

_ACTIVE: dict[int, tuple] = {}  # id(space) -> (space, active-slot mask per depth choice)


def active_of(space: SearchSpace, depth: np.ndarray) -> np.ndarray:
    """[n, S*D] mask of the active block slots of depth-choice rows ``depth`` [n, S]."""
    table = _ACTIVE.get(id(space))
    if table is None or table[0] is not space:
        md = space.max_depth
        table = (space, np.arange(md)[None, :] < np.asarray(space.depth_list)[:, None])  # [nd, md]
        _ACTIVE[id(space)] = table
    return table[1][depth].reshape(len(depth), -1)


@dataclass
class Decisions:
    r: np.ndarray  # [n]
    depth: np.ndarray  # [n, S]
    k: np.ndarray  # [n, S*D]
    e: np.ndarray  # [n, S*D]

    def __len__(self) -> int:
        return len(self.r)

    def active(self, space: SearchSpace) -> np.ndarray:
        return active_of(space, self.depth)

    def to_archs(self, space: SearchSpace) -> list[Arch]:
        md, ns = space.max_depth, space.n_stages
        n = len(self.r)
        if n == 0:
            return []
        ks = np.asarray(space.ks_list)[self.k].tolist()
        es = np.asarray(space.expand_list)[self.e].tolist()
        deps = np.asarray(space.depth_list)[self.depth].tolist()
        rs = np.asarray(space.resolutions)[self.r].tolist()
        out = []
        for i in range(n):
            pairs = list(zip(ks[i], es[i]))
            d = deps[i]
            out.append(Arch(rs[i], tuple(tuple(pairs[s * md:s * md + d[s]]) for s in range(ns))))
        return out

    def select(self, idx) -> Decisions:
        return Decisions(self.r[idx], self.depth[idx], self.k[idx], self.e[idx])

    def copy(self) -> Decisions:
        return Decisions(self.r.copy(), self.depth.copy(), self.k.copy(), self.e.copy())

    @classmethod
    def empty(cls, space: SearchSpace) -> Decisions:
        z = np.zeros
        return cls(z(0, np.int64), z((0, space.n_stages), np.int64), z((0, space.n_block_slots), np.int64),
                   z((0, space.n_block_slots), np.int64))


def from_archs(space: SearchSpace, archs: Sequence[Arch]) -> Decisions:
    """Decision rows of ``archs`` (validated); inactive slots repeat the stage's last block."""
    n, md = len(archs), space.max_depth
    ki = {k: i for i, k in enumerate(space.ks_list)}
    ei = {e: i for i, e in enumerate(space.expand_list)}
    di = {d: i for i, d in enumerate(space.depth_list)}
    ri = {r: i for i, r in enumerate(space.resolutions)}
    r = np.zeros(n, dtype=np.int64)
    depth = np.zeros((n, space.n_stages), dtype=np.int64)
    k = np.zeros((n, space.n_block_slots), dtype=np.int64)
    e = np.zeros((n, space.n_block_slots), dtype=np.int64)
    for i, a in enumerate(archs):
        space.validate(a)
        r[i] = ri[a.r]
        for s, st in enumerate(a.stages):
            depth[i, s] = di[len(st)]
            for j in range(md):
                kk, ee = st[min(j, len(st) - 1)]
                k[i, s * md + j] = ki[kk]
                e[i, s * md + j] = ei[ee]
    return Decisions(r, depth, k, e)


def concat(*ds: Decisions) -> Decisions:
    return Decisions(np.concatenate([d.r for d in ds]), np.concatenate([d.depth for d in ds]),
                     np.concatenate([d.k for d in ds]), np.concatenate([d.e for d in ds]))


def arch_keys(space: SearchSpace, dec: Decisions) -> np.ndarray:
    """One integer row per arch that ignores the latent values of inactive slots."""
    act = dec.active(space)  # x * act: np.where's value with a scalar, ten times faster on ints
    return np.concatenate([dec.r[:, None], dec.depth, (dec.k + 1) * act, (dec.e + 1) * act], axis=1)


def packed_keys(space: SearchSpace, dec: Decisions, group: np.ndarray | None = None) -> np.ndarray:
    """:func:`arch_keys` (plus the group) packed into uint64 columns, a few bits per digit.
    The bit widths depend only on the space, so keys of different batches compare."""
    k = arch_keys(space, dec)
    nd = len(space.depth_list)
    digit_max = [len(space.resolutions) - 1] + [nd - 1] * space.n_stages
    digit_max += [len(space.ks_list)] * space.n_block_slots + [len(space.expand_list)] * space.n_block_slots
    if group is not None:
        g = np.asarray(group, dtype=np.int64)
        k = np.concatenate([g[:, None], k], axis=1)
        digit_max = [int(g.max()) if len(g) else 0] + digit_max
    bits = [max(1, int(np.ceil(np.log2(m + 2)))) for m in digit_max]
    cols, acc, used = [], np.zeros(len(k), dtype=np.uint64), 0
    for j in range(k.shape[1]):
        if used + bits[j] > 64:
            cols.append(acc)
            acc, used = np.zeros(len(k), dtype=np.uint64), 0
        acc = (acc << np.uint64(bits[j])) | k[:, j].astype(np.uint64)
        used += bits[j]
    cols.append(acc)
    return np.stack(cols, axis=1)


def dedupe(space: SearchSpace, dec: Decisions, group: np.ndarray | None = None) -> np.ndarray:
    """Indices (ascending) of the first occurrence of each (group, arch)."""
    if len(dec) == 0:
        return np.zeros(0, dtype=np.int64)
    key = packed_keys(space, dec, group)
    order = np.lexsort(key.T[::-1])  # stable: equal keys keep their original order
    ks = key[order]
    first = np.r_[True, (ks[1:] != ks[:-1]).any(axis=1)]
    return np.sort(order[first])


def key_bytes(space: SearchSpace, dec: Decisions) -> list[bytes]:
    """A hashable key per row (the arch, latent slots ignored): for sets of seen archs."""
    return [row.tobytes() for row in arch_keys(space, dec).astype(np.int16)]


def step_layout(space: SearchSpace) -> list[tuple[str, int, int]]:
    """Generator steps as (kind, stage, slot): kind in r/depth/k/e; -1 where n/a. The
    resolution comes first (when the space has several), then per stage its depth and each
    slot's kernel and expand ratio."""
    steps: list[tuple[str, int, int]] = []
    if len(space.resolutions) > 1:
        steps.append(("r", -1, -1))
    for s in range(space.n_stages):
        steps.append(("depth", s, -1))
        for j in range(space.max_depth):
            steps.append(("k", s, j))
            steps.append(("e", s, j))
    return steps


def n_choices(space: SearchSpace, kind: str) -> int:
    return {"r": len(space.resolutions), "depth": len(space.depth_list), "k": len(space.ks_list),
            "e": len(space.expand_list)}[kind]


@dataclass
class Pool:
    """Candidates of a search: decisions and, per row, group, table latency and accuracy
    (NaN where not queried)."""

    dec: Decisions
    group: np.ndarray
    latency: np.ndarray
    accuracy: np.ndarray = field(default=None)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        self.group = np.asarray(self.group, dtype=np.int64)
        self.latency = np.asarray(self.latency, dtype=np.float64)
        if self.accuracy is None:
            self.accuracy = np.full(len(self.group), np.nan)
        self.accuracy = np.asarray(self.accuracy, dtype=np.float64)

    def __len__(self) -> int:
        return len(self.group)

    def select(self, idx) -> Pool:
        return Pool(self.dec.select(idx), self.group[idx], self.latency[idx], self.accuracy[idx])

    def __add__(self, other: Pool) -> Pool:
        return Pool(concat(self.dec, other.dec), np.concatenate([self.group, other.group]),
                    np.concatenate([self.latency, other.latency]), np.concatenate([self.accuracy, other.accuracy]))


def rank_in_groups(group: np.ndarray, fitness: np.ndarray) -> np.ndarray:
    """0-based rank of each row within its group by descending fitness (stable)."""
    group = np.asarray(group, dtype=np.int64)
    order = np.lexsort((-np.asarray(fitness), group))
    g_sorted = group[order]
    start = np.r_[0, np.flatnonzero(np.diff(g_sorted)) + 1] if len(order) else np.zeros(0, np.int64)
    counts = np.diff(np.r_[start, len(order)])
    ranks = np.empty(len(order), dtype=np.int64)
    ranks[order] = np.arange(len(order)) - np.repeat(start, counts)
    return ranks
