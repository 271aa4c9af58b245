"""Parameters, MACs and peak activation memory of decision rows, per slot and vectorised.

Like latency on a per-block table, an arch's parameter count and MACs are ``fixed(r)`` plus the
sum of its active slots, and each slot's share depends only on (resolution, slot, kernel,
expand): a slot's input and output channels and its feature-map size are fixed by its stage and
position, whatever the other choices. Peak activation memory is a maximum instead of a sum: the
largest of the fixed layers' peak at ``r`` and each active slot's own
(:func:`nagkit.space.counts.layer_peak`, the definition in docs/decisions.md 39).

:class:`SlotResources` builds these arrays from :meth:`SearchSpace.layers` (so they agree with
``space.params``/``space.macs`` by construction, tested against the PyTorch subnet) and then
evaluates many decision rows with one gather, as :class:`nagkit.latency.slots.SlotLatency`
does for latency. Peak values are in elements; :data:`ACTIVATION_BYTES` converts them.
"""

from __future__ import annotations

import numpy as np

from nagkit.space.arch import Arch
from nagkit.space.counts import input_peak, layer_macs, layer_params, layer_peak
from nagkit.space.decisions import Decisions
from nagkit.space.space import SearchSpace

#: The resources :class:`SlotResources` knows; params and MACs add up, the peak is a maximum.
RESOURCES = ("params", "macs", "peak")
ADDITIVE = ("params", "macs")
#: Bytes per activation element of an exported model at each precision: fp16 bundles hold
#: float16 weights and compute in float32 (decisions 27); int8 ones compute in int8 (decisions 23).
ACTIVATION_BYTES = {"fp32": 4, "fp16": 4, "int8": 1}


class SlotResources:
    """``fixed[name]`` [R] and ``slots[name]`` [R, slots, n_kernels, n_expands] (int64) for
    ``params``, ``macs`` and ``peak`` (elements) of ``space``."""

    def __init__(self, space: SearchSpace):
        self.space = space
        nr, ns, md = len(space.resolutions), space.n_block_slots, space.max_depth
        shape = (nr, ns, len(space.ks_list), len(space.expand_list))
        self.fixed = {n: np.zeros(nr, dtype=np.int64) for n in RESOURCES}
        self.slots = {n: np.zeros(shape, dtype=np.int64) for n in RESOURCES}
        per = {"params": layer_params, "macs": layer_macs, "peak": layer_peak}
        for ri, r in enumerate(space.resolutions):
            for ki, k in enumerate(space.ks_list):
                for ei, e in enumerate(space.expand_list):
                    layers = space.layers(Arch(int(r), tuple(((k, e),) * md for _ in range(space.n_stages))))
                    blocks = layers[2:2 + ns]
                    for n, f in per.items():
                        self.slots[n][ri, :, ki, ei] = [f(b) for b in blocks]
            fixed = layers[:2] + layers[2 + ns:]
            self.fixed["params"][ri] = sum(layer_params(l) for l in fixed)
            self.fixed["macs"][ri] = sum(layer_macs(l) for l in fixed)
            self.fixed["peak"][ri] = max([input_peak(layers[0])] + [layer_peak(l) for l in fixed])

    def per_row(self, name: str, dec: Decisions) -> np.ndarray:
        """[n] values of resource ``name`` for decision rows ``dec``."""
        if len(dec) == 0:
            return np.zeros(0, dtype=np.int64)
        slot_ix = np.arange(self.space.n_block_slots)[None, :]
        per = self.slots[name][dec.r[:, None], slot_ix, dec.k, dec.e]
        act = dec.active(self.space)
        if name in ADDITIVE:
            return self.fixed[name][dec.r] + np.where(act, per, 0).sum(axis=1)
        return np.maximum(self.fixed[name][dec.r], np.where(act, per, 0).max(axis=1))

    def __call__(self, dec: Decisions) -> dict[str, np.ndarray]:
        """Every resource of ``dec``'s rows: ``{"params": [n], "macs": [n], "peak": [n]}``."""
        return {n: self.per_row(n, dec) for n in RESOURCES}
