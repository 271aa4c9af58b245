"""``nagkit devices``: what is reachable from here, one row per runtime, GPU, phone, profile
and plugin."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nagkit.devices.plugins import entry_points
from nagkit.devices.profiles import find_profile, load_profile, profile_names
from nagkit.devices.spec import BUILTIN_KINDS
from nagkit.errors import NagkitError


def list_devices(*, adb: bool = True, cuda: bool = True) -> list[dict[str, Any]]:
    """What is reachable from here, one row per device/runtime/profile/plugin. Each row has
    ``spec`` (what to pass to ``--device``), ``kind``, ``available`` and details. Nothing is
    started except ``adb devices`` when the adb client exists (``adb=False`` skips it)."""
    from nagkit.runtimes import versions

    rows: list[dict[str, Any]] = []
    runtimes = versions.runtime_status()
    gpus: list[dict[str, Any]] | None = None
    for name, rv in runtimes.items():
        row = {"spec": "cpu" if name == "litert" else f"cpu:runtime={name}", "kind": "cpu", "runtime": name,
               "available": rv["available"], "package": rv["package"], "version": rv["version"]}
        if not rv["available"]:
            row["install"] = f"pip install {rv['package']}"
        rows.append(row)
    if cuda:
        from nagkit.devices.cuda import list_cuda

        gpus = list_cuda()
        rows.extend({**g, "available": True} for g in gpus)
        if not gpus:
            rows.append({"spec": "cuda", "kind": "cuda", "available": False,
                         "note": "no CUDA GPU visible to torch here"})
    if adb:
        rows.extend(_adb_rows())
    for name in profile_names():
        path = find_profile(name)
        # A profile named like a built-in spec (cuda.yaml) is reached by its path.
        shadowed = name.partition(":")[0] in BUILTIN_KINDS or name in entry_points()
        row = {"spec": _short_path(path) if shadowed else name, "kind": "profile", "path": str(path)}
        try:
            ds = load_profile(path)  # type: ignore[arg-type]
            row.update({"device": str(ds) if ds.kind in ("cpu", "cuda") else f"{ds.kind}:{ds.target}",
                        "available": True})
            if ds.kind == "cpu" and not runtimes[ds.get("runtime")]["available"]:
                row.update({"available": False, "note": f"runtime {ds.get('runtime')} is not installed"})
            if ds.kind == "cuda" and gpus is not None and int(ds.get("index", 0)) >= len(gpus):
                row.update({"available": False, "note": f"no GPU cuda:{ds.get('index', 0)} here"})
            if ds.description:
                row["description"] = ds.description
        except NagkitError as e:
            row.update({"available": False, "error": e.message})
        rows.append(row)
    for name, ep in sorted(entry_points().items()):
        dist = getattr(ep, "dist", None)
        rows.append({"spec": name, "kind": "plugin", "available": True, "entry_point": ep.value,
                     "package": getattr(dist, "name", None), "version": getattr(dist, "version", None)})
    return rows


def _short_path(path: Path | None) -> str:
    try:
        return str(Path(path).resolve().relative_to(Path.cwd()))  # type: ignore[arg-type]
    except ValueError:
        return str(path)


def _adb_rows() -> list[dict[str, Any]]:
    import shutil
    import subprocess

    exe = shutil.which("adb")
    if exe is None:
        return [{"spec": "adb:SERIAL", "kind": "adb", "available": False,
                 "note": "adb client not installed (apt-get install adb); adb:HOST:PORT still works via adb-shell"}]
    try:
        out = subprocess.run([exe, "devices", "-l"], capture_output=True, text=True, timeout=15).stdout
    except (subprocess.SubprocessError, OSError) as e:
        return [{"spec": "adb:SERIAL", "kind": "adb", "available": False, "note": f"`adb devices` failed: {e}"}]
    rows = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 2 or line.startswith(("List of devices", "*")):
            continue
        row = {"spec": f"adb:{parts[0]}", "kind": "adb", "available": parts[1] == "device", "state": parts[1]}
        row.update({k: v for k, _, v in (f.partition(":") for f in parts[2:]) if k in ("model", "product")})
        if parts[1] == "unauthorized":
            row["note"] = "accept the USB-debugging prompt on the phone"
        rows.append(row)
    if not rows:
        rows.append({"spec": "adb:SERIAL", "kind": "adb", "available": False,
                     "note": "no device attached (`adb devices` is empty); adb:HOST:PORT connects over TCP"})
    return rows
