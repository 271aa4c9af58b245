"""The statistic of a measurement taken in several passes: the best pass, confirmed by another.

Blocks (:mod:`nagkit.latency.profiler`) and whole networks (:mod:`nagkit.latency.validate`) are
each measured once per pass over their whole list, so that one period of load elsewhere on the
machine falls on one pass of an item, not on all of them. What a table records, and what
calibration and validation compare, is the **best pass**: the lowest of the pass medians. Load
from elsewhere only ever slows a run down, so the fastest pass is the one least disturbed, and
the plain-interpreter protocol that checks nagkit's timer (issue 17: "the best median of 3
interleaved passes") reads the same statistic. Decisions 26 gives the measurements behind it.

A best pass is *confirmed* when another pass is within :data:`CONFIRM_DEV` of it; an item
whose best pass is not confirmed is measured again, in up to a few extra passes, and is marked
noisy if it still is not. Then a lone fastest pass among all of them is not trusted either (a
pass can also run fast by chance, e.g. at a higher clock): the item's value is its lowest pass
that another confirms, and its best pass only if no two passes agree (:func:`pick`).

**Blocks record their best pass, confirmed or not** (:func:`best`), after up to
:data:`BLOCK_EXTRA_PASSES` extra passes. On the 2-core AMD EPYC VM (decisions 28) a 7x7
depthwise block runs 1.3-1.5x slower in the host's slow state, and the fast state came up in only
about a third of its passes: the lowest *confirmed* pass was then a slow one, and the table's
block sums read 16% above the networks they add up to. The profile's own passes summed by each
block's lowest pass predicted 85% of 100 networks within ±5% (simplest fit), by :func:`pick`
68%; blocks re-timed there in a calm period, by their lowest pass, 98%. A whole network averages
over its blocks, so its rule is unchanged. The noise
of the statistic itself is estimated from the gap between each item's two fastest passes
(:func:`pass_noise`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

CONFIRM_DEV = 0.03  # the best pass is confirmed by another pass within 3% of it
PASSES = 3  # every item is measured once per pass over the whole list
EXTRA_PASSES = 2  # at most this many more passes over the items whose best is not confirmed
BLOCK_EXTRA_PASSES = 4  # blocks: more tries at the fast state (a pass over unconfirmed blocks is short)
STATISTIC = "best confirmed pass median"
BLOCK_STATISTIC = "best pass median"


def pick(medians: Sequence[float]) -> int:
    """Index of the pass whose median is recorded: the best pass if another confirms it, else
    the lowest pass another confirms, else (no two passes within :data:`CONFIRM_DEV`) the best."""
    m = np.asarray(medians, dtype=float)
    order = np.argsort(m, kind="stable")
    s = m[order]
    for i in range(s.size - 1):
        if s[i] > 0 and s[i + 1] / s[i] - 1 <= CONFIRM_DEV:
            return int(order[i])
    return int(order[0])


def best(medians: Sequence[float]) -> int:
    """Index of the lowest pass median: what a block records (see the module doc)."""
    return int(np.argmin(np.asarray(medians, dtype=float)))


def confirmed(medians: Sequence[float]) -> bool:
    """Whether the fastest pass has another within :data:`CONFIRM_DEV` (one pass: never)."""
    m = np.sort(np.asarray(medians, dtype=float))
    return m.size >= 2 and m[0] > 0 and m[1] / m[0] - 1 <= CONFIRM_DEV


def pass_noise(per: Sequence[Sequence[float]]) -> dict[str, Any]:
    """How much the measurements vary here, from items measured in several passes each (the pass medians):

    * ``single_measurement_sd_pct``: one pass, a robust standard deviation (1.4826 × the median
      absolute deviation of a pass from the median of the item's other passes, corrected for
      that reference's own noise). On a machine shared with other work this is large, and it is
      what a single measurement would suffer.
    * ``best_of_sd_pct``: the statistic recorded (the best pass), estimated from the gap between
      each item's two fastest passes as the sd of a difference of two draws
      (1.4826 × median gap / √2). This is what limits ±5%, and what the verdict uses.
    * ``pass_deviation_p90_pct``, ``best_gap_p90_pct``: the 90th percentiles of the two.
    """
    devs, gaps = [], []
    for meds in per:
        m = np.asarray(meds, dtype=float)
        if m.size < 2:
            continue
        devs.extend(m[i] / np.median(np.delete(m, i)) - 1 for i in range(m.size))
        s = np.sort(m)
        if s[0] > 0:
            gaps.append(s[1] / s[0] - 1)
    if not devs:
        return {"single_measurement_sd_pct": None, "pass_deviation_p90_pct": None, "best_of_sd_pct": None,
                "best_gap_p90_pct": None, "n_passes": 0, "statistic": STATISTIC}
    p = np.median([len(m) for m in per])
    a = np.abs(np.asarray(devs)) * 100
    g = np.asarray(gaps) * 100
    return {"single_measurement_sd_pct": 1.4826 * float(np.median(a)) / math.sqrt(1 + 1 / max(p - 1, 1)),
            "pass_deviation_p90_pct": float(np.percentile(a, 90)),
            "best_of_sd_pct": 1.4826 * float(np.median(g)) / math.sqrt(2) if g.size else None,
            "best_gap_p90_pct": float(np.percentile(g, 90)) if g.size else None,
            "n_passes": len(devs), "statistic": STATISTIC}


def statistic_sd(noise: dict | None) -> float | None:
    """The noise that limits the recorded statistic: ``best_of_sd_pct`` when measured, else (a
    record from before it) ``single_measurement_sd_pct``."""
    if not noise:
        return None
    sd = noise.get("best_of_sd_pct")
    return noise.get("single_measurement_sd_pct") if sd is None else sd
