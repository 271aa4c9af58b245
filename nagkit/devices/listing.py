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
            if "placeholder" in e.message:  # android-typical as shipped: a template to copy
                row["template"] = (f"copy {path} to my-phone.yaml, set its `device:` to your phone (`adb devices` "
                                   "lists serials), then --device my-phone.yaml")
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
    """Phones the running adb server sees (asked over its socket: no server is started), or a
    row saying how nagkit reaches phones without one."""
    from nagkit.devices.adb.server import describe_address, list_devices, server_version

    if server_version() is None:
        return [{"spec": "adb:SERIAL", "kind": "adb", "available": False,
                 "note": f"no adb server running at {describe_address()}: nagkit reaches adb:SERIAL over USB itself "
                         "(libusb) and adb:HOST:PORT over TCP; `adb devices` starts a server and lists phones"}]
    try:
        devices = list_devices()
    except OSError as e:
        return [{"spec": "adb:SERIAL", "kind": "adb", "available": False,
                 "note": f"the adb server at {describe_address()} did not answer: {e}"}]
    rows = []
    for d in devices:
        row = {"spec": f"adb:{d.serial}", "kind": "adb", "available": d.state == "device", "state": d.state,
               "via": f"adb server {describe_address()}"}
        row.update({k: v for k, v in d.details.items() if k in ("model", "product")})
        if d.state != "device":
            from nagkit.devices.adb.server import state_hint

            row["note"] = state_hint(d.state)
        rows.append(row)
    if not rows:
        rows.append({"spec": "adb:SERIAL", "kind": "adb", "available": False,
                     "note": f"the adb server at {describe_address()} sees no phone; for Wi-Fi: "
                             "`adb connect PHONE_IP:5555`"})
    return rows
