"""Moved to :mod:`nagkit.app.workspace` (docs/decisions.md 16).

An alias for code outside the package that still imports ``nagkit.workspace`` (benchmarks/nag);
nothing in ``nagkit`` imports it. Delete it then.
"""

from nagkit.app.workspace import (
    CONFIG_NAME, DEFAULT_PRESET, PRESETS_DIR, DatasetSettings, Workspace, list_presets, load_workspace,
)

__all__ = ["CONFIG_NAME", "DEFAULT_PRESET", "PRESETS_DIR", "DatasetSettings", "Workspace", "list_presets",
           "load_workspace"]
