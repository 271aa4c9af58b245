"""Device specs, profiles, plugins and the factory: ``get_device(spec) -> Device``.

Spec strings (also shown by ``nagkit devices``)::

    cpu                                   LiteRT (XNNPACK), 1 thread
    cpu:runtime=onnxruntime,threads=2     options: runtime=litert|onnxruntime|torch,
    cpu:torch,cores=0-1                   threads=N, cores=0-3 / 0,2 (a bare runtime name works)
    cuda  cuda:1  cuda:1,mode=eager       options: index (or a bare number), mode=graph|eager,
                                          window_ms=timing window of a graph-replay sample
    adb:SERIAL   adb:HOST:PORT            Android over ADB (USB serial or TCP address)
    NAME  or  path/to/profile.yaml        a device profile (device_profiles/NAME.yaml)
    PLUGIN[:...]                          a third-party device from the `nagkit.devices`
                                          entry-point group

A profile is YAML with a ``device:`` spec plus options for that kind of device (e.g.
``device: cpu``, ``runtime: litert``, ``threads: 1``, ``measure: {min_runs: 20}``); unknown
keys are refused with a did-you-mean; ``measure:`` sets the device's default MeasureConfig.
Nothing heavy is imported here: runtimes, torch and adb-shell load with their device.
"""

from __future__ import annotations

import importlib
import logging
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from nagkit.devices.base import Device, MeasureConfig
from nagkit.errors import BadInputError, DeviceError, NagkitError, UnknownNameError, did_you_mean

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "nagkit.devices"
HINT = "run `nagkit devices` to list reachable devices, runtimes and profiles"
CPU_RUNTIMES = ("litert", "onnxruntime", "torch")
CUDA_MODES = ("graph", "eager")
PROFILE_ENV = "NAGKIT_PROFILE_PATH"
VALID_FORMS = (
    "cpu", "cpu:runtime=litert|onnxruntime|torch,threads=N,cores=0-1", "cuda", "cuda:N",
    "cuda:N,mode=graph|eager", "adb:SERIAL", "adb:HOST:PORT", "PROFILE_NAME", "path/to/profile.yaml",
)
PROFILE_COMMON_KEYS = ("name", "description", "notes", "device", "measure")
# Option keys each built-in kind takes (from a spec, a profile or get_device overrides).
KIND_KEYS: dict[str, tuple[str, ...]] = {
    "cpu": ("runtime", "threads", "cores"),
    "cuda": ("index", "mode", "window_ms"),
}
# Keys an adb profile may hold unless nagkit.devices.adb exports its own PROFILE_KEYS.
ADB_DEFAULT_KEYS = (
    "threads", "taskset", "cpu_mask", "benchmark_binary", "remote_dir", "use_xnnpack", "runtime",
    "cooldown_s", "max_thermal_status", "retries", "adbkey", "extra_args", "timeout_s",
)


@dataclass(frozen=True)
class DeviceSpec:
    """A parsed device spec. ``options`` holds (key, value) pairs, sorted, hashable;
    ``source`` is the text it came from; ``profile`` and ``description`` come from a profile."""

    kind: str
    target: str | None = None
    options: tuple[tuple[str, Any], ...] = ()
    source: str = ""
    profile: str | None = None
    description: str | None = None

    @property
    def opts(self) -> dict[str, Any]:
        return dict(self.options)

    def get(self, key: str, default: Any = None) -> Any:
        return self.opts.get(key, default)

    @property
    def measure(self) -> MeasureConfig | None:
        return self.opts.get("measure")

    def with_options(self, **overrides: Any) -> DeviceSpec:
        """A copy with ``overrides`` applied; ``None`` values are dropped (CLI defaults never
        override a spec or profile)."""
        given = {k: v for k, v in overrides.items() if v is not None}
        if not given:
            return self
        opts = self.opts
        opts.update(_normalize_options(self.kind, given, where=f"options for {self.source or self.kind!r}"))
        new = replace(self, options=_freeze(opts))
        if self.profile and new.options != self.options:  # no longer just the profile: say what it is
            new = replace(new, source=str(replace(new, source="")))
        return new

    def __str__(self) -> str:
        """A canonical spec string that parses back to the same options (profiles excepted)."""
        parts = []
        if self.kind in ("cpu", "cuda"):
            for k, v in self.options:
                if k == "measure":
                    continue
                parts.append(f"{k}={_format_cores(v) if k == 'cores' else v}")
            return self.kind + (":" + ",".join(parts) if parts else "")
        if self.kind == "adb":
            return f"adb:{self.target}"
        return self.source or self.kind


# --------------------------------------------------------------------------- parsing


def parse_device_spec(spec: str) -> DeviceSpec:
    """Parse a spec string (see the module doc). Raises BadInputError/UnknownNameError with the
    bad value, the valid forms and the command that lists what is available."""
    if not isinstance(spec, str):
        raise BadInputError(f"a device spec must be a string, got {type(spec).__name__} {spec!r}", hint=HINT)
    text = spec.strip()
    if not text:
        raise BadInputError("empty device spec; valid forms: " + ", ".join(VALID_FORMS), hint=HINT)
    head, sep, rest = text.partition(":")
    if head == "cpu":
        return _parse_cpu(text, rest)
    if head == "cuda":
        return _parse_cuda(text, rest)
    if head == "adb":
        return _parse_adb(text, rest)
    profile_path = find_profile(text)
    if profile_path is not None:
        return load_profile(profile_path)
    plugin = _plugin_for(text)
    if plugin is not None:
        return DeviceSpec(kind=plugin, target=rest if head == plugin and sep else None, source=text)
    if _looks_like_path(text):
        raise BadInputError(f"device profile {text!r} does not exist", hint="check the path; " + HINT)
    options = ["cpu", "cuda", "adb:SERIAL", *profile_names(), *plugin_names()]
    raise UnknownNameError("device", text, options, hint=f"valid forms: {', '.join(VALID_FORMS)}; {HINT}")


def _split_options(kind: str, text: str, rest: str) -> list[tuple[str | None, str]]:
    """``a=1,b=2,3`` -> [(a, 1), (b, "2,3")]: a token without '=' continues the previous value
    (core lists), or stands alone when it is the first token (a bare runtime or index)."""
    pairs: list[tuple[str | None, str]] = []
    for tok in rest.split(","):
        tok = tok.strip()
        if not tok:
            raise BadInputError(f"empty option in device spec {text!r}", hint=f"write e.g. {kind}:{_example(kind)}")
        if "=" in tok:
            k, _, v = tok.partition("=")
            pairs.append((k.strip(), v.strip()))
        elif pairs and pairs[-1][0] == "cores":
            pairs[-1] = ("cores", pairs[-1][1] + "," + tok)
        elif not pairs:
            pairs.append((None, tok))
        else:
            raise BadInputError(
                f"option {tok!r} in device spec {text!r} has no value; write key=value",
                hint=f"e.g. {kind}:{_example(kind)}",
            )
    return pairs


def _example(kind: str) -> str:
    return {"cpu": "runtime=onnxruntime,threads=2,cores=0-1", "cuda": "1,mode=eager"}.get(kind, "")


def _parse_cpu(text: str, rest: str) -> DeviceSpec:
    opts: dict[str, Any] = {}
    if rest or text.endswith(":"):
        for k, v in _split_options("cpu", text, rest):
            if k is None:  # a bare runtime name: cpu:onnxruntime
                k = "runtime"
            if k in opts:
                raise BadInputError(f"option {k!r} given twice in device spec {text!r}", hint=HINT)
            opts[k] = v
    opts = _normalize_options("cpu", opts, where=f"device spec {text!r}")
    opts.setdefault("runtime", "litert")
    opts.setdefault("threads", 1)
    return DeviceSpec(kind="cpu", options=_freeze(opts), source=text)


def _parse_cuda(text: str, rest: str) -> DeviceSpec:
    opts: dict[str, Any] = {}
    if rest or text.endswith(":"):
        for k, v in _split_options("cuda", text, rest):
            if k is None:  # cuda:1
                k = "index"
            if k in opts:
                raise BadInputError(f"option {k!r} given twice in device spec {text!r}", hint=HINT)
            opts[k] = v
    opts = _normalize_options("cuda", opts, where=f"device spec {text!r}")
    opts.setdefault("index", 0)
    opts.setdefault("mode", "graph")
    return DeviceSpec(kind="cuda", target=str(opts["index"]), options=_freeze(opts), source=text)


_SERIAL_RE = re.compile(r"^[A-Za-z0-9._\-:\[\]]+$")


def _parse_adb(text: str, rest: str) -> DeviceSpec:
    target = rest.strip()
    if not target:
        raise BadInputError(
            f"device spec {text!r} names no device; write adb:SERIAL (USB) or adb:HOST:PORT (TCP)",
            hint="`adb devices` lists serials; " + HINT,
        )
    if not _SERIAL_RE.match(target):
        raise BadInputError(
            f"bad adb serial or address {target!r} in {text!r}: only letters, digits and . _ - : [ ] are allowed",
            hint="`adb devices` lists serials",
        )
    host, sep, port = target.rpartition(":")
    if sep and host and not port.isdigit():
        raise BadInputError(
            f"bad port {port!r} in {text!r}: write adb:HOST:PORT with a numeric port, e.g. adb:192.168.1.20:5555",
            hint=HINT,
        )
    if sep and host and port.isdigit() and not (0 < int(port) < 65536):
        raise BadInputError(f"port {port} in {text!r} is out of range 1-65535", hint=HINT)
    return DeviceSpec(kind="adb", target=target, source=text)


def adb_transport(target: str) -> str:
    """``"tcp"`` for HOST:PORT, else ``"usb"``."""
    host, sep, port = target.rpartition(":")
    return "tcp" if sep and host and port.isdigit() else "usb"


# --------------------------------------------------------------------------- option values


def _normalize_options(kind: str, given: Mapping[str, Any], where: str) -> dict[str, Any]:
    """Check keys and convert values for a built-in kind (plugins and adb pass through)."""
    out: dict[str, Any] = {}
    valid = KIND_KEYS.get(kind)
    for key, value in given.items():
        if key == "measure":
            out[key] = _measure_config(value, where)
            continue
        if valid is not None and key not in valid:
            raise _unknown_key(key, (*valid, "measure"), f"{kind} option", where)
        out[key] = _convert(kind, key, value, where)
    return out


def _convert(kind: str, key: str, value: Any, where: str) -> Any:
    if kind == "cpu" and key == "runtime":
        v = str(value).strip().lower()
        v = {"tflite": "litert", "ort": "onnxruntime", "onnx": "onnxruntime", "pytorch": "torch"}.get(v, v)
        if v not in CPU_RUNTIMES:
            raise UnknownNameError("cpu runtime", str(value), CPU_RUNTIMES, hint=f"in {where}; {HINT}")
        return v
    if key == "threads" or (kind == "cuda" and key == "index"):
        lo = 1 if key == "threads" else 0
        try:
            n = int(str(value), 10)
        except ValueError:
            n = None
        if n is None or n < lo or isinstance(value, bool):
            raise BadInputError(f"{key}={value!r} in {where}: must be an integer >= {lo}", hint=f"e.g. {kind}:{_example(kind)}")
        return n
    if kind == "cpu" and key == "cores":
        return parse_cores(value, where)
    if kind == "cuda" and key == "mode":
        v = str(value).strip().lower()
        if v not in CUDA_MODES:
            raise UnknownNameError("cuda mode", str(value), CUDA_MODES, hint=f"in {where}")
        return v
    if kind == "cuda" and key == "window_ms":
        try:
            f = float(value)
        except (TypeError, ValueError):
            f = -1.0
        if not f > 0:
            raise BadInputError(f"window_ms={value!r} in {where}: must be a number > 0", hint="e.g. cuda:mode=graph,window_ms=2")
        return f
    return value


def parse_cores(value: Any, where: str = "cores") -> tuple[int, ...]:
    """``"0-3"``, ``"0,2"``, ``"0-1,4"``, an int or a list of ints -> sorted unique core ids."""
    if isinstance(value, bool):
        value = str(value)
    if isinstance(value, int):
        items: Iterable[Any] = [value]
    elif isinstance(value, (list, tuple)):
        items = value
    else:
        items = [p for p in str(value).replace(" ", "").split(",")]
    cores: set[int] = set()
    for item in items:
        s = str(item)
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", s)
        if not m or (m.group(2) is not None and int(m.group(2)) < int(m.group(1))):
            raise BadInputError(
                f"bad cores value {value!r} in {where}: write core ids and ranges like 0-3 or 0,2 or 0-1,4",
                hint="`nproc` or `lscpu` shows this machine's cores",
            )
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        cores.update(range(lo, hi + 1))
    if not cores:
        raise BadInputError(f"empty cores value in {where}", hint="e.g. cores=0-1")
    return tuple(sorted(cores))


def _format_cores(cores: Iterable[int]) -> str:
    runs: list[list[int]] = []
    for c in sorted(cores):
        if runs and c == runs[-1][1] + 1:
            runs[-1][1] = c
        else:
            runs.append([c, c])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def _measure_config(value: Any, where: str) -> MeasureConfig:
    if isinstance(value, MeasureConfig):
        return value
    if not isinstance(value, Mapping):
        raise BadInputError(f"`measure` in {where} must be a mapping of MeasureConfig fields, got {value!r}")
    names = [f.name for f in fields(MeasureConfig)]
    for k in value:
        if k not in names:
            raise _unknown_key(str(k), names, "measure setting", where)
    from nagkit.devices.measure import validate_config

    return validate_config(MeasureConfig(**dict(value)))  # keys were checked above


def _unknown_key(key: str, valid: Iterable[str], what: str, where: str) -> BadInputError:
    valid = sorted(valid)
    msg = f"unknown {what} {key!r} in {where}"
    if dym := did_you_mean(key, valid, n=2, cutoff=0.5):
        msg += f"; {dym}"
    msg += f" Valid: {', '.join(valid)}"
    return BadInputError(msg, hint=HINT)


def _freeze(opts: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    out = []
    for k in sorted(opts):
        v = opts[k]
        if isinstance(v, list):
            v = tuple(v)
        elif isinstance(v, dict):
            v = tuple(sorted(v.items()))
        out.append((k, v))
    return tuple(out)


# --------------------------------------------------------------------------- profiles


def profile_dirs() -> list[Path]:
    """Where profile names are looked up: $NAGKIT_PROFILE_PATH, ./device_profiles, then the
    ``device_profiles/`` shipped beside the nagkit package."""
    dirs = [Path(p) for p in os.environ.get(PROFILE_ENV, "").split(os.pathsep) if p]
    dirs.append(Path.cwd() / "device_profiles")
    dirs.append(Path(__file__).resolve().parents[2] / "device_profiles")
    seen, out = set(), []
    for d in dirs:
        key = d.resolve() if d.exists() else d
        if key not in seen:
            seen.add(key)
            out.append(d)
    return out


def _looks_like_path(text: str) -> bool:
    return text.endswith((".yaml", ".yml")) or os.sep in text or "/" in text


def find_profile(text: str) -> Path | None:
    """The profile file a spec names (a path, or a name in :func:`profile_dirs`), or None."""
    if _looks_like_path(text):
        p = Path(text).expanduser()
        return p if p.is_file() else None
    if not re.fullmatch(r"[A-Za-z0-9._\-]+", text):
        return None
    for d in profile_dirs():
        for ext in (".yaml", ".yml"):
            p = d / f"{text}{ext}"
            if p.is_file():
                return p
    return None


def profile_names() -> list[str]:
    names = set()
    for d in profile_dirs():
        if d.is_dir():
            names.update(p.stem for p in d.iterdir() if p.suffix in (".yaml", ".yml"))
    return sorted(names)


def load_profile(path: str | os.PathLike) -> DeviceSpec:
    """Read and check a profile; returns its spec with the profile's options applied."""
    import yaml

    path = Path(path)
    where = f"profile {str(path)!r}"
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as e:
        raise BadInputError(f"{where} is not valid YAML: {e}", hint="fix the file") from e
    except OSError as e:
        raise BadInputError(f"cannot read {where}: {e}") from e
    if not isinstance(data, dict):
        raise BadInputError(f"{where} must be a YAML mapping with a `device:` key, got {type(data).__name__}",
                            hint="see device_profiles/cpu-litert-1t.yaml for an example")
    if "device" not in data or not isinstance(data["device"], str):
        raise BadInputError(f"{where} has no `device:` spec (e.g. `device: cpu` or `device: adb:SERIAL`)",
                            hint="see device_profiles/cpu-litert-1t.yaml for an example")
    base_text = data["device"].strip()
    if find_profile(base_text) is not None and base_text.partition(":")[0] not in ("cpu", "cuda", "adb"):
        raise BadInputError(f"{where}: `device: {base_text}` names another profile; profiles do not nest",
                            hint="use a spec such as cpu, cuda:0 or adb:SERIAL")
    base = parse_device_spec(base_text)
    allowed = set(PROFILE_COMMON_KEYS) | set(_profile_keys(base.kind))
    for key in data:
        if key not in allowed:
            raise _unknown_key(str(key), allowed, "profile key", where)
    extra = {k: v for k, v in data.items() if k not in ("name", "description", "notes", "device")}
    spec = base.with_options(**extra) if extra else base
    desc = str(data["description"]).strip() if data.get("description") else None
    return replace(spec, source=path.stem, profile=str(path), description=desc)


def _profile_keys(kind: str) -> tuple[str, ...]:
    if kind in KIND_KEYS:
        return KIND_KEYS[kind]
    if kind == "adb":
        try:
            mod = importlib.import_module("nagkit.devices.adb")
        except ImportError:
            return ADB_DEFAULT_KEYS
        return tuple(getattr(mod, "PROFILE_KEYS", ADB_DEFAULT_KEYS))
    return ()


# --------------------------------------------------------------------------- plugins


def _entry_points() -> dict[str, Any]:
    from importlib.metadata import entry_points

    out: dict[str, Any] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name in ("cpu", "cuda", "adb"):
            log.warning("ignoring the %s entry point %r (%s): it shadows a built-in device",
                        ENTRY_POINT_GROUP, ep.name, ep.value)
            continue
        out.setdefault(ep.name, ep)
    return out


def plugin_names() -> list[str]:
    return sorted(_entry_points())


def _plugin_for(text: str) -> str | None:
    eps = _entry_points()
    head = text.partition(":")[0]
    return head if head in eps else None


def _load_plugin(name: str) -> Callable[..., Device]:
    ep = _entry_points()[name]
    try:
        return ep.load()
    except Exception as e:
        raise DeviceError(f"device plugin {name!r} ({ep.value}) failed to load: {type(e).__name__}: {e}",
                          hint="reinstall the package that provides it") from e


# --------------------------------------------------------------------------- factory


def get_device(spec: str | DeviceSpec, **overrides: Any) -> Device:
    """A ready device for ``spec``. ``overrides`` (e.g. ``threads=4``, ``measure=cfg``) win
    over the spec and profile; ``None`` values are ignored."""
    ds = spec if isinstance(spec, DeviceSpec) else parse_device_spec(spec)
    if ds.kind == "cpu":
        from nagkit.devices.cpu import CpuDevice

        return CpuDevice(ds.with_options(**overrides))
    if ds.kind == "cuda":
        from nagkit.devices.cuda import CudaDevice

        return CudaDevice(ds.with_options(**overrides))
    if ds.kind == "adb":
        ds = ds.with_options(**overrides)
        try:
            adb = importlib.import_module("nagkit.devices.adb")
        except ImportError as e:
            raise DeviceError(f"the adb device is not available in this build: {e}",
                              hint="pip install adb-shell (make setup installs it)") from e
        opts = {k: list(v) if isinstance(v, tuple) else v for k, v in ds.opts.items()}  # e.g. extra_args
        return adb.create_adb_device(ds.target, opts or None)
    factory = _load_plugin(ds.kind)
    given = {k: v for k, v in overrides.items() if v is not None}
    try:
        dev = factory(ds.source, **given) if given else factory(ds.source)
    except NagkitError:
        raise
    except Exception as e:
        raise DeviceError(f"device plugin {ds.kind!r} failed for {ds.source!r}: {type(e).__name__}: {e}") from e
    if not isinstance(dev, Device):
        raise DeviceError(f"device plugin {ds.kind!r} returned {type(dev).__name__}, which is not a Device "
                          "(needs spec, kind, model_format, info, runtime_info, measure, close)")
    return dev


# --------------------------------------------------------------------------- listing


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
        shadowed = name.partition(":")[0] in ("cpu", "cuda", "adb") or name in _entry_points()
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
    for name, ep in sorted(_entry_points().items()):
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
