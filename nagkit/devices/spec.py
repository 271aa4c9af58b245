"""Device spec strings: parsing the built-in kinds, option values, :class:`DeviceSpec`.

Spec strings (also shown by ``nagkit devices``)::

    cpu                                   LiteRT (XNNPACK), 1 thread
    cpu:runtime=onnxruntime,threads=2     options: runtime=litert|onnxruntime|torch,
    cpu:torch,cores=0-1                   threads=N, cores=0-3 / 0,2 (a bare runtime name works)
    cuda  cuda:1  cuda:1,mode=eager       options: index (or a bare number), mode=graph|eager,
                                          window_ms=timing window of a graph-replay sample
    adb:SERIAL   adb:HOST:PORT            Android over ADB (USB serial or TCP address)

Profiles (:mod:`nagkit.devices.profiles`) and plugins (:mod:`nagkit.devices.plugins`) name
devices too; :func:`nagkit.devices.registry.parse_device_spec` reads every form. Nothing heavy
is imported here.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from nagkit.devices.base import MeasureConfig
from nagkit.errors import BadInputError, UnknownNameError, did_you_mean, short_repr
from nagkit.runtimes.threads import DEFAULT_THREADS, MAX_THREADS

HINT = "run `nagkit devices` to list reachable devices, runtimes and profiles"
BUILTIN_KINDS = ("cpu", "cuda", "adb")
CPU_RUNTIMES = ("litert", "onnxruntime", "torch")
CUDA_MODES = ("graph", "eager")
VALID_FORMS = (
    "cpu", "cpu:runtime=litert|onnxruntime|torch,threads=N,cores=0-1", "cuda", "cuda:N",
    "cuda:N,mode=graph|eager", "adb:SERIAL", "adb:HOST:PORT", "PROFILE_NAME", "path/to/profile.yaml",
)
#: Bounds of integer options (issue 13 D3, D12; threads: MAX_THREADS): a core id beyond these is
#: a typo or hostile (cores=0-99999999999 would build the whole range).
MAX_CUDA_INDEX = 1023
MAX_CORE = 8191  # Linux builds for at most 8,192 CPUs (CONFIG_NR_CPUS)
# Option keys each built-in kind takes (from a spec, a profile or get_device overrides).
KIND_KEYS: dict[str, tuple[str, ...]] = {
    "cpu": ("runtime", "threads", "cores"),
    "cuda": ("index", "mode", "window_ms"),
}


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
        opts.update(normalize_options(self.kind, given, where=f"options for {self.source or self.kind!r}"))
        new = replace(self, options=freeze_options(opts))
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
                parts.append(f"{k}={format_cores(v) if k == 'cores' else v}")
            return self.kind + (":" + ",".join(parts) if parts else "")
        if self.kind == "adb":
            return f"adb:{self.target}"
        return self.source or self.kind


# --------------------------------------------------------------------------- parsing


def _split_options(kind: str, text: str, rest: str) -> list[tuple[str | None, str]]:
    """``a=1,b=2,3`` -> [(a, 1), (b, "2,3")]: a token without '=' continues the previous value
    (core lists), or stands alone when it is the first token (a bare runtime or index)."""
    pairs: list[tuple[str | None, str]] = []
    for tok in rest.split(","):
        tok = tok.strip()
        if not tok:
            raise BadInputError(f"empty option in device spec {short_repr(text)}", hint=f"write e.g. {kind}:{_example(kind)}")
        if "=" in tok:
            k, _, v = tok.partition("=")
            pairs.append((k.strip(), v.strip()))
        elif pairs and pairs[-1][0] == "cores":
            pairs[-1] = ("cores", pairs[-1][1] + "," + tok)
        elif not pairs:
            pairs.append((None, tok))
        else:
            raise BadInputError(
                f"option {short_repr(tok)} in device spec {short_repr(text)} has no value; write key=value",
                hint=f"e.g. {kind}:{_example(kind)}",
            )
    return pairs


def _example(kind: str) -> str:
    return {"cpu": "runtime=onnxruntime,threads=2,cores=0-1", "cuda": "1,mode=eager",
            "adb": "SERIAL with `threads: 4` in a profile"}.get(kind, "")


def parse_cpu_spec(text: str) -> DeviceSpec:
    """``cpu[:options]``."""
    rest = text.partition(":")[2]
    opts: dict[str, Any] = {}
    if rest or text.endswith(":"):
        for k, v in _split_options("cpu", text, rest):
            if k is None:  # a bare runtime name: cpu:onnxruntime
                k = "runtime"
            if k in opts:
                raise BadInputError(f"option {short_repr(k)} given twice in device spec {short_repr(text)}", hint=HINT)
            opts[k] = v
    opts = normalize_options("cpu", opts, where=f"device spec {short_repr(text)}")
    opts.setdefault("runtime", "litert")
    opts.setdefault("threads", DEFAULT_THREADS)
    return DeviceSpec(kind="cpu", options=freeze_options(opts), source=text)


def parse_cuda_spec(text: str) -> DeviceSpec:
    """``cuda[:index][,options]``."""
    rest = text.partition(":")[2]
    opts: dict[str, Any] = {}
    if rest or text.endswith(":"):
        for k, v in _split_options("cuda", text, rest):
            if k is None:  # cuda:1
                k = "index"
            if k in opts:
                raise BadInputError(f"option {short_repr(k)} given twice in device spec {short_repr(text)}", hint=HINT)
            opts[k] = v
    opts = normalize_options("cuda", opts, where=f"device spec {short_repr(text)}")
    opts.setdefault("index", 0)
    opts.setdefault("mode", "graph")
    return DeviceSpec(kind="cuda", target=str(opts["index"]), options=freeze_options(opts), source=text)


_SERIAL_RE = re.compile(r"^[A-Za-z0-9._\-:\[\]]+$")


#: What the docs and the shipped android-typical profile write where a device goes.
ADB_PLACEHOLDERS = ("SERIAL", "HOST:PORT", "PHONE_IP:5555", "PHONE_IP:PORT", "<SERIAL>")


def parse_adb_spec(text: str) -> DeviceSpec:
    """``adb:SERIAL`` or ``adb:HOST:PORT``."""
    target = text.partition(":")[2].strip()
    if not target:
        raise BadInputError(
            f"device spec {short_repr(text)} names no device; write adb:SERIAL (USB) or adb:HOST:PORT (TCP)",
            hint="`adb devices` lists serials; " + HINT,
        )
    if target.upper() in ADB_PLACEHOLDERS:
        raise BadInputError(
            f"{text!r} is the placeholder from the docs, not a device: put your phone's serial there "
            "(USB, e.g. adb:R58M123ABC) or its address (Wi-Fi, e.g. adb:192.168.1.20:5555)",
            hint="`adb devices` lists the serials of attached phones; for Wi-Fi: `adb tcpip 5555`, then "
                 "adb:PHONE_IP:5555 (in a copied profile: edit its `device:` line)",
        )
    if not _SERIAL_RE.match(target):
        raise BadInputError(
            f"bad adb serial or address {short_repr(target)} in {short_repr(text)}: only letters, digits and . _ - : [ ] are allowed",
            hint="`adb devices` lists serials",
        )
    host, sep, port = target.rpartition(":")
    if sep and host and not (port.isascii() and port.isdigit() and len(port) <= 5):
        raise BadInputError(
            f"bad port {short_repr(port)} in {short_repr(text)}: write adb:HOST:PORT with a numeric port, e.g. adb:192.168.1.20:5555",
            hint=HINT,
        )
    if sep and host and not (0 < int(port) < 65536):
        raise BadInputError(f"port {port} in {short_repr(text)} is out of range 1-65535", hint=HINT)
    return DeviceSpec(kind="adb", target=target, source=text)


def adb_transport(target: str) -> str:
    """``"tcp"`` for HOST:PORT, else ``"usb"``."""
    host, sep, port = target.rpartition(":")
    return "tcp" if sep and host and port.isdigit() else "usb"


# --------------------------------------------------------------------------- option values


def normalize_options(kind: str, given: Mapping[str, Any], where: str) -> dict[str, Any]:
    """Check keys and convert values for a built-in kind (plugins and adb pass through)."""
    out: dict[str, Any] = {}
    valid = KIND_KEYS.get(kind)
    for key, value in given.items():
        if key == "measure":
            out[key] = measure_config(value, where)
            continue
        if valid is not None and key not in valid:
            raise unknown_key_error(key, (*valid, "measure"), f"{kind} option", where)
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
        lo, hi = (1, MAX_THREADS) if key == "threads" else (0, MAX_CUDA_INDEX)
        text = str(value).strip()
        ok = not isinstance(value, bool) and text.isascii() and text.isdigit() and len(text) <= 6
        n = int(text) if ok else None
        if n is None or not lo <= n <= hi:
            raise BadInputError(f"{key}={short_repr(value if isinstance(value, int) else text)} in {where}: "
                                f"must be an integer >= {lo} and <= {hi}", hint=f"e.g. {kind}:{_example(kind)}")
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
        except (TypeError, ValueError, OverflowError):
            f = -1.0
        if not (math.isfinite(f) and f > 0):
            raise BadInputError(f"window_ms={short_repr(value)} in {where}: must be a finite number > 0", hint="e.g. cuda:mode=graph,window_ms=2")
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
        # ASCII digits, at most 6 of them, checked against MAX_CORE before any range is built
        m = None if isinstance(item, bool) else re.fullmatch(r"(\d{1,6})(?:-(\d{1,6}))?", s, re.ASCII)
        lo = int(m.group(1)) if m else -1
        hi = int(m.group(2) or m.group(1)) if m else -1
        if not m or hi < lo or hi > MAX_CORE:
            raise BadInputError(
                f"bad cores value {short_repr(value)} in {where}: write core ids (0..{MAX_CORE}) and ranges like "
                "0-3 or 0,2 or 0-1,4", hint="`nproc` or `lscpu` shows this machine's cores",
            )
        cores.update(range(lo, hi + 1))
    if not cores:
        raise BadInputError(f"empty cores value in {where}", hint="e.g. cores=0-1")
    return tuple(sorted(cores))


def format_cores(cores: Iterable[int]) -> str:
    runs: list[list[int]] = []
    for c in sorted(cores):
        if runs and c == runs[-1][1] + 1:
            runs[-1][1] = c
        else:
            runs.append([c, c])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def measure_config(value: Any, where: str) -> MeasureConfig:
    if isinstance(value, MeasureConfig):
        return value
    if not isinstance(value, Mapping):
        raise BadInputError(f"`measure` in {where} must be a mapping of MeasureConfig fields, got {short_repr(value)}")
    names = [f.name for f in fields(MeasureConfig)]
    for k in value:
        if k not in names:
            raise unknown_key_error(str(k), names, "measure setting", where)
    from nagkit.devices.measure import validate_config

    return validate_config(MeasureConfig(**dict(value)))  # keys were checked above


def unknown_key_error(key: str, valid: Iterable[str], what: str, where: str) -> BadInputError:
    valid = sorted(valid)
    msg = f"unknown {what} {short_repr(key)} in {where}"
    if dym := did_you_mean(key, valid, n=2, cutoff=0.5):
        msg += f"; {dym}"
    msg += f" Valid: {', '.join(valid)}"
    return BadInputError(msg, hint=HINT)


def freeze_options(opts: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    out = []
    for k in sorted(opts):
        v = opts[k]
        if isinstance(v, list):
            v = tuple(v)
        elif isinstance(v, dict):
            v = tuple(sorted(v.items()))
        out.append((k, v))
    return tuple(out)
