"""The evaluator's arch encoding on decision rows (torch, batched).

:func:`onehot` reproduces :func:`nagkit.space.encoding.onehot_encoding` for a batch of
:class:`~nagkit.space.decisions.Decisions`: per slot kernel and expand one-hots (zero when
inactive), per stage depth one-hot, and the resolution one-hot when the space has several.
"""

from __future__ import annotations

from nagkit.space.decisions import Decisions
from nagkit.space.encoding import onehot_dim
from nagkit.space.space import SearchSpace

__all__ = ["onehot", "onehot_dim", "ordinal", "ordinal_dim"]


def onehot(space: SearchSpace, dec: Decisions):
    """Float tensor [n, onehot_dim(space)] equal to ``onehot_encoding`` of each arch."""
    import torch
    from torch.nn.functional import one_hot

    n = len(dec)
    nk, ne, nd = len(space.ks_list), len(space.expand_list), len(space.depth_list)
    act = torch.from_numpy(dec.active(space)).float().unsqueeze(-1)  # [n, slots, 1]
    kk = one_hot(torch.as_tensor(dec.k), nk).float()
    ee = one_hot(torch.as_tensor(dec.e), ne).float()
    blocks = (torch.cat([kk, ee], dim=-1) * act).reshape(n, -1)
    depth = one_hot(torch.as_tensor(dec.depth), nd).float().reshape(n, -1)
    parts = [blocks, depth]
    if len(space.resolutions) > 1:
        parts.append(one_hot(torch.as_tensor(dec.r), len(space.resolutions)).float())
    return torch.cat(parts, dim=1)


def ordinal(space: SearchSpace, dec: Decisions):
    """:func:`onehot` plus thermometer codes of the ordered choices: per active slot ``k > k_i``
    and ``e > e_i`` for each but the smallest value, per stage ``depth > d_i``, and
    ``r > r_i`` when the space has several resolutions. Neighbouring values then share weights
    (a larger kernel, expand ratio, depth or resolution is seldom a different world from the
    next smaller one), which the accuracy surrogate learns from fewer queries (decisions 37)."""
    import torch

    n = len(dec)
    act = torch.from_numpy(dec.active(space)).float()  # [n, slots]
    parts = [onehot(space, dec)]
    for vals, nv in ((dec.k, len(space.ks_list)), (dec.e, len(space.expand_list))):
        v = torch.as_tensor(vals)
        th = torch.stack([(v > i).float() for i in range(nv - 1)], dim=-1) * act.unsqueeze(-1)
        parts.append(th.reshape(n, -1))
    d = torch.as_tensor(dec.depth)
    parts.append(torch.stack([(d > i).float() for i in range(len(space.depth_list) - 1)], dim=-1).reshape(n, -1))
    if len(space.resolutions) > 1:
        r = torch.as_tensor(dec.r)
        parts.append(torch.stack([(r > i).float() for i in range(len(space.resolutions) - 1)], dim=-1))
    return torch.cat(parts, dim=1)


def ordinal_dim(space: SearchSpace) -> int:
    slots = space.n_block_slots
    dim = onehot_dim(space) + slots * (len(space.ks_list) - 1 + len(space.expand_list) - 1)
    dim += space.n_stages * (len(space.depth_list) - 1)
    if len(space.resolutions) > 1:
        dim += len(space.resolutions) - 1
    return dim
