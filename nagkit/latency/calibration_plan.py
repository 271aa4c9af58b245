"""How many networks a calibration needs, and the floor that keeps its predictions positive.

The rules of :mod:`nagkit.latency.calibration` that do not fit anything: which models
(:data:`SCHEMES`), how many identifiable parameters a scheme has on a table
(:func:`parameter_count`), how many networks that needs (:func:`networks_needed`), what a
calibration of ``n`` networks fits (:func:`plan_calibration`), and the exact minimum over every
arch of a space of ``prediction − FLOOR_RATIO · raw`` (:class:`_Floor`), which the fit keeps
≥ 0. The names are re-exported by :mod:`nagkit.latency.calibration`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from nagkit.errors import BadInputError
from nagkit.latency.keys import GROUP_SCHEMES, block_group
from nagkit.latency.table import LatencyTable
from nagkit.space.arch import Arch
from nagkit.space.space import SearchSpace

SCHEMES = ("global", *GROUP_SCHEMES)  # coarse to fine
DEFAULT_GROUP_BY = "auto"  # the scheme with the lowest held-out MAPE among those the networks suffice for
MIN_NETWORKS = 10  # below this no held-out estimate is worth its name
NETWORKS_PER_PARAMETER = 5
# The default number of calibration networks (``--calibrate`` alone, ``lut calibrate`` without
# ``--samples``). Evidence (benchmarks/latency/results/adoption_rescore.json, ``counts``): subsets
# of the reference CPU's 100 recorded LiteRT calibration networks, calibrated with these rules and
# scored on its 100 recorded validation networks, reach 93% within ±5% (mean of 10 subsets; worst
# 91%) with 30 networks, 94.5% (91%) with 50, 96% (95%) with 80. A fixed count, not one per
# scheme: the finer schemes' needs grow with the resolutions (kind-in at 17 resolutions: 385).
DEFAULT_NETWORKS = 80
FLOOR_RATIO = 0.25  # a calibrated prediction is never below this fraction of the raw block sum


# -- groups and parameters ----------------------------------------------------------------------
def _group_of(key: str, scheme: str) -> str:
    return "all" if scheme == "global" else block_group(key, scheme)


def _check_scheme(scheme: str) -> None:
    if scheme not in SCHEMES:
        raise BadInputError(f"unknown calibration group scheme {scheme!r}; valid: auto, {', '.join(SCHEMES)}")


class _Floor:
    """The exact minimum over every arch of the space (at ``resolutions``) of
    ``prediction − FLOOR_RATIO · raw``, for given factors, and the group sums of the arch that
    attains it. Latency is ``fixed(r) + Σ active slots`` and a slot's block does not depend on
    the other slots' choices, so the minimum is a per-slot minimum followed by a per-stage choice
    of depth (as :meth:`LatencyTable.latency_range`)."""

    def __init__(self, table: LatencyTable, space: SearchSpace, scheme: str, resolutions: Sequence[int]):
        from nagkit.latency.keys import block_key

        self.space = space
        self.index: dict[str, int] = {}
        self.per_r = []
        md = space.max_depth
        for r in resolutions:
            fixed: list[tuple[int, float]] = []
            n_s, n_k, n_e = space.n_block_slots, len(space.ks_list), len(space.expand_list)
            gidx = np.zeros((n_s, n_k, n_e), dtype=np.int64)
            ms = np.zeros((n_s, n_k, n_e))
            for ki, k in enumerate(space.ks_list):
                for ei, e in enumerate(space.expand_list):
                    layers = space.layers(Arch(r, tuple(((k, e),) * md for _ in range(space.n_stages))))
                    for li, layer in enumerate(layers):
                        key = block_key(layer)
                        gi = self.index.setdefault(_group_of(key, scheme), len(self.index))
                        v = table.block_ms(key, r)
                        if 2 <= li < 2 + n_s:
                            gidx[li - 2, ki, ei], ms[li - 2, ki, ei] = gi, v
                        elif ki == 0 and ei == 0:
                            fixed.append((gi, v))
            self.per_r.append((fixed, gidx, ms))

    def minimum(self, factor: np.ndarray, base: float) -> tuple[float, np.ndarray]:
        """(min over archs of prediction − FLOOR_RATIO · raw, that arch's group sums
        [len(self.index)]) for per-group ``factor`` (indexed as ``self.index``) and ``base``."""
        sp, md = self.space, self.space.max_depth
        best, best_row = np.inf, None
        for fixed, gidx, ms in self.per_r:
            row = np.zeros(len(self.index))
            total = base
            for gi, v in fixed:
                total += (factor[gi] - FLOOR_RATIO) * v
                row[gi] += v
            val = (factor[gidx] - FLOOR_RATIO) * ms
            flat = val.reshape(val.shape[0], -1)
            pick = flat.argmin(axis=1)
            smin = flat[np.arange(flat.shape[0]), pick]
            for s in range(sp.n_stages):
                cum = np.cumsum(smin[s * md:(s + 1) * md])
                d = min(sp.depth_list, key=lambda dd: cum[dd - 1])
                total += cum[d - 1]
                for slot in range(s * md, s * md + d):
                    ki, ei = np.unravel_index(pick[slot], gidx.shape[1:])
                    row[gidx[slot, ki, ei]] += ms[slot, ki, ei]
            if total < best:
                best, best_row = total, row
        return float(best), best_row


def parameter_count(table: LatencyTable, space: SearchSpace, scheme: str, resolutions: Sequence[int]) -> int:
    """Identifiable parameters of ``scheme`` on ``table`` at ``resolutions``: the groups whose
    latency differs between networks of the space, plus one for the intercept (a group whose
    latency is the same in every network cannot be told apart from the intercept)."""
    _check_scheme(scheme)
    if scheme == "global":
        return 2
    fl = _Floor(table, space, scheme, resolutions)
    varying = set()
    fixed_by_group: dict[int, set[float]] = {}
    for fixed, gidx, _ in fl.per_r:
        varying.update(int(g) for g in np.unique(gidx))
        sums: dict[int, float] = {}
        for gi, v in fixed:
            sums[gi] = sums.get(gi, 0.0) + v
        for gi in fl.index.values():
            fixed_by_group.setdefault(gi, set()).add(round(sums.get(gi, 0.0), 12))
    varying.update(gi for gi, vals in fixed_by_group.items() if len(vals) > 1)
    return len(varying) + 1


def networks_needed(n_params: int) -> int:
    """Networks a model with ``n_params`` identifiable parameters is fitted on, at least."""
    return max(MIN_NETWORKS, NETWORKS_PER_PARAMETER * int(n_params))


@dataclass(frozen=True)
class CalibrationPlan:
    """Which schemes ``n`` networks suffice for, and what the others would need."""

    n: int
    group_by: str
    params: dict[str, int]
    needed: dict[str, int]
    schemes: tuple[str, ...]  # the schemes to fit (those the networks suffice for)
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"networks": self.n, "group_by": self.group_by, "parameters": self.params,
                "networks_needed": self.needed, "fitted_schemes": list(self.schemes),
                "rule": f"a scheme with p identifiable parameters needs max({MIN_NETWORKS}, "
                        f"{NETWORKS_PER_PARAMETER}·p) networks", "notes": list(self.notes)}


def default_networks(table: LatencyTable, space: SearchSpace, resolutions: Sequence[int],
                     group_by: str = DEFAULT_GROUP_BY) -> int:
    """The default number of calibration networks: :data:`DEFAULT_NETWORKS`, or what a scheme
    named by ``group_by`` needs when that is more."""
    if group_by == "auto":
        return DEFAULT_NETWORKS
    return max(DEFAULT_NETWORKS, networks_needed(parameter_count(table, space, group_by, resolutions)))


def plan_calibration(table: LatencyTable, space: SearchSpace, n: int | None, group_by: str = DEFAULT_GROUP_BY,
                     resolutions: Sequence[int] | None = None) -> CalibrationPlan:
    """The schemes to fit on ``n`` networks (``None``: the default count). Raises
    :class:`BadInputError` when ``n`` is too small for any scheme, or for the one named."""
    if group_by != "auto":
        _check_scheme(group_by)
    res = list(resolutions or table.resolutions)
    params = {s: parameter_count(table, space, s, res) for s in SCHEMES}
    needed = {s: networks_needed(p) for s, p in params.items()}
    if n is None:
        n = DEFAULT_NETWORKS if group_by == "auto" else max(DEFAULT_NETWORKS, needed[group_by])
    hint_n = needed[group_by] if group_by != "auto" else needed["global"]
    if group_by != "auto" and n < needed[group_by]:
        raise BadInputError(
            f"calibration scheme {group_by!r} fits {params[group_by]} parameters on this table and needs at least "
            f"{needed[group_by]} networks, got {n}",
            hint=f"measure {needed[group_by]} or more (--samples / --calibrate {needed[group_by]}), or use "
                 "--group-by auto, which fits only what the networks suffice for")
    if n < needed["global"]:
        raise BadInputError(
            f"a calibration needs at least {needed['global']} measured networks (one scale and offset, "
            f"checked leave-one-out); got {n}",
            hint=f"measure {max(hint_n, default_networks(table, space, res))} networks (the default), "
                 "or leave the table uncalibrated")
    if group_by != "auto":
        return CalibrationPlan(n, group_by, params, needed, (group_by,))
    fit = tuple(s for s in SCHEMES if n >= needed[s])
    dropped = [f"{s} ({params[s]} parameters) needs {needed[s]} networks" for s in SCHEMES if s not in fit]
    notes = (f"{n} networks: not fitting {'; '.join(dropped)}",) if dropped else ()
    return CalibrationPlan(n, group_by, params, needed, fit, notes)


def _table_res(table: LatencyTable, space: SearchSpace) -> list[int]:
    res = [r for r in table.resolutions if r in space.resolutions]
    if not res:
        raise BadInputError(f"the table's resolutions {list(table.resolutions)} are not in space {space.name!r}")
    return res
