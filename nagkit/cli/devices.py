"""``nagkit devices``: what can be measured from here (runtimes, GPUs, phones, profiles, plugins)."""

from __future__ import annotations

from typing import Any

import click

from nagkit.cli.options import emit, json_option, verbosity_option


@click.command(name="devices")
@click.option("--no-adb", is_flag=True, help="Do not run `adb devices` (it starts the adb server).")
@click.option("--info", "info_spec", default=None, metavar="SPEC",
              help="Show one device's hardware and runtime facts instead of the listing.")
@json_option
@verbosity_option
def devices(no_adb: bool, info_spec: str | None, as_json: bool) -> None:
    """List reachable devices, CPU runtimes, GPUs, adb devices, profiles and plugins.

    \b
    Device specs for --device:
      cpu[:runtime=litert|onnxruntime|torch,threads=N,cores=0-3]
      cuda[:N][,mode=graph|eager]
      adb:SERIAL   adb:HOST:PORT
      PROFILE (a name from device_profiles/) or path/to/profile.yaml
    """
    if info_spec:
        from nagkit.devices.registry import get_device

        dev = get_device(info_spec)
        try:
            result = {"spec": dev.spec, "kind": dev.kind, "model_format": dev.model_format,
                      "info": dev.info(), "runtime": dev.runtime_info()}
        finally:
            dev.close()
        emit(result, as_json, _human_info)
        return
    from nagkit.devices.registry import list_devices

    rows = list_devices(adb=not no_adb)
    emit(rows, as_json, _human_rows)


def _human_rows(rows: list[dict[str, Any]]) -> str:
    lines = []
    width = max(len(r["spec"]) for r in rows) if rows else 10
    groups = (("cpu", "CPU runtimes"), ("cuda", "CUDA GPUs"), ("adb", "Android (adb)"),
              ("profile", "Profiles (device_profiles/)"), ("plugin", "Plugins (entry point nagkit.devices)"))
    for kind, title in groups:
        sel = [r for r in rows if r["kind"] == kind]
        if not sel:
            continue
        lines.append(f"{title}:")
        for r in sel:
            mark = "+" if r.get("available") else "-"
            lines.append(f"  {mark} {r['spec']:<{width}}  {_detail(r)}".rstrip())
    lines.append("(+ reachable, - not reachable; use the first column with --device)")
    return "\n".join(lines)


def _detail(r: dict[str, Any]) -> str:
    kind = r["kind"]
    if kind == "cpu":
        if r.get("available"):
            return f"{r['package']} {r.get('version') or '?'}" + ("  (XNNPACK)" if r["runtime"] == "litert" else "")
        return f"not installed: {r.get('install', '')}"
    if kind == "cuda":
        if r.get("available"):
            return f"{r['name']}, {r['memory_gib']} GiB, sm {r['capability']}, torch {r['torch']} CUDA {r['cuda']}"
        return r.get("note", "")
    if kind == "adb":
        if "state" in r:
            extra = " ".join(f"{k}:{r[k]}" for k in ("model", "product") if k in r)
            return f"{r['state']} {extra}".strip()
        return r.get("note", "")
    if kind == "profile":
        if r.get("available"):
            return f"-> {r['device']}" + (f"  {r['description']}" if r.get("description") else "")
        return f"invalid: {r.get('error', '')}"
    if kind == "plugin":
        return f"{r['entry_point']}" + (f" ({r['package']} {r['version']})" if r.get("package") else "")
    return ""


def _human_info(result: dict[str, Any]) -> str:
    lines = [f"{result['spec']}  ({result['kind']}, measures {result['model_format']})", "device:"]
    for k, v in result["info"].items():
        if k == "cpufreq" and isinstance(v, dict):
            v = "; ".join(f"cpu{c}: " + ", ".join(f"{a}={b}" for a, b in row.items()) for c, row in v.items())
        lines.append(f"  {k}: {v}")
    lines.append("runtime:")
    lines.extend(f"  {k}: {v}" for k, v in result["runtime"].items())
    return "\n".join(lines)
