"""The evaluator's arch encoding on decision rows (torch, batched).

:func:`onehot` reproduces :func:`nagkit.space.encoding.onehot_encoding` for a batch of
:class:`~nagkit.space.decisions.Decisions`: per slot kernel and expand one-hots (zero when
inactive), per stage depth one-hot, and the resolution one-hot when the space has several.
"""

from __future__ import annotations

from nagkit.space.decisions import Decisions
from nagkit.space.encoding import onehot_dim
from nagkit.space.space import SearchSpace

__all__ = ["onehot", "onehot_dim"]


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

