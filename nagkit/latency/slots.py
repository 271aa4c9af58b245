"""Latency of decision rows from a per-block table, and the bounds constrained decoding needs.

A per-block table predicts an arch as ``fixed(r) + sum of its active slots``, each slot's
latency depending only on (resolution, slot, kernel, expand): the table's
``slot_arrays(space, r, calibrated=True)``, calibration folded in. :class:`SlotLatency`
gathers those arrays for every resolution once and then

- predicts many decision rows with one gather (:meth:`__call__`), exactly as
  ``table.predict_many`` does;
- knows the fastest and slowest completion of any partial decision (the minimum or maximum
  over the remaining choices is additive), which is what lets a generator mask choices that
  cannot fit a budget (:mod:`nagkit.nag.generator`);
- gives the space's latency range on the table (:attr:`fastest_ms`, :attr:`slowest_ms`) and
  the fastest and slowest arch themselves.
"""

from __future__ import annotations

import numpy as np

from nagkit.errors import ArtifactError
from nagkit.space.decisions import Decisions
from nagkit.space.space import SearchSpace


class SlotLatency:
    def __init__(self, table, space: SearchSpace):
        self.table, self.space = table, space
        nr, md = len(space.resolutions), space.max_depth
        fixed = np.zeros(nr)
        slots = np.zeros((nr, space.n_block_slots, len(space.ks_list), len(space.expand_list)))
        for i, r in enumerate(space.resolutions):
            f, s = table.slot_arrays(space, int(r), calibrated=True)
            if not (np.isfinite(f) and np.all(np.isfinite(s))):
                table.predict(space, space.smallest(int(r)), calibrated=False)  # raises naming the key
                raise ArtifactError(f"latency table lacks blocks of space {space.name!r} at r={r}")
            fixed[i], slots[i] = f, s
        self.fixed, self.slots = fixed, slots
        self.md = md
        self._bounds(fixed, slots, slots)

    def _bounds(self, fixed: np.ndarray, lo_slots: np.ndarray, hi_slots: np.ndarray) -> None:
        """The cheapest completions from ``lo_slots``, the dearest from ``hi_slots``."""
        sp, md = self.space, self.md
        nr, ns = len(fixed), sp.n_stages
        # per (r, slot): the cheapest and dearest block, and per (r, slot, k) over expand
        self.slot_min = lo_slots.min(axis=(2, 3))
        self.slot_max = hi_slots.max(axis=(2, 3))
        self.k_min = lo_slots.min(axis=3)
        self.k_max = hi_slots.max(axis=3)
        depths = np.asarray(sp.depth_list)
        cmin = np.cumsum(self.slot_min.reshape(nr, ns, md), axis=2)  # [nr, ns, md]: first j+1 slots
        cmax = np.cumsum(self.slot_max.reshape(nr, ns, md), axis=2)
        # stage contribution of each depth choice with the cheapest / dearest blocks [nr, ns, nd]
        self.depth_min = cmin[:, :, depths - 1]
        self.depth_max = cmax[:, :, depths - 1]
        self.r_min = fixed + self.depth_min.min(axis=2).sum(axis=1)  # fastest arch per resolution
        self.r_max = self.fixed + self.depth_max.max(axis=2).sum(axis=1)

    def within(self, fixed_ok: np.ndarray, slots_ok: np.ndarray) -> SlotLatency:
        """These bounds among the allowed choices only (``fixed_ok`` [R] per resolution,
        ``slots_ok`` [R, slots, k, e] per block): a disallowed choice costs +inf, so the cheapest
        completions (``*_min``, ``r_min``, ``slots``) are over allowed choices and every choice
        that needs a disallowed one is over any budget. The dearest (``*_max``) stay the table's.
        For decoding under a per-choice limit (peak activation memory, decisions 39); predict
        with the table's own :class:`SlotLatency`."""
        import copy

        view = copy.copy(self)
        view.slots = np.where(slots_ok, self.slots, np.inf)
        view._bounds(np.where(fixed_ok, self.fixed, np.inf), view.slots, self.slots)
        return view

    @property
    def fastest_ms(self) -> float:
        return float(self.r_min.min())

    @property
    def slowest_ms(self) -> float:
        return float(self.r_max.max())

    def extreme(self, slowest: bool) -> Decisions:
        """The fastest (or slowest) arch of the space on this table, as one decision row."""
        sp = self.space
        ri = int(np.argmax(self.r_max) if slowest else np.argmin(self.r_min))
        dtab = self.depth_max[ri] if slowest else self.depth_min[ri]
        depth = (dtab.argmax(axis=1) if slowest else dtab.argmin(axis=1)).astype(np.int64)
        flat = self.slots[ri].reshape(sp.n_block_slots, -1)
        best = flat.argmax(axis=1) if slowest else flat.argmin(axis=1)
        ne = self.slots.shape[3]
        return Decisions(np.array([ri]), depth[None, :], (best // ne)[None, :], (best % ne)[None, :])

    def __call__(self, dec: Decisions) -> np.ndarray:
        if len(dec) == 0:
            return np.zeros(0)
        slot_ix = np.arange(self.space.n_block_slots)[None, :]
        per = self.slots[dec.r[:, None], slot_ix, dec.k, dec.e]
        return self.fixed[dec.r] + np.where(dec.active(self.space), per, 0.0).sum(axis=1)
