"""Architecture encodings: OFA's 128-d predictor one-hot and a general one-hot for any space."""

from __future__ import annotations

import numpy as np

from nagkit.errors import ArchError
from nagkit.space.arch import Arch
from nagkit.space.space import SearchSpace


def ofa_predictor_encoding(space: SearchSpace, arch: Arch) -> np.ndarray:
    """OFA's accuracy-predictor input: per slot kernel one-hot (3,5,7), per slot expand
    one-hot (3,4,6), both zero beyond a stage's depth, then 8 resolution one-hots at
    ``(r - 112) // 16``. For 5 stages x 4 slots this is 60 + 60 + 8 = 128 values."""
    space.validate(arch)
    ks_list, e_list = (3, 5, 7), (3, 4, 6)
    if tuple(space.ks_list) != ks_list or tuple(space.expand_list) != e_list:
        raise ArchError(f"the OFA predictor encoding needs kernels {ks_list} and expands {e_list}; "
                        f"space {space.name!r} has {space.ks_list} and {space.expand_list}")
    n = space.n_block_slots
    ks = np.zeros((n, 3), dtype=np.float32)
    es = np.zeros((n, 3), dtype=np.float32)
    md = space.max_depth
    for si, st in enumerate(arch.stages):
        for bi, (k, e) in enumerate(st):
            ks[si * md + bi, ks_list.index(k)] = 1
            es[si * md + bi, e_list.index(e)] = 1
    r = np.zeros(8, dtype=np.float32)
    idx = (arch.r - 112) // 16
    if not 0 <= idx < 8:
        raise ArchError(f"resolution {arch.r} is outside the OFA predictor's range 112..239")
    r[idx] = 1
    return np.concatenate([ks.ravel(), es.ravel(), r])


def onehot_dim(space: SearchSpace) -> int:
    n = space.n_block_slots
    return n * (len(space.ks_list) + len(space.expand_list)) + space.n_stages * len(space.depth_list) + (
        len(space.resolutions) if len(space.resolutions) > 1 else 0
    )


def onehot_encoding(space: SearchSpace, arch: Arch) -> np.ndarray:
    """General encoding: per slot kernel and expand one-hots (zero when inactive), per stage
    depth one-hot, and the resolution one-hot when the space has several."""
    space.validate(arch)
    nk, ne = len(space.ks_list), len(space.expand_list)
    md = space.max_depth
    blocks = np.zeros((space.n_block_slots, nk + ne), dtype=np.float32)
    depth = np.zeros((space.n_stages, len(space.depth_list)), dtype=np.float32)
    for si, st in enumerate(arch.stages):
        depth[si, space.depth_list.index(len(st))] = 1
        for bi, (k, e) in enumerate(st):
            blocks[si * md + bi, space.ks_list.index(k)] = 1
            blocks[si * md + bi, nk + space.expand_list.index(e)] = 1
    parts = [blocks.ravel(), depth.ravel()]
    if len(space.resolutions) > 1:
        r = np.zeros(len(space.resolutions), dtype=np.float32)
        r[space.resolutions.index(arch.r)] = 1
        parts.append(r)
    return np.concatenate(parts)
