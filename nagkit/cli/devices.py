"""``nagkit devices``: what can be measured from here (runtimes, GPUs, phones, profiles, plugins)."""

from __future__ import annotations

from typing import Any

import click

from nagkit.cli.options import device_option, emit, json_option, log, verbosity_option


@click.command(name="devices")
@click.option("--no-adb", is_flag=True, help="Do not run `adb devices` (it starts the adb server).")
@device_option
@click.option("--measure", "model_path", type=click.Path(dir_okay=False), default=None, metavar="MODEL",
              help="With --device: time this model file (TFLite/ONNX/TorchScript) once and print the statistics.")
@click.option("--shape", default=None, metavar="N,C,H,W",
              help="Input shape for --measure (default: the model's own).")
@json_option
@verbosity_option
def devices(no_adb: bool, device_spec: str | None, model_path: str | None, shape: str | None, as_json: bool) -> None:
    """List reachable devices, CPU runtimes, GPUs, adb devices, profiles and plugins.

    With --device SPEC, show that device's hardware and runtime facts instead; add
    --measure MODEL to time one model on it.

    \b
    Device specs for --device:
      cpu[:runtime=litert|onnxruntime|torch,threads=N,cores=0-3]
      cuda[:N][,mode=graph|eager]
      adb:SERIAL   adb:HOST:PORT
      PROFILE (a name from device_profiles/) or path/to/profile.yaml
    """
    if model_path and not device_spec:
        raise click.UsageError("--measure needs --device SPEC (e.g. --device cpu)")
    if device_spec:
        from nagkit.devices.registry import get_device

        input_shape = _parse_shape(shape) if shape else None
        dev = get_device(device_spec)
        try:
            result: dict[str, Any] = {"spec": dev.spec, "kind": dev.kind, "model_format": dev.model_format,
                                      "info": dev.info(), "runtime": dev.runtime_info()}
            if model_path:
                log(f"measuring {model_path} on {dev.spec} ...")
                stats = dev.measure(model_path, input_shape)
                result["measurement"] = {"model": model_path, "input_shape": list(input_shape) if input_shape else None,
                                         **stats.to_dict()}
        finally:
            dev.close()
        emit(result, as_json, _human_info)
        return
    from nagkit.devices.listing import list_devices

    rows = list_devices(adb=not no_adb)
    emit(rows, as_json, _human_rows)


def _parse_shape(text: str) -> tuple[int, ...]:
    try:
        dims = tuple(int(d) for d in text.replace("x", ",").split(","))
    except ValueError:
        dims = ()
    if not dims or any(d <= 0 for d in dims):
        raise click.BadParameter(f"{text!r} is not a shape; write positive integers like 1,3,224,224", param_hint="--shape")
    return dims


def _human_rows(rows: list[dict[str, Any]]) -> str:
    lines = []
    width = max(len(r["spec"]) for r in rows) if rows else 10
    groups = (("cpu", "CPU runtimes"), ("cuda", "CUDA GPUs"), ("adb", "Android (adb)"),
              ("profile", "Profiles (./device_profiles, $NAGKIT_PROFILE_PATH, shipped)"), ("plugin", "Plugins (entry point nagkit.devices)"))
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
        if r.get("template"):
            return f"template: {r['template']}"
        if "error" in r:
            return f"invalid: {r['error']}"
        text = f"-> {r['device']}" + (f"  {r['description']}" if r.get("description") else "")
        return text + (f"  ({r['note']})" if r.get("note") else "")
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
    m = result.get("measurement")
    if m:
        lines.append(f"measurement of {m['model']}:")
        lines.append(f"  median {m['median_ms']:.4f} ms  mean {m['mean_ms']:.4f}  std {m['std_ms']:.4f}  "
                     f"p10 {m['p10_ms']:.4f}  p90 {m['p90_ms']:.4f}  min {m['min_ms']:.4f}  n={m['n']}"
                     + ("  (noisy)" if m["noisy"] else ""))
    return "\n".join(lines)
