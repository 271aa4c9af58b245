"""Data shipped inside the package (found the same way in a checkout and in a wheel).

- ``workspaces/``: the example workspaces (presets): ``fmnist`` (the embedded default),
  ``ofa-note10``, ``ofa-cpu-w1.0``. They are read-only: commands that write to a workspace
  write to the user's copy (:mod:`nagkit.app.workspace`).
- ``device_profiles/``: the shipped device profiles (``nagkit devices`` lists them).
- ``latency_tables/``: the shipped latency tables, with the device and runtime they came from.
- ``ofa/``: OFA's ImageNet accuracy predictor for the MobileNetV3 w1.2 space (MIT, ``LICENSE``).

Workspace files name these by a path relative to this folder (``latency_tables/note10.json``,
``ofa/acc_predictor.pth``); see ``Workspace.resolve_input``.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent
WORKSPACES = ROOT / "workspaces"
DEVICE_PROFILES = ROOT / "device_profiles"
LATENCY_TABLES = ROOT / "latency_tables"
OFA = ROOT / "ofa"

__all__ = ["DEVICE_PROFILES", "LATENCY_TABLES", "OFA", "ROOT", "WORKSPACES", "is_shipped"]


def is_shipped(path: str | Path) -> bool:
    """Whether ``path`` lies inside the package's shipped data (never written by nagkit)."""
    try:
        Path(path).resolve().relative_to(ROOT)
    except ValueError:
        return False
    return True
