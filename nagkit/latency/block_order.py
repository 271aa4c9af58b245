"""Which blocks a further pass measures first: those whose uncertainty moves a typical
network's predicted latency most (:func:`block_priority`). Used by the profiler when a time
budget may cut a pass short (:mod:`nagkit.latency.budget`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence


def block_weights(space, resolutions: Sequence[int], n_archs: int = 256, seed: int = 0) -> dict[str, float]:
    """How often each block occurs in a uniformly random network of ``space`` at ``resolutions``
    (the mean count per network over ``n_archs`` seeded samples): a block's weight in typical
    networks' predicted latency is this times its latency."""
    import numpy as np

    from nagkit.latency.keys import block_key
    from nagkit.space.sampling import sample

    sp = space.replace(resolutions=tuple(resolutions))
    rng = np.random.default_rng(seed)
    counts: dict[str, float] = {}
    for _ in range(n_archs):
        for layer in sp.layers(sample(sp, rng)):
            k = block_key(layer)
            counts[k] = counts.get(k, 0.0) + 1.0
    return {k: v / n_archs for k, v in counts.items()}


def block_priority(weights: Mapping[str, float], medians: Mapping[str, Sequence[float]]) -> dict[str, float]:
    """Each block's expected ms of uncertainty in a typical network: its weight (mean count per
    network) × its best pass × the relative gap between its two fastest passes (a block measured
    once: the median gap of the others, or 1). The next pass goes to the largest first."""
    gaps = {}
    for k, meds in medians.items():
        s = sorted(meds)
        if len(s) >= 2 and s[0] > 0:
            gaps[k] = s[1] / s[0] - 1
    typical = sorted(gaps.values())[len(gaps) // 2] if gaps else 1.0
    out = {}
    for k, meds in medians.items():
        best = min(meds) if meds else 0.0
        out[k] = weights.get(k, 0.0) * best * gaps.get(k, typical)
    return out


def by_priority(keys: Sequence[str], priority: Mapping[str, float]) -> list[str]:
    """``keys`` ordered by priority, largest first (ties keep their order)."""
    order = {k: i for i, k in enumerate(keys)}
    return sorted(keys, key=lambda k: (-priority.get(k, 0.0), order[k]))
