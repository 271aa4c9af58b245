"""Which workspace and latency table a build for device D uses (``nagkit build --device D``).

Predictions (and the budget's range) come from D's own table when one exists:

1. the workspace's own table is D's (same device spec; for a CPU, also profiled on this host):
   the workspace as it is;
2. else a table of D for the workspace's space in ``./latency_tables``,
   ``$NAGKIT_HOME/latency_tables`` or the shipped tables (what ``nagkit profile --device D``
   writes): the *device workspace* ``<workspace>@<table name>`` among the user's workspaces, a
   copy of the workspace re-targeted to that table (its space narrowed to the resolutions the
   table covers). Its generator is trained on demand, once: the dataset is the workspace's own
   archs and accuracies with latency from D's table (no accuracy query), then ``nagkit train``
   (about a minute or two on a 2-core CPU, with progress lines). Retrained when the table
   changes (its sha256 is recorded by training);
3. else the workspace's table, and the build says so (and how to make D's table).
"""

from __future__ import annotations

import json
import logging
import platform
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nagkit.app.workspace import Workspace, init_workspace, load_workspace, user_home, user_workspaces_dir
from nagkit.errors import ArtifactError, NagkitError
from nagkit.resources import LATENCY_TABLES

log = logging.getLogger(__name__)

Progress = Callable[[str, int, int], None]


@dataclass
class Target:
    """The workspace a build uses, its table and one line saying where predictions come from.
    A device workspace whose generator is missing or stale is trained by :meth:`ready`."""

    workspace: Workspace
    table: str  # the table's path (or spec)
    device_table: bool  # the table is the device's own
    note: str
    base: Workspace | None = None  # the workspace a device workspace was made from
    trained: dict[str, Any] | None = None  # what training on demand reported

    def ready(self, progress: Progress | None = None, say: Callable[[str], None] | None = None) -> Workspace:
        """The workspace, its generator trained for its table first if needed (device workspaces)."""
        if self.base is not None and self.trained is None:
            from nagkit.io import sha256_file

            sha = sha256_file(self.table)
            if not _trained_for(self.workspace, sha):
                self.trained = _train(self.base, self.workspace, sha, progress,
                                      say or (lambda msg: log.warning("%s", msg)))
        return self.workspace


def table_dirs() -> list[Path]:
    return [Path.cwd() / "latency_tables", user_home() / "latency_tables", LATENCY_TABLES]


def canonical_spec(text: str | None) -> str | None:
    """A device spec as the registry prints it (profiles resolved), or the text itself."""
    if not text:
        return None
    from nagkit.devices.registry import parse_device_spec

    try:
        return str(parse_device_spec(str(text)))
    except NagkitError:
        return str(text)


def table_is_for(device_info: dict[str, Any], provenance: dict[str, Any], device) -> bool:
    """Whether a table (its ``device`` and ``provenance`` blocks) was profiled on ``device``."""
    if canonical_spec(device_info.get("spec")) != canonical_spec(str(device.spec)):
        return False
    if device.kind == "cpu":  # "cpu" names every CPU: the table must come from this host
        return provenance.get("host") == platform.node()
    return True


def find_device_table(device, space_name: str) -> Path | None:
    """The first table of ``device`` for ``space_name`` in :func:`table_dirs`, or None."""
    for d in table_dirs():
        if not d.is_dir():
            continue
        for f in sorted(d.glob("*.json")):
            try:
                obj = json.loads(f.read_text(encoding="utf-8"))
                sp = obj.get("space") or {}
                name = sp.get("name") if isinstance(sp, dict) else sp
                if name == space_name and table_is_for(obj.get("device") or {}, obj.get("provenance") or {}, device):
                    return f.resolve()
            except (OSError, ValueError, AttributeError):
                continue
    return None


def describe_table(ws: Workspace) -> str:
    dev, prov = ws.table_origin()
    who = dev.get("model") or dev.get("cpu_model") or dev.get("gpu") or ""
    host = prov.get("host")
    where = f"{dev.get('spec', ws.latency_table_spec)}" + (f", {who}" if who else "") + (f", host {host}" if host else "")
    return f"{ws.latency_table_spec} ({where})"


def choose_target(ws: Workspace, device, *, say: Callable[[str], None] | None = None) -> Target:
    """The workspace and table for a build of ``ws`` on ``device`` (None: no device); see the
    module doc. ``say`` gets one line per decision worth printing. A device workspace is made
    here; :meth:`Target.ready` trains it if needed (after the budget was checked)."""
    if device is None:
        return Target(ws, ws.latency_table_spec, False, f"{describe_table(ws)}; no --device, so nothing is measured")
    if table_is_for(*ws.table_origin(), device):
        return Target(ws, ws.latency_table_spec, True, f"{describe_table(ws)}: {device.spec}'s own table")
    path = find_device_table(device, ws.space.name)
    if path is None:
        looked = ", ".join(str(d) for d in table_dirs())
        return Target(ws, ws.latency_table_spec, False,
                      f"{describe_table(ws)}: no table of {device.spec} for {ws.space.name} was found (looked in "
                      f"{looked}); make one with `nagkit profile --device {device.spec} --space {ws.space.name}`")
    dws = device_workspace(ws, path, say=say)
    return Target(dws, str(path), True, f"{describe_table(dws)}: {device.spec}'s own table (workspace {dws.ref}, "
                                        f"{ws.ref} re-targeted to it)", base=ws)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._@-]+", "-", text).strip("-.") or "device"


def device_workspace(ws: Workspace, table_path: Path, *, say: Callable[[str], None] | None = None) -> Workspace:
    """``<ws>@<table>`` among the user's workspaces, made for ``table_path`` if needed
    (not trained: see :meth:`Target.ready`)."""
    from nagkit.latency.table import LatencyTable

    say = say or (lambda msg: log.warning("%s", msg))
    table = LatencyTable.load(table_path)
    res = [r for r in ws.space.resolutions if r in table.resolutions]
    if not res:
        raise ArtifactError(f"latency table {str(table_path)!r} covers resolutions {list(table.resolutions)}, none of "
                            f"workspace {ws.ref!r}'s ({list(ws.space.resolutions)})",
                            hint=f"profile the device at them: `nagkit profile --device {table.device.get('spec')} "
                                 f"--space {ws.space.name}`")
    dest = user_workspaces_dir() / _slug(f"{ws.root.name}@{table_path.stem}")
    if dest.joinpath("nagkit.toml").is_file():
        dws = load_workspace(dest)
        if dws.resolve_input(dws.latency_table_spec, "latency table") != table_path.resolve():
            dws = _make(ws, dest, table_path, res, force=True)
    else:
        dws = _make(ws, dest, table_path, res, force=False)
        say(f"workspace {dws.ref}: {ws.ref} re-targeted to {table_path} (made now, in {dest})")
    return dws


def _make(ws: Workspace, dest: Path, table_path: Path, res: list[int], force: bool) -> Workspace:
    narrowed = res if res != list(ws.space.resolutions) else None
    return init_workspace(dest, source=ws, latency_table=table_path, resolutions=narrowed, force=force)


def _trained_for(ws: Workspace, table_sha: str) -> bool:
    meta = ws.artifact_path("generator").with_suffix(".json")
    if not (ws.artifact_path("generator").is_file() and ws.artifact_path("evaluator").is_file() and meta.is_file()):
        return False
    try:
        prov = json.loads(meta.read_text(encoding="utf-8")).get("provenance", {})
    except (OSError, ValueError):
        return False
    return (prov.get("latency_table") or {}).get("sha256") == table_sha


def _train(base: Workspace, ws: Workspace, table_sha: str, progress: Progress | None, say) -> dict[str, Any]:
    """The device workspace's dataset (the base's archs and accuracies, the device's latency)
    and generator."""
    from nagkit.app.nag import train_workspace
    from nagkit.data.dataset import load_dataset, relabel

    dpath = ws.artifact_path("dataset")
    fresh = dpath.is_file() and (load_dataset(dpath).header.get("latency_table") or {}).get("sha256") == table_sha
    if not fresh:
        src = base.artifact_path("dataset")
        if not src.is_file():
            raise ArtifactError(
                f"workspace {base.ref!r} has no dataset to re-target to {ws.latency_table_spec}",
                hint=f"collect one for the device workspace, then train it: `nagkit dataset --workspace {ws.ref} && "
                     f"nagkit train --workspace {ws.ref}`")
        ds = relabel(src, dpath, space=ws.space, table=ws.latency_table, table_prov=ws.latency_table_provenance())
        say(f"dataset {dpath}: {len(ds)} archs of {base.ref} with {ws.latency_table_spec}'s latency "
            "(no accuracy query)")
    say(f"training the generator of {ws.ref} for this device's table, once (a minute or two on a 2-core CPU; "
        f"`nagkit train --workspace {ws.ref}` does the same)")
    return train_workspace(ws, progress=progress, log=say)
