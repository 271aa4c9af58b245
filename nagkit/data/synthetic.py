"""A synthetic latency model and accuracy source: the pipeline without hardware or weights.

Like nn-Meter's debug backend, these let dataset collection, training, generation and the
baselines run end to end on any space (tests use a tiny one). They are *labelled* synthetic
everywhere they appear (dataset provenance, reports) and are never a silent fallback.

- :class:`MacsLatencyTable`: latency = per-layer MACs x a per-kind cost (depthwise kernels
  cost more per MAC than pointwise convs) + a fixed per-layer overhead. Same API as
  :class:`nagkit.latency.table.LatencyTable` for prediction: a
  :class:`~nagkit.latency.predictor.LatencyPredictor` (``predict``, ``predict_many``,
  ``latency_range``), without slot arrays.
- ``synthetic:`` accuracy (:func:`synthetic_accuracy`, opened as a source by
  :mod:`nagkit.data.accuracy`): a saturating function of parameters, MACs, depth and
  resolution plus a small deterministic per-arch perturbation (from the arch string's sha256).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from nagkit.space.arch import Arch
from nagkit.space.counts import layer_macs
from nagkit.space.space import SearchSpace


class MacsLatencyTable:
    """Synthetic latency model (ms); deterministic and monotone in every block choice."""

    precision = "fp32"  # as LatencyTable.precision: what the blocks stand for

    def __init__(self, ms_per_mmac: float = 1.0, overhead_ms: float = 0.05, dw_factor: float = 4.0):
        self.ms_per_mmac = float(ms_per_mmac)
        self.overhead_ms = float(overhead_ms)
        self.dw_factor = float(dw_factor)
        self.path = None

    def _layer_ms(self, layer) -> float:
        macs = layer_macs(layer)
        if layer.kind == "mbconv":
            hw = layer.out_hw * layer.out_hw
            dw = hw * layer.mid * layer.k * layer.k
            macs = macs - dw + self.dw_factor * dw
        return self.overhead_ms + self.ms_per_mmac * macs / 1e6

    def predict(self, space: SearchSpace, arch: Arch | str, calibrated: bool = True) -> float:
        arch = space.parse_arch(arch)
        return float(sum(self._layer_ms(l) for l in space.layers(arch)))

    def predict_many(self, space: SearchSpace, archs: Sequence[Arch], calibrated: bool = True) -> np.ndarray:
        return np.array([self.predict(space, a) for a in archs], dtype=np.float64)

    def latency_range(self, space: SearchSpace, calibrated: bool = True) -> tuple[float, float]:
        return self.predict(space, space.smallest()), self.predict(space, space.largest())

    def slot_arrays(self, space: SearchSpace, r: int, calibrated: bool = True) -> tuple[float, np.ndarray]:
        """(fixed ms, slot ms [n_slots, n_k, n_e]): an arch is ``fixed + sum of its active slots``
        (the per-layer model is additive, like a block table)."""
        md, ns = space.max_depth, space.n_stages
        slots = np.zeros((space.n_block_slots, len(space.ks_list), len(space.expand_list)))
        fixed = 0.0
        for ki, k in enumerate(space.ks_list):
            for ei, e in enumerate(space.expand_list):
                ms = [self._layer_ms(layer) for layer in space.layers(Arch(r, tuple(((k, e),) * md for _ in range(ns))))]
                slots[:, ki, ei] = ms[2:2 + space.n_block_slots]
                fixed = sum(ms[:2]) + sum(ms[2 + space.n_block_slots:])
        return float(fixed), slots

    def provenance(self) -> dict[str, Any]:
        return {"kind": "synthetic", "ms_per_mmac": self.ms_per_mmac, "overhead_ms": self.overhead_ms,
                "dw_factor": self.dw_factor}


def synthetic_accuracy(space: SearchSpace, arch: Arch, noise: float = 0.01) -> float:
    """A plausible accuracy in (0.3, 0.95): more capacity and resolution help, saturating."""
    params = space.params(arch) / 1e6
    macs = space.macs(arch) / 1e6
    big = space.largest()
    p_max, m_max = space.params(big) / 1e6, space.macs(big) / 1e6
    cap = 0.55 * params / p_max + 0.35 * macs / m_max + 0.1 * arch.n_blocks / space.n_block_slots
    base = 0.35 + 0.55 * (1 - math.exp(-3.0 * cap))
    h = hashlib.sha256(str(arch).encode()).digest()
    jitter = (int.from_bytes(h[:4], "little") / 2**32 - 0.5) * 2 * noise
    return float(min(0.95, max(0.05, base + jitter)))


def tiny_space() -> SearchSpace:
    """A 3-stage space of 16,000 archs (k 3/5, e 3/6, d 1/2, r 32/48) for tests and demos."""
    return SearchSpace(name="tiny", width_mult=1.0, base_stage_width=(8, 8, 16, 24, 32, 64, 64),
                       ks_list=(3, 5), expand_list=(3, 6), depth_list=(1, 2), resolutions=(32, 48),
                       stage_strides=(2, 2, 2), stage_acts=("relu", "h_swish", "h_swish"),
                       stage_se=(False, True, True), n_classes=10, description="tiny test space")


def tiny_workspace_toml(**sections: dict) -> str:
    """``nagkit.toml`` text of a tiny synthetic workspace (inline space), for tests and demos."""
    sp = tiny_space().to_dict()
    sp.pop("labels", None)
    lines = ['name = "tiny"', 'latency_table = "synthetic:"', 'accuracy = "synthetic:"', "seed = 0", ""]
    lines.append("[space]")
    for k, v in sp.items():
        lines.append(f"{k} = {_toml(v)}")
    defaults = {"dataset": {"n": 600}, "budgets": {"k": 5},
                "evaluator": {"epochs": 8, "hidden": 64, "batch_size": 64},
                "generator": {"imitation_steps": 60, "imitation_batch": 64, "steps": 10, "samples_per_budget": 16,
                              "budgets_per_step": 5, "hidden": 32},
                "surrogate": {"hidden": 32, "first_steps": 100, "round_steps": 20, "final_steps": 50},
                "frontier": {"total_queries": 1000},
                "frontier.active": {"budgets": 20, "picks": 2, "generations": 3, "children": 24},
                "inference": {"samples": 100}}
    for name, vals in {**defaults, **sections}.items():
        lines.append(f"\n[{name}]")
        lines += [f"{k} = {_toml(v)}" for k, v in vals.items()]
    return "\n".join(lines) + "\n"


def _toml(v: Any) -> str:
    import json

    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml(x) for x in v) + "]"
    return json.dumps(v)
