"""The calibration record of a latency table: a correction of block sums fitted on measured
whole networks (linear or grouped). Fitting lives in :mod:`nagkit.latency.calibration`;
reading a record from a table file, with its checks, in :mod:`nagkit.latency.table`."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nagkit.errors import ArtifactError, BadInputError


@dataclass(frozen=True)
class Calibration:
    """A correction of block sums fitted on measured whole networks.

    Two models, told apart by ``group_by``:

    * linear (``group_by`` None, tables before grouped calibration):
      ``calibrated = scale * raw_sum + offset``;
    * grouped: ``calibrated = intercept + sum_g group_scales[g] * (sum of the arch's block
      latencies in group g)``, a block's group given by
      :func:`nagkit.latency.keys.block_group` under the scheme ``group_by``; a group absent
      from ``group_scales`` uses ``default_scale``. ``scale``/``offset`` then hold the global
      linear fit on the same networks (what :meth:`apply` uses on a bare sum, and what a reader
      that knows only the linear model applies).
    """

    scale: float
    offset: float
    fit_error: float
    n_fit: int
    details: dict[str, Any] = field(default_factory=dict)
    group_by: str | None = None
    group_scales: dict[str, float] | None = None
    intercept: float = 0.0
    default_scale: float | None = None
    _factors: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def model(self) -> str:
        return "grouped" if self.group_by else "linear"

    @property
    def base_ms(self) -> float:
        """The per-network term (ms) added once to the scaled block latencies."""
        return self.intercept if self.group_by else self.offset

    def block_factor(self, key: str) -> float:
        """The multiplier of one block's latency."""
        if not self.group_by:
            return self.scale
        f = self._factors.get(key)
        if f is None:
            from nagkit.latency.keys import block_group

            g = block_group(key, self.group_by)
            f = float(self.group_scales.get(g, self.default_scale))
            self._factors[key] = f
        return f

    def apply_blocks(self, blocks: Iterable[tuple[str, float]]) -> float:
        """Calibrated latency from (key, ms) of every layer of one network."""
        return float(self.base_ms + sum(self.block_factor(k) * ms for k, ms in blocks))

    def apply(self, raw):
        """The linear correction ``scale * raw + offset`` of a bare block sum. For a grouped
        calibration this is its global linear fit, an approximation: exact grouped predictions
        need the blocks (``LatencyTable.predict``/``predict_many``/``slot_arrays``)."""
        return self.scale * raw + self.offset

    def to_dict(self) -> dict[str, Any]:
        d = {"scale": self.scale, "offset": self.offset, "fit_error": self.fit_error,
             "n_fit": self.n_fit, "model": self.model}
        if self.group_by:
            d.update({"group_by": self.group_by, "intercept_ms": self.intercept,
                      "default_scale": self.default_scale, "group_scales": dict(self.group_scales)})
        return {**d, **{k: v for k, v in self.details.items() if k not in d}}

    @classmethod
    def fit(cls, raw_ms: Sequence[float], measured_ms: Sequence[float],
            **details: Any) -> Calibration:
        """Least-squares fit of ``measured ≈ scale * raw + offset``.

        With one network only the scale is fitted (offset 0)."""
        x = np.asarray(raw_ms, dtype=np.float64)
        y = np.asarray(measured_ms, dtype=np.float64)
        if x.size == 0 or x.size != y.size:
            raise BadInputError(f"calibration needs as many measured as predicted values (>0), "
                                f"got {x.size} and {y.size}")
        if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y)) and np.all(x > 0) and np.all(y > 0)):
            raise BadInputError("calibration values must be finite and > 0")
        if x.size == 1 or np.ptp(x) <= 1e-9 * x.mean():
            scale, offset = float(np.sum(x * y) / np.sum(x * x)), 0.0
        else:
            a = np.stack([x, np.ones_like(x)], axis=1)
            (scale, offset), *_ = np.linalg.lstsq(a, y, rcond=None)
            scale, offset = float(scale), float(offset)
        if scale <= 0:
            raise BadInputError(f"calibration fit gave a non-positive scale {scale:.4g}; the measured "
                                "networks do not track the table (measure more, or re-profile)")
        pred = scale * x + offset
        fit_error = float(np.mean(np.abs(pred - y) / y) * 100)
        raw_error = float(np.mean(np.abs(x - y) / y) * 100)
        return cls(scale, offset, fit_error, int(x.size),
                   {"fit_error_unit": "MAPE %", "raw_mape": raw_error, **details})


def lowest_prediction(table: Any, space: Any = None) -> float | None:
    """The lowest calibrated prediction (ms) of a :class:`~nagkit.latency.table.LatencyTable`
    over every arch of the space it can predict (its resolutions in the space; archs needing a
    missing block are skipped); ``None`` without a calibration or when no arch can be
    predicted. Exact: latency is ``fixed(r) + Σ active slots``, so the minimum is a per-slot
    minimum and a per-stage choice of depth."""
    if table.calibration is None:
        return None
    if space is None:
        try:
            space = table.space()
        except BadInputError:  # a foreign space definition: nothing can be predicted with it
            return None
    low, md = math.inf, space.max_depth
    for r in (r for r in table.resolutions if r in space.resolutions):
        fixed, slots = table.slot_arrays(space, r, calibrated=True)
        if not np.isfinite(fixed):
            continue
        smin = np.where(np.isfinite(slots), slots, np.inf).reshape(slots.shape[0], -1).min(axis=1)
        total = fixed
        for s in range(space.n_stages):
            cmin = np.cumsum(smin[s * md:(s + 1) * md])
            total += min(cmin[d - 1] for d in space.depth_list)
        low = min(low, float(total))
    return low if math.isfinite(low) else None


def check_positive(table: Any, src: str) -> None:
    """Refuse (:class:`ArtifactError`) a calibrated table whose fastest network is predicted
    <= 0 ms (issue 12); the loader calls it."""
    low = lowest_prediction(table)
    if low is not None and not low > 0:
        raise ArtifactError(
            f"latency table {src!r}: calibration predicts {low:.4g} ms for the fastest network of "
            f"{table.space_name!r}; a latency must be > 0, so it is refused",
            hint="re-fit it with `nagkit lut calibrate --lut T --device D` (the fit keeps every prediction positive)")
