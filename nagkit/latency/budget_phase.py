"""The pieces a time budget's plan is made of (:mod:`nagkit.latency.budget`): a :class:`Phase` of
work, and the calibration asked for (:class:`NetworkPlan`), with what a resumed profile already
has of it (networks converted, measurements journalled)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class NetworkPlan:
    """A calibration asked for: ``wanted`` networks, at least ``minimum``, ``passes`` each;
    ``uncached_share`` of them not converted yet, ``uncached(n)`` among the first ``n``.
    ``archs``: the networks in the order they are drawn (a calibration of n takes the first n) and
    ``journalled``: how many passes of each (by name) a resumed profile already has
    (:mod:`nagkit.latency.net_journal`; none for a new profile), which are not measured again."""

    wanted: int
    minimum: int
    passes: int
    uncached_share: float
    uncached: Callable[[int], int]
    archs: Sequence[Any] = ()
    journalled: Mapping[str, int] = field(default_factory=dict)

    def to_measure_of(self, archs: Sequence[Any], passes: int) -> int:
        """Measurements of passes 1..``passes`` that ``archs`` still need."""
        j = self.journalled
        return sum(passes - min(passes, j.get(str(a), 0)) for a in archs) if j else len(archs) * passes

    def to_measure(self, lo: int, hi: int, passes: int) -> int:
        """Measurements of passes 1..``passes`` that the ``lo``-th to ``hi - 1``-th networks still need."""
        if hi <= lo:
            return 0
        if not self.journalled or not self.archs:
            return (hi - lo) * passes
        return self.to_measure_of(self.archs[lo:hi], passes) + max(0, hi - max(lo, len(self.archs))) * passes

    def first_passes(self, lo: int, hi: int) -> int:
        """Networks among the ``lo``-th to ``hi - 1``-th with no pass journalled."""
        return self.to_measure(lo, hi, 1)


@dataclass
class Phase:
    """One phase of the plan: ``items`` of a ``kind`` (a rate of :class:`~nagkit.latency.budget_rates.Rates`,
    or ``network``: a network converted and measured ``net_passes`` times), at a priority (0: required)."""

    name: str
    kind: str
    items: int
    priority: int = 0
    done: int = 0
    spent_s: float = 0.0
    status: str = "planned"  # planned | running | done | stopped (for time) | skipped (for time)
    estimate_s: float | None = None  # at plan time

    @property
    def open(self) -> bool:
        return self.status in ("planned", "running")

    @property
    def remaining(self) -> int:
        return max(0, self.items - self.done) if self.open else 0

    def to_dict(self) -> dict[str, Any]:
        return {"phase": self.name, "priority": self.priority, "required": self.priority == 0,
                "planned": self.items, "done": self.done,
                "skipped": max(0, self.items - self.done) if self.status.endswith("for time") else 0,
                "status": self.status, "estimate_s": None if self.estimate_s is None else round(self.estimate_s, 1),
                "spent_s": round(self.spent_s, 2)}
