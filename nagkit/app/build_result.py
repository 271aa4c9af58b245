"""What `nagkit build` returns: the bundle, the arch, its latency (predicted, measured), accuracy,
limits and how it was made (:class:`BuildResult`), and each candidate tried (:class:`Attempt`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Attempt:
    arch: str
    predicted_ms: float
    measured_ms: float | None
    accepted: bool
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class BuildResult:
    bundle: str
    zip: str
    arch: str
    ofa: dict[str, Any]
    budget_ms: float
    predicted_ms: float
    predicted_raw_ms: float
    measured: dict[str, Any] | None
    accuracy: float | None
    accuracy_source: str | None
    device: str | None
    formats: list[str]
    weights: str
    attempts: list[Attempt] = field(default_factory=list)
    aims: list[dict[str, float]] = field(default_factory=list)  # re-aims after over-budget measurements
    timings_s: dict[str, float] = field(default_factory=dict)
    parity: dict[str, Any] = field(default_factory=dict)
    note: str | None = None  # e.g. the budget was above the slowest network
    workspace: str | None = None  # how to name it (``--workspace``), and where it is
    table: str | None = None  # the latency table the predictions and the budget's range come from
    table_note: str | None = None  # which table, and whether it is the device's own
    verified: bool = False  # measured on the device (without --device: unverified)
    trained: dict[str, Any] | None = None  # the generator trained on demand for the device's table
    accuracies: list[dict[str, Any]] = field(default_factory=list)  # the manifest's records, the reported one first
    re_aims: list[dict[str, float]] = field(default_factory=list)  # {aim_ms, ratio}: see _Build.first_fitting
    precision: str = "fp32"
    int8: dict[str, Any] | None = None  # int8 parity: top-1 agreement, accuracies, drop (app/int8.py)
    constraints: dict[str, Any] | None = None  # limits, what the network reaches, which binds (decisions 39)
    # what the table's profile reached under its time budget, and the warnings (None: no such record; decisions 42)
    table_fidelity: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["attempts"] = [a.to_dict() for a in self.attempts]
        return d
