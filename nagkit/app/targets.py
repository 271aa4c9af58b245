"""Which workspace and latency table a build for device D uses (``nagkit build --device D``).

Predictions (and the budget's range) come from D's own table when one exists:

1. the workspace's own table is D's (same device spec; for a CPU, also profiled on this host,
   and on this CPU model when the table names one):
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
from nagkit.devices.cpuinfo import named_cpu, same_cpu
from nagkit.errors import ArtifactError, BadInputError, NagkitError
from nagkit.io import read_input_file
from nagkit.latency.table import MAX_TABLE_BYTES
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
    if device.kind == "cpu":  # "cpu" names every CPU: the table must come from this host and CPU model
        if provenance.get("host") != platform.node():
            return False
        return same_cpu(device_info, device.info() or {})
    return True


def table_precision(ws: Workspace) -> str:
    """The precision of ``ws``'s latency table (a synthetic table, like tables from before
    precisions, is fp32)."""
    return getattr(ws.latency_table, "precision", "fp32")


def find_device_table(device, space_name: str, precision: str = "fp32") -> Path | None:
    """The first table of ``device`` for ``space_name`` at ``precision`` in :func:`table_dirs`, or None."""
    for d in table_dirs():
        if not d.is_dir():
            continue
        for f in sorted(d.glob("*.json")):
            try:
                # not a regular file (a FIFO) or too big: skipped (a nagkit error is a ValueError), never waited on
                obj = json.loads(read_input_file(f, "latency table", max_bytes=MAX_TABLE_BYTES).decode("utf-8"))
                sp = obj.get("space") or {}
                name = sp.get("name") if isinstance(sp, dict) else sp
                if name == space_name and obj.get("precision", "fp32") == precision \
                        and table_is_for(obj.get("device") or {}, obj.get("provenance") or {}, device):
                    return f.resolve()
            except (OSError, ValueError, AttributeError):
                continue
    return None


def describe_table(ws: Workspace) -> str:
    dev, prov = ws.table_origin()
    who = dev.get("model") or named_cpu(dev) or dev.get("gpu") or ""
    host = prov.get("host")
    where = f"{dev.get('spec', ws.latency_table_spec)}" + (f", {who}" if who else "") + (f", host {host}" if host else "")
    return f"{ws.latency_table_spec} ({where})"


def choose_target(ws: Workspace, device, *, say: Callable[[str], None] | None = None,
                  precision: str | None = None) -> Target:
    """The workspace and table for a build of ``ws`` on ``device`` (None: no device); see the
    module doc. ``say`` gets one line per decision worth printing. A device workspace is made
    here; :meth:`Target.ready` trains it if needed (after the budget was checked). A device's
    own table is used only at ``precision`` (default: the workspace's table's)."""
    precision = precision or table_precision(ws)
    if device is None:
        return Target(ws, ws.latency_table_spec, False, f"{describe_table(ws)}; no --device, so nothing is measured")
    if table_is_for(*ws.table_origin(), device) and table_precision(ws) == precision:
        return Target(ws, ws.latency_table_spec, True, f"{describe_table(ws)}: {device.spec}'s own table")
    path = find_device_table(device, ws.space.name, precision)
    if path is None:
        looked = ", ".join(str(d) for d in table_dirs())
        return Target(ws, ws.latency_table_spec, False,
                      f"{describe_table(ws)}: no table of {device.spec} for {ws.space.name} was found (looked in "
                      f"{looked}); make one with `nagkit profile --device {device.spec} --space {ws.space.name}"
                      + (f" --precision {precision}`" if precision != "fp32" else "`"))
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


def precision_workspace(ws: Workspace, precision: str, *, quantize_after: bool = False,
                        say: Callable[[str], None] | None = None) -> Workspace:
    """The workspace whose table is timed at ``precision``, for a build of ``ws`` exporting at it.

    ``ws`` itself when its table has that precision. Otherwise its *precision twin*: a
    workspace (yours, then the shipped ones) of the same space whose table is at ``precision``
    and was measured on the same device (spec and, for a CPU, host and CPU model) as ``ws``'s; the shipped
    ``fmnist`` has ``fmnist-int8``. ``quantize_after`` keeps ``ws`` for an int8 or fp16 export from an
    fp32 table (the arch is chosen for fp32 latency, then quantized; said in the manifest).
    Anything else is a clear error (exit 2): a table never predicts a bundle of another precision."""
    have = table_precision(ws)
    if have == precision:
        if quantize_after:
            raise BadInputError(f"--quantize-after: workspace {ws.ref!r}'s table is already {precision}, so there is "
                                "nothing to quantize after", hint="drop --quantize-after")
        return ws
    if quantize_after and have == "fp32" and precision in ("int8", "fp16"):
        return ws
    twin = find_precision_twin(ws, precision)
    if twin is not None:
        (say or (lambda msg: log.warning("%s", msg)))(
            f"workspace {twin.ref}: {ws.ref}'s table is {have}, so the {precision} export uses {twin.ref}, whose "
            f"generator was trained on {twin.latency_table_spec} ({precision}, the same device)")
        return twin
    fix = (f"profile the device at {precision}: `nagkit profile --device D --space {ws.space.name} --precision "
           f"{precision}`, point `latency_table` in a copy of the workspace at it and `nagkit train` it")
    if have == "fp32" and precision in ("int8", "fp16"):
        fix += f"; or pass --quantize-after to quantize the model chosen on the fp32 table (its {precision} latency " \
               "is then not predicted: measure it with --device)"
    else:
        fix += f"; or export {have} (--export {'tflite' if have == 'fp32' else 'tflite-' + have})"
    raise BadInputError(f"workspace {ws.ref!r}'s latency table {ws.latency_table_spec!r} is {have}, but the export "
                        f"is {precision}, and no {precision} workspace of space {ws.space.name!r} measured on the same "
                        "device was found; a table predicts only models of its own precision", hint=fix)


def find_precision_twin(ws: Workspace, precision: str) -> Workspace | None:
    """A workspace of ``ws``'s space whose table is at ``precision``, measured where ``ws``'s was."""
    from nagkit.app.workspace import list_presets, list_user_workspaces

    dev, prov = ws.table_origin()
    for name in dict.fromkeys([*list_user_workspaces(), *list_presets()]):
        try:
            other = load_workspace(name)
            if other.root.resolve() == ws.root.resolve() or other.space.to_dict() != ws.space.to_dict():
                continue
            if table_precision(other) != precision:
                continue
            odev, oprov = other.table_origin()
            if canonical_spec(odev.get("spec")) == canonical_spec(dev.get("spec")) and oprov.get("host") == prov.get("host") \
                    and odev.get("cpu_model") == dev.get("cpu_model") and same_cpu(odev, dev):
                return other
        except NagkitError:
            continue
    return None
