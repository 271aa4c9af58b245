"""Architectures as integer decision arrays, the shared currency of evaluator and generator.

For a space with S stages of up to D blocks and R resolutions, an arch is
``r`` (index into resolutions), ``depth[S]`` (index into depth_list), ``k[S*D]`` and
``e[S*D]`` (indices into ks_list / expand_list; 0 where a slot is inactive). The generator
emits them in the order: resolution (if R > 1), then per stage its depth followed by
kernel and expand of each slot. :func:`onehot` reproduces
:func:`nagkit.space.encoding.onehot_encoding` in batch (torch).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

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


def from_archs(space: SearchSpace, archs: Sequence[Arch]) -> Decisions:
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
            for j, (kk, ee) in enumerate(st):
                k[i, s * md + j] = ki[kk]
                e[i, s * md + j] = ei[ee]
    return Decisions(r, depth, k, e)


def onehot_dim(space: SearchSpace) -> int:
    from nagkit.space.encoding import onehot_dim as _dim

    return _dim(space)


def onehot(space: SearchSpace, dec: Decisions):
    """Float tensor [n, onehot_dim(space)] equal to ``onehot_encoding`` of each arch."""
    import torch

    n = len(dec)
    nk, ne, nd = len(space.ks_list), len(space.expand_list), len(space.depth_list)
    act = torch.from_numpy(dec.active(space)).float().unsqueeze(-1)  # [n, slots, 1]
    kk = torch.nn.functional.one_hot(torch.from_numpy(dec.k), nk).float()
    ee = torch.nn.functional.one_hot(torch.from_numpy(dec.e), ne).float()
    blocks = (torch.cat([kk, ee], dim=-1) * act).reshape(n, -1)
    depth = torch.nn.functional.one_hot(torch.from_numpy(dec.depth), nd).float().reshape(n, -1)
    parts = [blocks, depth]
    if len(space.resolutions) > 1:
        parts.append(torch.nn.functional.one_hot(torch.from_numpy(dec.r), len(space.resolutions)).float())
    return torch.cat(parts, dim=1)


def step_layout(space: SearchSpace) -> list[tuple[str, int, int]]:
    """Generator steps as (kind, stage, slot): kind in r/depth/k/e; slot -1 where n/a."""
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
