"""Grouped calibration: per-group multipliers of block latencies, fitted on whole networks.

A block measured alone is not the same work as that block inside a network: the runtime's
per-invoke overhead, cache state, the input copy and (on some runtimes) layer fusion differ, and
they differ *by kind of block*, e.g. by feature-map size and kernel. One global
``scale * sum + offset`` cannot follow that, so the grouped model is::

    measured ≈ intercept + Σ_g c_g · S_g(arch)

where ``S_g`` is the sum of the arch's table latencies over the blocks of group ``g``
(:func:`nagkit.latency.keys.block_group`, default scheme ``kind-in-k``: kind, input size,
kernel). The fit minimises relative errors ``((pred - measured) / measured)²`` with ``c_g ≥ 0``
(bounded least squares), plus a ridge pull of every ``c_g`` toward the global relative-error
scale ``s0``, worth ``shrinkage`` networks that contain the group: a group seen in a handful of
networks stays near ``s0`` instead of over-fitting them, and groups present in every network
(stem, head) are not confounded with the intercept.

The fit data (archs and measured latencies) are kept in the calibration record, so a table can
be refitted offline with another scheme or strength: :func:`refit_calibration`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from nagkit.errors import BadInputError
from nagkit.latency.keys import GROUP_SCHEMES, block_group
from nagkit.latency.table import Calibration, LatencyTable
from nagkit.space.arch import Arch
from nagkit.space.space import SearchSpace

DEFAULT_GROUP_BY = "auto"  # the scheme with the lowest leave-one-out MAPE on the fit networks
DEFAULT_SHRINKAGE = 1.0


def group_sums(table: LatencyTable, space: SearchSpace, archs: Sequence[Arch], group_by: str = "kind-in-k"
               ) -> tuple[list[str], np.ndarray]:
    """(groups, S [n_archs, n_groups]): each arch's raw table latency summed per group."""
    if group_by not in GROUP_SCHEMES:
        raise BadInputError(f"unknown calibration group scheme {group_by!r}; valid: {', '.join(GROUP_SCHEMES)}")
    gcache: dict[str, str] = {}
    rows: list[dict[str, float]] = []
    for a in archs:
        row: dict[str, float] = {}
        for key, ms in table.breakdown(space, a):
            g = gcache.get(key)
            if g is None:
                g = gcache[key] = block_group(key, group_by)
            row[g] = row.get(g, 0.0) + ms
        rows.append(row)
    groups = sorted({g for row in rows for g in row})
    s = np.zeros((len(rows), len(groups)))
    gi = {g: i for i, g in enumerate(groups)}
    for i, row in enumerate(rows):
        for g, v in row.items():
            s[i, gi[g]] = v
    return groups, s


def _global_fit(raw: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Relative-error least squares of ``y ≈ offset + scale · raw`` (scale only for 1 network)."""
    if raw.size == 1 or np.ptp(raw) <= 1e-9 * raw.mean():
        return float(np.sum(raw / y) / np.sum((raw / y) ** 2)), 0.0
    a = np.stack([1.0 / y, raw / y], axis=1)
    (offset, scale), *_ = np.linalg.lstsq(a, np.ones_like(y), rcond=None)
    return float(scale), float(offset)


def _solve(s: np.ndarray, y: np.ndarray, s0: float, shrinkage: float) -> tuple[float, np.ndarray]:
    """(intercept, c [n_groups]) of the penalised relative-error fit; c ≥ 0."""
    from scipy.optimize import lsq_linear

    n, g = s.shape
    a = np.concatenate([np.ones((n, 1)), s], axis=1) / y[:, None]
    t = np.ones(n)
    frac = s / y[:, None]
    present = frac > 0
    # prior worth `shrinkage` networks in which the group has its typical share of the latency
    mean_sq = np.where(present.any(axis=0),
                       (frac ** 2).sum(axis=0) / np.maximum(present.sum(axis=0), 1), 0.0)
    lam = np.sqrt(shrinkage * mean_sq)
    pen = np.zeros((g, g + 1))
    pen[np.arange(g), np.arange(g) + 1] = lam
    a_all = np.concatenate([a, pen])
    t_all = np.concatenate([t, lam * s0])
    lb = np.r_[-np.inf, np.zeros(g)]
    res = lsq_linear(a_all, t_all, bounds=(lb, np.full(g + 1, np.inf)), method="bvls")
    return float(res.x[0]), np.asarray(res.x[1:], dtype=np.float64)


def _mape(pred: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean(np.abs(pred - y) / y) * 100)


def fit_grouped(table: LatencyTable, space: SearchSpace, archs: Sequence[Arch], measured_ms: Sequence[float], *,
                group_by: str = DEFAULT_GROUP_BY, shrinkage: float = DEFAULT_SHRINKAGE,
                **details: Any) -> Calibration:
    """Fit the grouped calibration of ``table`` on measured whole networks.

    ``group_by`` is a scheme of :data:`GROUP_SCHEMES`, or ``"auto"``: every scheme is fitted and
    the one with the lowest leave-one-out MAPE on these same networks is kept (``kind-in-k``
    with fewer than 5 networks); the record lists each scheme's leave-one-out MAPE.

    ``details`` are stored in the record (seed, device, ...). The record also keeps the fit data
    (``fit_archs``, ``fit_raw_ms``, ``fit_measured_ms``) and a leave-one-out estimate of the
    error on unseen networks (``loo_mape``, ``loo_within_5pct``)."""
    if group_by == "auto":
        fits = [fit_grouped(table, space, archs, measured_ms, group_by=g, shrinkage=shrinkage, **details)
                for g in GROUP_SCHEMES]
        if any("loo_mape" not in f.details for f in fits):
            return next(f for f in fits if f.group_by == "kind-in-k")
        best = min(fits, key=lambda f: (f.details["loo_mape"], -GROUP_SCHEMES.index(f.group_by)))
        best.details["group_by_selection"] = {
            "rule": "lowest leave-one-out MAPE on the fit networks",
            "loo_mape": {f.group_by: f.details["loo_mape"] for f in fits}}
        return best
    archs = [space.parse_arch(a) for a in archs]
    y = np.asarray(measured_ms, dtype=np.float64)
    if not archs or len(archs) != y.size:
        raise BadInputError(f"calibration needs as many measured latencies as archs (>0), "
                            f"got {y.size} and {len(archs)}")
    if not (np.all(np.isfinite(y)) and np.all(y > 0)):
        raise BadInputError("measured latencies must be finite and > 0")
    if not (np.isfinite(shrinkage) and shrinkage > 0):
        raise BadInputError(f"calibration shrinkage must be > 0, got {shrinkage!r}")
    groups, s = group_sums(table, space, archs, group_by)
    raw = s.sum(axis=1)
    s0, a0 = _global_fit(raw, y)
    if s0 <= 0:
        raise BadInputError(f"calibration fit gave a non-positive scale {s0:.4g}; the measured networks do not "
                            "track the table (measure more, or re-profile)")
    intercept, c = _solve(s, y, s0, shrinkage)
    pred = intercept + s @ c
    loo = None
    if y.size >= 5:
        errs = np.empty(y.size)
        for i in range(y.size):
            m = np.arange(y.size) != i
            s0i, _ = _global_fit(raw[m], y[m])
            bi, ci = _solve(s[m], y[m], s0i, shrinkage)
            errs[i] = (bi + s[i] @ ci - y[i]) / y[i] * 100
        loo = {"loo_mape": float(np.mean(np.abs(errs))), "loo_within_5pct": float(np.mean(np.abs(errs) <= 5)),
               "loo_within_10pct": float(np.mean(np.abs(errs) <= 10))}
    rec = {"fit_error_unit": "MAPE %", "raw_mape": _mape(raw, y), "global_linear_mape": _mape(s0 * raw + a0, y),
           "shrinkage": float(shrinkage), "fit_objective": "relative-error least squares, factors >= 0, "
           "ridge toward the global scale", **(loo or {}),
           "group_counts": {g: int(n) for g, n in zip(groups, (s > 0).sum(axis=0))},
           **details, "fit_archs": [str(a) for a in archs], "fit_raw_ms": [float(x) for x in raw],
           "fit_measured_ms": [float(x) for x in y]}
    return Calibration(s0, a0, _mape(pred, y), int(y.size), rec, group_by=group_by,
                       group_scales={g: float(v) for g, v in zip(groups, c)}, intercept=intercept,
                       default_scale=s0)


def refit_calibration(table: LatencyTable, space: SearchSpace | None = None, *, group_by: str = DEFAULT_GROUP_BY,
                      shrinkage: float = DEFAULT_SHRINKAGE) -> LatencyTable:
    """The table with its calibration refitted (grouped) from the fit data its record lists,
    without measuring anything. Works on linear (old) and grouped records that kept
    ``fit_archs`` and ``fit_measured_ms``."""
    cal = table.calibration
    if cal is None or "fit_archs" not in cal.details or "fit_measured_ms" not in cal.details:
        raise BadInputError("the table's calibration lists no fit data (fit_archs, fit_measured_ms) to refit from",
                            hint="measure networks with `nagkit lut calibrate --lut T --device D --samples N`")
    space = space or table.space()
    keep = ("seed", "device", "measured_when", "load")
    extra = {k: cal.details[k] for k in keep if k in cal.details}
    new = fit_grouped(table, space, cal.details["fit_archs"], cal.details["fit_measured_ms"], group_by=group_by,
                      shrinkage=shrinkage, refit_from=cal.model, **extra)
    return table.with_calibration(new)
