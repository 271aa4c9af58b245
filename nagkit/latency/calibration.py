"""Calibration of a latency table on measured whole networks: which model, how many networks,
and whether to adopt it at all.

A block measured alone is not the same work as that block inside a network: the runtime's
per-invoke overhead, cache state, the input copy and (on some runtimes) layer fusion differ, and
they differ *by kind of block*, e.g. by feature-map size and kernel. The models, coarse to fine
(:data:`SCHEMES`)::

    global:      measured ≈ offset + scale · Σ blocks                       (a linear record)
    kind, kind-in, kind-in-k:
                 measured ≈ intercept + Σ_g c_g · S_g(arch)                  (a grouped record)

where ``S_g`` is the sum of the arch's table latencies over the blocks of group ``g``
(:func:`nagkit.latency.keys.block_group`). The fit minimises relative errors
``((pred - measured) / measured)²`` with ``c_g ≥ 0``, plus a ridge pull of every ``c_g`` toward
the global relative-error scale ``s0``, worth ``shrinkage`` networks that contain the group.

Three rules keep a calibration honest (issues 12 and 17):

* **Enough networks.** A model with ``p`` identifiable parameters (the groups whose latency
  differs between the space's networks, plus the intercept) is fitted only on at least
  :func:`networks_needed` ``= max(MIN_NETWORKS, NETWORKS_PER_PARAMETER · p)`` networks.
  ``auto`` fits only the schemes the networks suffice for (saying which it dropped); a scheme
  asked for by name with too few networks is refused; fewer than :data:`MIN_NETWORKS` is refused.
* **Never ≤ 0.** The fit is constrained so that every network of the space, at the table's
  resolutions, is predicted at least :data:`FLOOR_RATIO` times its raw block sum (the minimum over
  the space is exact: latency is additive per slot, see :class:`_Floor`); loading a table checks
  again that no prediction is ≤ 0 (:mod:`nagkit.latency.table`).
* **Held out, or not at all.** Each candidate's error is estimated leave-one-out (every network
  predicted by a fit that did not see it); the candidate with the lowest held-out MAPE is kept,
  and it is *adopted only if that held-out MAPE is below the raw block sum's* on the same
  networks (the raw sum has no fitted parameter, so its error there is already held out).
  Otherwise the table keeps its raw sums and the record says why: :class:`CalibrationResult`.

The fit data (archs and measured latencies) are kept in the record, so a table can be refitted
offline with another scheme or strength: :func:`refit_calibration`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nagkit.errors import BadInputError
from nagkit.latency.calibration_plan import (  # noqa: F401 (re-exported: the rules live there)
    DEFAULT_GROUP_BY, DEFAULT_NETWORKS, FLOOR_RATIO, MIN_NETWORKS, NETWORKS_PER_PARAMETER, SCHEMES, CalibrationPlan,
    _check_scheme, _Floor, _group_of, _table_res, default_networks, networks_needed, parameter_count,
    plan_calibration)
from nagkit.latency.table import Calibration, LatencyTable
from nagkit.space.arch import Arch
from nagkit.space.space import SearchSpace

DEFAULT_SHRINKAGE = 1.0


def group_sums(table: LatencyTable, space: SearchSpace, archs: Sequence[Arch], group_by: str = "kind-in-k"
               ) -> tuple[list[str], np.ndarray]:
    """(groups, S [n_archs, n_groups]): each arch's raw table latency summed per group."""
    _check_scheme(group_by)
    gcache: dict[str, str] = {}
    rows: list[dict[str, float]] = []
    for a in archs:
        row: dict[str, float] = {}
        for key, ms in table.breakdown(space, a):
            g = gcache.get(key)
            if g is None:
                g = gcache[key] = _group_of(key, group_by)
            row[g] = row.get(g, 0.0) + ms
        rows.append(row)
    groups = sorted({g for row in rows for g in row})
    s = np.zeros((len(rows), len(groups)))
    gi = {g: i for i, g in enumerate(groups)}
    for i, row in enumerate(rows):
        for g, v in row.items():
            s[i, gi[g]] = v
    return groups, s


# -- the fit ------------------------------------------------------------------------------------
def _global_fit(raw: np.ndarray, y: np.ndarray) -> tuple[float, float, bool]:
    """Relative-error least squares of ``y ≈ offset + scale · raw``; of ``y ≈ scale · raw`` for
    1 network, and when the fit with an offset gives a scale <= 0 (networks that do not track
    the table, e.g. measured through a burst of host noise: only their level can be fitted).
    The flag: whether that last case happened (:func:`fit_grouped` records it)."""
    scale_only = float(np.sum(raw / y) / np.sum((raw / y) ** 2)), 0.0
    if raw.size == 1 or np.ptp(raw) <= 1e-9 * raw.mean():
        return *scale_only, False
    a = np.stack([1.0 / y, raw / y], axis=1)
    (offset, scale), *_ = np.linalg.lstsq(a, np.ones_like(y), rcond=None)
    return (float(scale), float(offset), False) if scale > 0 else (*scale_only, True)


def _system(s: np.ndarray, y: np.ndarray, s0: float, shrinkage: float) -> tuple[np.ndarray, np.ndarray]:
    """(A, t): the penalised relative-error least squares ``|A θ − t|²``, θ = (intercept, c)."""
    n, g = s.shape
    a = np.concatenate([np.ones((n, 1)), s], axis=1) / y[:, None]
    frac = s / y[:, None]
    present = frac > 0
    # prior worth `shrinkage` networks in which the group has its typical share of the latency
    mean_sq = np.where(present.any(axis=0),
                       (frac ** 2).sum(axis=0) / np.maximum(present.sum(axis=0), 1), 0.0)
    lam = np.sqrt(shrinkage * mean_sq)
    pen = np.zeros((g, g + 1))
    pen[np.arange(g), np.arange(g) + 1] = lam
    return np.concatenate([a, pen]), np.concatenate([np.ones(n), lam * s0])


def _solve(s: np.ndarray, y: np.ndarray, s0: float, shrinkage: float, floor: _FloorRows | None = None
           ) -> tuple[float, np.ndarray]:
    """(intercept, c [n_groups]) of the penalised relative-error fit; c ≥ 0 and, with ``floor``,
    every arch of the space predicted ≥ FLOOR_RATIO · its raw sum (cutting planes: the arch that
    breaks the floor becomes a linear constraint, until none does)."""
    from scipy.optimize import lsq_linear

    a_all, t_all = _system(s, y, s0, shrinkage)
    g = s.shape[1]
    lb = np.r_[-np.inf, np.zeros(g)]
    theta = lsq_linear(a_all, t_all, bounds=(lb, np.full(g + 1, np.inf)), method="bvls").x
    if floor is None:
        return float(theta[0]), np.asarray(theta[1:], dtype=np.float64)
    rows, rhs = [], []
    for _ in range(50):
        gap, row, b = floor.violation(theta)
        if gap >= -1e-9 * max(1.0, abs(b)):
            return float(theta[0]), np.asarray(theta[1:], dtype=np.float64)
        rows.append(row)
        rhs.append(b)
        theta = _constrained(a_all, t_all, lb, np.array(rows), np.array(rhs), theta)
    raise BadInputError("the calibration fit could not keep every prediction above "
                        f"{FLOOR_RATIO:.0%} of its block sum; the measured networks do not track the table",
                        hint="re-profile on a quiet machine, then calibrate again")


def _constrained(a: np.ndarray, t: np.ndarray, lb: np.ndarray, c_rows: np.ndarray, c_rhs: np.ndarray,
                 x0: np.ndarray) -> np.ndarray:
    """min |a θ − t|² subject to θ ≥ lb and c_rows θ ≥ c_rhs (SLSQP)."""
    from scipy.optimize import minimize

    ata, att = a.T @ a, a.T @ t
    res = minimize(lambda x: x @ ata @ x - 2 * att @ x, np.maximum(x0, lb),
                   jac=lambda x: 2 * (ata @ x - att), method="SLSQP",
                   bounds=[(None if not np.isfinite(v) else v, None) for v in lb],
                   constraints=[{"type": "ineq", "fun": lambda x: c_rows @ x - c_rhs, "jac": lambda x: c_rows}],
                   options={"maxiter": 500, "ftol": 1e-14})
    x = res.x.copy()
    x[1:] = np.maximum(x[1:], 0.0)  # group sums are >= 0: raising a factor only raises predictions
    # SLSQP can stop a hair inside a constraint: shift the intercept (every row's 1) out of it
    short = np.max(c_rhs - c_rows @ x)
    if short > 0:
        x[0] += short * (1 + 1e-9) + 1e-12
    return x


@dataclass
class _FloorRows:
    """The floor of one fit: factors of the fitted groups plus ``s0`` for the groups of the
    space the fit never saw."""

    floor: _Floor
    groups: list[str]
    s0: float

    def __post_init__(self) -> None:
        self.col = np.array([self.floor.index.get(g, -1) for g in self.groups])

    def violation(self, theta: np.ndarray) -> tuple[float, np.ndarray, float]:
        """(min over archs of θ-prediction − FLOOR_RATIO · raw, its constraint row, its rhs)."""
        factor = np.full(len(self.floor.index), self.s0)
        ok = self.col >= 0
        factor[self.col[ok]] = theta[1:][ok]
        gap, row = self.floor.minimum(factor, float(theta[0]))
        fitted = np.zeros(len(self.groups))
        fitted[ok] = row[self.col[ok]]
        unseen = np.ones(len(self.floor.index), dtype=bool)
        unseen[self.col[ok]] = False
        rhs = FLOOR_RATIO * row.sum() - self.s0 * row[unseen].sum()
        return gap, np.r_[1.0, fitted], float(rhs)


def _mape(pred: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean(np.abs(pred - y) / y) * 100)


def _held_out(errs: np.ndarray) -> dict[str, float]:
    a = np.abs(errs)
    return {"loo_mape": float(a.mean()), "loo_within_5pct": float(np.mean(a <= 5)),
            "loo_within_10pct": float(np.mean(a <= 10)), "loo_mean_signed_error_pct": float(errs.mean())}


def fit_grouped(table: LatencyTable, space: SearchSpace, archs: Sequence[Arch], measured_ms: Sequence[float], *,
                group_by: str = DEFAULT_GROUP_BY, shrinkage: float = DEFAULT_SHRINKAGE,
                resolutions: Sequence[int] | None = None, **details: Any) -> Calibration:
    """Fit one scheme of :data:`SCHEMES` (``global`` gives a linear record), or ``"auto"``: every
    scheme, keeping the one with the lowest leave-one-out MAPE on these networks. No network
    count rule and no adoption rule here (see :func:`calibrate_measured`); the floor holds.

    ``details`` are stored in the record (seed, device, ...). The record also keeps the fit data
    (``fit_archs``, ``fit_raw_ms``, ``fit_measured_ms``) and a leave-one-out estimate of the
    error on unseen networks (``loo_mape``, ``loo_within_5pct``, with 5 networks or more)."""
    if group_by == "auto":
        fits = [fit_grouped(table, space, archs, measured_ms, group_by=g, shrinkage=shrinkage,
                            resolutions=resolutions, **details) for g in SCHEMES]
        return _select(fits, "kind-in-k")
    _check_scheme(group_by)
    archs = [space.parse_arch(a) for a in archs]
    y = np.asarray(measured_ms, dtype=np.float64)
    if not archs or len(archs) != y.size:
        raise BadInputError(f"calibration needs as many measured latencies as archs (>0), "
                            f"got {y.size} and {len(archs)}")
    if not (np.all(np.isfinite(y)) and np.all(y > 0)):
        raise BadInputError("measured latencies must be finite and > 0")
    if not (np.isfinite(shrinkage) and shrinkage > 0):
        raise BadInputError(f"calibration shrinkage must be > 0, got {shrinkage!r}")
    res = list(resolutions or _table_res(table, space))
    floor = _Floor(table, space, group_by, res)
    groups, s = group_sums(table, space, archs, group_by)
    raw = s.sum(axis=1)
    s0, a0, untracked = _global_fit(raw, y)
    if untracked:
        details = {**details, "global_fit": "scale only: with an offset the scale was <= 0 (the measured networks "
                   "do not track the table; measure again on a quiet machine, or re-profile)"}
    intercept, c = _solve(s, y, s0, shrinkage, _FloorRows(floor, groups, s0))
    pred = intercept + s @ c
    loo = None
    if y.size >= 5:
        errs = np.empty(y.size)
        for i in range(y.size):
            m = np.arange(y.size) != i
            s0i = _global_fit(raw[m], y[m])[0]
            bi, ci = _solve(s[m], y[m], s0i, shrinkage, _FloorRows(floor, groups, s0i))
            errs[i] = (bi + s[i] @ ci - y[i]) / y[i] * 100
        loo = _held_out(errs)
    rec = {"fit_error_unit": "MAPE %", "raw_mape": _mape(raw, y), "global_linear_mape": _mape(s0 * raw + a0, y),
           "shrinkage": float(shrinkage), "fit_objective": "relative-error least squares, factors >= 0, "
           f"ridge toward the global scale, every network of the space >= {FLOOR_RATIO} x its block sum",
           "floor_ratio": FLOOR_RATIO, **(loo or {}),
           "group_counts": {g: int(n) for g, n in zip(groups, (s > 0).sum(axis=0))},
           **details, "fit_archs": [str(a) for a in archs], "fit_raw_ms": [float(x) for x in raw],
           "fit_measured_ms": [float(x) for x in y]}
    if group_by == "global":
        rec.pop("group_counts")
        return Calibration(float(c[0]), float(intercept), _mape(pred, y), int(y.size), {**rec, "scheme": "global"})
    # the record's scale/offset stay the unconstrained global fit (what an older reader applies)
    # unless that breaks the floor: then the constrained global model's
    gs, go = s0, a0
    gfloor = _Floor(table, space, "global", res)
    if gfloor.minimum(np.array([s0]), a0)[0] < 0:
        go, (gs,) = _solve(raw[:, None], y, s0, shrinkage, _FloorRows(gfloor, ["all"], s0))
    return Calibration(float(gs), float(go), _mape(pred, y), int(y.size), rec, group_by=group_by,
                       group_scales={g: float(v) for g, v in zip(groups, c)}, intercept=intercept,
                       default_scale=s0)


def scheme_of(cal: Calibration) -> str:
    """The scheme a calibration was fitted with (``global`` for a linear record)."""
    return cal.group_by or "global"


def _select(fits: list[Calibration], fallback: str) -> Calibration:
    """The fit with the lowest leave-one-out MAPE (the coarser on a tie), its record listing
    every candidate's."""
    if any("loo_mape" not in f.details for f in fits):
        return next((f for f in fits if scheme_of(f) == fallback), fits[-1])
    best = min(fits, key=lambda f: (f.details["loo_mape"], SCHEMES.index(scheme_of(f))))
    best.details["group_by_selection"] = {
        "rule": "lowest leave-one-out MAPE on the fit networks",
        "loo_mape": {scheme_of(f): f.details["loo_mape"] for f in fits}}
    return best


# -- fit, hold out, adopt -----------------------------------------------------------------------
@dataclass(frozen=True)
class CalibrationResult:
    """The outcome of calibrating on measured networks: the calibration to apply (``None`` when
    the raw block sums predict held-out networks at least as well), and the record of why."""

    calibration: Calibration | None
    candidate: Calibration
    plan: CalibrationPlan
    record: dict[str, Any] = field(default_factory=dict)

    @property
    def adopted(self) -> bool:
        return self.calibration is not None

    def apply(self, table: LatencyTable) -> LatencyTable:
        """``table`` with the calibration (or with none, when not adopted), and the fidelity
        record in its provenance (``fidelity``) either way."""
        from dataclasses import replace

        prov = {k: v for k, v in table.provenance.items() if k != "calibration_not_adopted"}
        prov["fidelity"] = self.record
        if not self.adopted:
            prov["calibration_not_adopted"] = self.candidate.to_dict()
        return replace(table, calibration=self.calibration, provenance=prov, _cache={})

    def summary(self) -> str:
        """One paragraph for the screen."""
        r = self.record
        ho = r["held_out"]
        lines = [f"calibration on {self.plan.n} networks ({r['scheme']}): held-out (leave-one-out) MAPE "
                 f"{ho['calibrated_mape']:.2f}%, {ho['calibrated_within_5pct']:.0%} within ±5% "
                 f"vs raw block sum {ho['raw_mape']:.2f}%, {ho['raw_within_5pct']:.0%} within ±5%"]
        lines.append("adopted" if self.adopted else f"NOT adopted: {r['reason']}; the table keeps its raw block sums")
        lines.extend(f"note: {n}" for n in (*self.plan.notes, self.candidate.details.get("global_fit")) if n)
        v = r.get("verdict")
        if v:
            lines.append(("" if v["meets_5pct"] else "WARNING: ") + v["text"])
        return "\n".join(lines)


def calibrate_measured(table: LatencyTable, space: SearchSpace, archs: Sequence[Arch], measured_ms: Sequence[float],
                       *, plan: CalibrationPlan, shrinkage: float = DEFAULT_SHRINKAGE, noise: dict | None = None,
                       resolutions: Sequence[int] | None = None, **details: Any) -> CalibrationResult:
    """Fit the schemes of ``plan`` on the measured networks, keep the one with the lowest
    held-out MAPE, and adopt it only if that beats the raw block sum (module doc). ``noise``
    (from the measurement) goes into the verdict on whether ±5% is reachable here."""
    if len(archs) != plan.n:
        raise BadInputError(f"the plan is for {plan.n} networks, got {len(archs)}")
    fits = [fit_grouped(table, space, archs, measured_ms, group_by=g, shrinkage=shrinkage, resolutions=resolutions,
                        **details) for g in plan.schemes]
    best = _select(fits, plan.schemes[-1]) if len(fits) > 1 else fits[0]
    d = best.details
    raw = np.asarray(d["fit_raw_ms"])
    y = np.asarray(d["fit_measured_ms"])
    raw_err = (raw - y) / y * 100
    held = {"method": f"leave-one-out over the {plan.n} calibration networks",
            "calibrated_mape": d["loo_mape"], "calibrated_within_5pct": d["loo_within_5pct"],
            "calibrated_within_10pct": d["loo_within_10pct"],
            "calibrated_mean_signed_error_pct": d["loo_mean_signed_error_pct"],
            "raw_mape": float(np.abs(raw_err).mean()), "raw_within_5pct": float(np.mean(np.abs(raw_err) <= 5)),
            "raw_within_10pct": float(np.mean(np.abs(raw_err) <= 10)),
            "raw_mean_signed_error_pct": float(raw_err.mean())}
    adopted = held["calibrated_mape"] < held["raw_mape"]
    reason = None if adopted else (
        f"its held-out MAPE {held['calibrated_mape']:.2f}% is not below the raw block sum's "
        f"{held['raw_mape']:.2f}% on the same networks")
    within = held["calibrated_within_5pct"] if adopted else held["raw_within_5pct"]
    rec = {"scheme": scheme_of(best), "adopted": adopted, "reason": reason, "held_out": held,
           "plan": plan.to_dict(), "noise": noise, "verdict": verdict(within, noise),
           "fit_mape": best.fit_error, "n_fit": best.n_fit}
    best.details["held_out"] = held
    if noise is not None:
        best.details["noise"] = noise
    return CalibrationResult(best if adopted else None, best, plan, rec)


NOISE_LIMIT_PCT = 2.5  # the recorded statistic's sd above this: ±5% holds for fewer than ~95% of networks
# More than this share of the networks with no second pass within 3% of their best, after the extra
# passes: the host changed state while they were measured (decisions 31: in every recorded CLI run on
# the AMD EPYC VM with a share of 28% or more, ±5% failed; in every run that met it, the share was 8% or less).
UNCONFIRMED_LIMIT = 0.2


def block_noise_warning(block_passes: dict | None) -> str | None:
    """What to tell the user as soon as the blocks are measured, when their best passes vary by
    more than :data:`NOISE_LIMIT_PCT` (a table's provenance ``block_passes``): block noise goes
    into every network's sum, and a calibration, the longer part, cannot remove it. None when
    the blocks are quiet enough, or were measured once (no noise to judge)."""
    from nagkit.latency.passes import statistic_sd

    noise = (block_passes or {}).get("noise")
    sd = statistic_sd(noise)
    if sd is None or sd <= NOISE_LIMIT_PCT:
        return None
    n = len(block_passes.get("unconfirmed_blocks") or [])
    return (f"blocks: the best of a block's passes varies by {sd:.1f}% (1 sd, median over blocks; limit "
            f"{NOISE_LIMIT_PCT}%), and {n} block(s) have no second pass within 3%: this machine is too noisy for a "
            "±5% table right now. The table is written; profile again with --force on a quiet machine (close other "
            "programs, pin the worker with cores=) before trusting ±5%")


def verdict(within_5pct: float, noise: dict | None, level: dict | None = None,
            other_cpu: str | None = None, device: str = "cpu") -> dict[str, Any]:
    """Whether ±5% (for 95% of networks) is reached on held-out networks, and if not, whether the
    machine's noise explains it. The noise that counts is the recorded statistic's (the best of
    the passes: :func:`nagkit.latency.passes.statistic_sd`); one pass's is reported beside it.
    ``level`` (``lut validate``'s :func:`nagkit.latency.validate.level_shift`): how much slower or
    faster the table's own calibration networks run now than when the table was made; a shift
    beyond its limit explains a miss that noise does not (decisions 32). ``other_cpu``: the words
    that name the other CPU a table was measured on, which explains a miss before anything else
    (``device``: the spec its fix names)."""
    from nagkit.latency.passes import statistic_sd

    sd = statistic_sd(noise)
    one = None if noise is None else noise.get("single_measurement_sd_pct")
    share = unconfirmed_share(noise)
    noisy_sd = sd is not None and sd > NOISE_LIMIT_PCT
    noisy = noisy_sd or (share is not None and share > UNCONFIRMED_LIMIT)
    meets = within_5pct >= 0.95 and not noisy
    at_level = ((level or {}).get("at_table_level") or {}).get("within_5pct")
    # a shift beyond the limit, or one under it that explains the miss (at the table's level ±5% would hold)
    shifted = bool(level and (level.get("shifted") or (within_5pct < 0.95 and at_level is not None and at_level >= 0.95)))
    best_of = noise is not None and noise.get("best_of_sd_pct") is not None
    what = "the best of a network's passes varies by" if best_of else "the same network measured twice differs by"
    quiet = ("Profile and calibrate on a quiet machine (close other programs, pin the worker with cores=) "
             "before trusting ±5%")
    if meets:
        text = f"held-out: {within_5pct:.0%} of networks within ±5%"
        if shifted or other_cpu:
            text += f" ({'; '.join(w for w in (other_cpu, shifted and _level_words(level)) if w)})"
    elif other_cpu:
        text = (f"this table was measured on another CPU: {other_cpu}; {within_5pct:.0%} of held-out networks "
                "within ±5%. A CPU table predicts the CPU it was measured on: profile this one "
                f"(`nagkit profile --device {device} --calibrate`)")
    elif noisy_sd:
        text = (f"this machine is too noisy for ±5%: {what} {sd:.1f}% (1 sd, median over networks; limit "
                f"{NOISE_LIMIT_PCT}%); {within_5pct:.0%} of held-out networks within ±5%. {quiet}")
    elif noisy:
        text = (f"this machine is too noisy for ±5%: {noise['still_noisy']} of {noise['networks']} networks "
                f"({share:.0%}; limit {UNCONFIRMED_LIMIT:.0%}) had no second pass within 3% of their best, "
                f"after the extra passes; {within_5pct:.0%} of held-out networks within ±5%. {quiet}")
    elif shifted:
        at = "" if at_level is None else f", at the table's level {at_level:.0%} would be (a diagnosis, not the fidelity)"
        text = (f"this machine is not in the state its table was measured in: {_level_words(level)}; "
                f"{within_5pct:.0%} of held-out networks within ±5%{at}. A table holds for the state it was "
                "measured in: validate again when the machine is back in that state, or profile again "
                "(`nagkit profile --force --calibrate`) in the state you deploy in")
    else:
        text = (f"only {within_5pct:.0%} of held-out networks within ±5% (measurement noise "
                f"{'unknown' if sd is None else f'{sd:.1f}% sd'}); measure more networks (`nagkit profile "
                "--calibrate N`, `nagkit lut calibrate --samples N`) or re-profile the blocks")
    return {"meets_5pct": meets, "within_5pct": within_5pct, "statistic_sd_pct": sd,
            "single_measurement_sd_pct": one, "unconfirmed_share": share,
            "level_shift_pct": None if level is None else level["median_pct"], "other_cpu": other_cpu, "text": text}


def _level_words(level: dict) -> str:
    return (f"the table's own {level['anchors']} calibration networks run {level['median_pct']:+.1f}% "
            f"(median) against when they were measured (limit ±{level['limit_pct']}%)")


def unconfirmed_share(noise: dict | None) -> float | None:
    """The share of the measured networks whose best pass no other confirmed within 3%, after the
    extra passes (None for a record that does not say how many networks it measured)."""
    if not noise or not noise.get("networks") or noise.get("still_noisy") is None:
        return None
    return int(noise["still_noisy"]) / int(noise["networks"])


def recorded_fit(table: LatencyTable) -> tuple[list[str], list[float], str | None] | None:
    """The networks a table's calibration measured (adopted or not): their archs, their recorded
    medians (ms) and when they were measured; None for a table that records none."""
    try:
        cal = _recorded(table)
    except BadInputError:
        return None
    return (list(cal.details["fit_archs"]), [float(x) for x in cal.details["fit_measured_ms"]],
            cal.details.get("measured_when"))


def _recorded(table: LatencyTable) -> Calibration:
    """The calibration a table records (adopted, or kept in its provenance when not adopted),
    with its fit data."""
    cal = table.calibration
    if cal is None and "calibration_not_adopted" in table.provenance:
        from nagkit.latency.table import _read_calibration  # the loader's checks of a record

        src = str(table.path) if table.path else "<table>"
        cal = _read_calibration(table.provenance["calibration_not_adopted"], f"{src} (calibration_not_adopted)",
                                table.path, None)
    if cal is None or "fit_archs" not in cal.details or "fit_measured_ms" not in cal.details:
        raise BadInputError("the table's calibration lists no fit data (fit_archs, fit_measured_ms) to refit from",
                            hint="measure networks with `nagkit lut calibrate --lut T --device D`")
    return cal


_KEEP = ("seed", "device", "measured_when", "load", "passes", "measure_config", "noisy_measurements")


def refit_calibration(table: LatencyTable, space: SearchSpace | None = None, *, group_by: str = DEFAULT_GROUP_BY,
                      shrinkage: float = DEFAULT_SHRINKAGE) -> LatencyTable:
    """The table with its calibration refitted from the fit data its record lists, without
    measuring anything, and without the network-count and adoption rules (for ablations; the
    command line refits with :func:`refit_result`). Works on linear (old) and grouped records
    that kept ``fit_archs`` and ``fit_measured_ms``."""
    cal = _recorded(table)
    space = space or table.space()
    extra = {k: cal.details[k] for k in (*_KEEP, "noise") if k in cal.details}
    new = fit_grouped(table, space, cal.details["fit_archs"], cal.details["fit_measured_ms"], group_by=group_by,
                      shrinkage=shrinkage, refit_from=cal.model, **extra)
    return table.with_calibration(new)


def refit_result(table: LatencyTable, space: SearchSpace | None = None, *, group_by: str = DEFAULT_GROUP_BY,
                 shrinkage: float = DEFAULT_SHRINKAGE) -> CalibrationResult:
    """Calibrate again from the networks the table's record lists (no measuring), with every
    rule of :func:`calibrate_measured`: enough networks, held out, adopted only if better than
    the raw sum. ``result.apply(table)`` is the new table."""
    cal = _recorded(table)
    space = space or table.space()
    res = _table_res(table, space)
    plan = plan_calibration(table, space, cal.n_fit, group_by, res)
    extra = {k: cal.details[k] for k in _KEEP if k in cal.details}
    return calibrate_measured(table, space, cal.details["fit_archs"], cal.details["fit_measured_ms"], plan=plan,
                              shrinkage=shrinkage, noise=cal.details.get("noise"), resolutions=res,
                              refit_from=cal.model, **extra)
