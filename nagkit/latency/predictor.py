"""What a latency model offers, as protocols (nothing probes for features).

:class:`LatencyPredictor`: ``predict``/``predict_many``/``latency_range``, each with
``calibrated``; the raw prediction is the plain block sum (a predictor without a calibration
returns the same for both). :class:`SlotLatencyPredictor` adds ``slot_arrays``: for a per-block
table, latency is additive per block slot given the resolution, so an arch's prediction is
``fixed + sum of its active slots``; generators and searches use the arrays to score many
candidates at once and to know the cheapest completion of a partial arch.

:class:`nagkit.latency.table.LatencyTable` is a slot predictor; the synthetic MACs model
(:class:`nagkit.data.synthetic.MacsLatencyTable`) is at least a plain one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from nagkit.space.arch import Arch
from nagkit.space.space import SearchSpace


@runtime_checkable
class LatencyPredictor(Protocol):
    def predict(self, space: SearchSpace, arch: Arch | str | Mapping, calibrated: bool = True) -> float:
        """Predicted latency (ms) of one arch."""
        ...

    def predict_many(self, space: SearchSpace, archs: Sequence[Arch | str | Mapping],
                     calibrated: bool = True) -> np.ndarray:
        """Predicted latency (ms) of many archs."""
        ...

    def latency_range(self, space: SearchSpace, calibrated: bool = True) -> tuple[float, float]:
        """(fastest, slowest) predicted latency over every arch of ``space``."""
        ...


@runtime_checkable
class SlotLatencyPredictor(LatencyPredictor, Protocol):
    def slot_arrays(self, space: SearchSpace, r: int, calibrated: bool = True) -> tuple[float, np.ndarray]:
        """(fixed ms, slot ms ``[n_block_slots, n_kernels, n_expands]``) at resolution ``r``; NaN
        marks a block the table lacks."""
        ...
