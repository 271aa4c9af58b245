"""``AdbDevice``: TFLite models timed on an Android phone with ``benchmark_model`` over ADB.

Transport (:mod:`.connect` picks the adb server, :mod:`.server`, or adb-shell, :mod:`.transport`)
+ runner (``benchmark_model`` pinned with ``taskset``) + parser
(:mod:`nagkit.devices.benchmark_model`). :meth:`AdbDevice.prepare` contacts the phone and makes
sure ``benchmark_model`` is there (pushing the one named by ``benchmark_binary``) before any
work, so a missing phone or binary fails in seconds. Models are pushed once, cached on the
device under their sha256. When the phone's thermal status is raised (``dumpsys thermalservice``) the run
waits for it to cool down (bounded) and is retried.
"""

from __future__ import annotations

import logging
import os
import re
import shlex
import time
from pathlib import Path
from typing import Any

from nagkit.devices.adb.connect import MODES, open_transport
from nagkit.devices.adb.transport import AdbTransport, quote_command
from nagkit.devices.base import LatencyStats, MeasureConfig
from nagkit.io import input_file, sha256_file
from nagkit.errors import BadInputError, DeviceError, did_you_mean, short_repr
from nagkit.runtimes.threads import MAX_THREADS

log = logging.getLogger(__name__)

REMOTE_DIR = "/data/local/tmp/nagkit"

#: Every key an ADB device profile may set, with its default.
DEFAULTS: dict[str, Any] = {
    "taskset": None,  # hex CPU mask for `taskset`, e.g. "f0" = CPUs 4-7 (big cores on most phones)
    "threads": 1,  # --num_threads
    "benchmark_binary": None,  # local benchmark_model to push; None: it is already at benchmark_remote
    "benchmark_remote": f"{REMOTE_DIR}/benchmark_model",
    "remote_dir": REMOTE_DIR,  # models go to REMOTE_DIR/models/<sha256>.tflite
    "num_runs": 50,  # --num_runs (minimum number of timed runs)
    "warmup_runs": 5,  # --warmup_runs
    "min_secs": 1.0,  # --min_secs (minimum timed duration)
    "warmup_min_secs": 0.5,  # --warmup_min_secs
    "max_secs": 150.0,  # --max_secs
    "use_xnnpack": True,  # --use_xnnpack
    "extra_args": [],  # more benchmark_model flags, e.g. ["--use_gpu=true"]
    "thermal_max_status": 2,  # cool down at or above this Android thermal status (2 = MODERATE)
    "cooldown_poll_s": 10.0,  # seconds between thermal checks while cooling down
    "cooldown_max_s": 300.0,  # give up cooling down after this long
    "thermal_retries": 2,  # re-measure this often when the phone got hot during a run
    "adb_key": None,  # ADB private key; default ~/.android/adbkey (created if missing)
    "adb_transport": "auto",  # auto | server | adb-shell (nagkit.devices.adb.connect)
    "connect_timeout_s": 10.0,
    "reconnect_retries": 3,  # reconnect-and-retry attempts when the device drops
    "run_timeout_s": 600.0,  # one benchmark_model run
}
#: How to get TensorFlow Lite's benchmark_model onto a phone (the fix when it is missing).
BINARY_HINT = ("download android_aarch64_benchmark_model (LiteRT/TensorFlow Lite performance page: "
               "https://ai.google.dev/edge/litert/models/measurement) and pass --benchmark-binary PATH "
               "(it is pushed once), or set benchmark_binary in the device profile")
#: Keys a profile file may carry for the registry; ignored here.
META_KEYS = {"name", "device", "spec", "description", "kind", "transport", "runtime", "serial", "notes"}
THERMAL_NAMES = ["NONE", "LIGHT", "MODERATE", "SEVERE", "CRITICAL", "EMERGENCY", "SHUTDOWN"]

_CPU_FACTS = ("cd /sys/devices/system/cpu 2>/dev/null && for c in cpu[0-9]*; do "
              "echo \"$c $(cat $c/cpufreq/scaling_governor 2>/dev/null || echo -) "
              "$(cat $c/cpufreq/scaling_cur_freq 2>/dev/null || echo -) "
              "$(cat $c/cpufreq/cpuinfo_max_freq 2>/dev/null || echo -)\"; done")
_ZONE_TEMPS = "cat /sys/class/thermal/thermal_zone*/temp 2>/dev/null"


#: What the registry may pass: the keys above plus ``runtime`` (informational) and ``measure``
#: (a MeasureConfig or a dict of its fields: the default when ``measure()`` gets no cfg).
PROFILE_KEYS = (*sorted(DEFAULTS), "runtime", "measure")


def _coerce(key: str, val: Any) -> Any:
    """Values from a spec string arrive as text; convert them to the default's type."""
    default = DEFAULTS[key]
    if not isinstance(val, str):
        return val
    v = val.strip()
    try:
        if isinstance(default, bool):
            if v.lower() in ("1", "true", "yes", "on"):
                return True
            if v.lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError(v)
        if isinstance(default, int):
            return int(v, 10)
        if isinstance(default, float):
            return float(v)
    except ValueError:
        raise BadInputError(f"ADB profile key {key!r}: {short_repr(val)} is not a {type(default).__name__}") from None
    if isinstance(default, list):
        return v.split()
    return v


def validate_profile(profile: dict[str, Any] | None) -> dict[str, Any]:
    """The profile merged over :data:`DEFAULTS`; unknown keys and bad values raise."""
    out = dict(DEFAULTS)
    out["measure"] = None
    for key, val in (profile or {}).items():
        if key == "measure":
            out["measure"] = _measure_config(val)
            continue
        if key in META_KEYS:
            continue
        if key not in DEFAULTS:
            dym = did_you_mean(key, DEFAULTS)
            raise BadInputError(f"unknown ADB profile key {short_repr(key)}" + (f"; {dym}" if dym else "")
                                + f" Valid keys: {', '.join(sorted(DEFAULTS))}",
                                hint="see device_profiles/README.md")
        out[key] = _coerce(key, val)
    mask = out["taskset"]
    if mask is not None:
        mask = str(mask).lower().removeprefix("0x")
        if not re.fullmatch(r"[0-9a-f]{1,16}", mask) or int(mask, 16) == 0:
            raise BadInputError(f"bad taskset mask {short_repr(out['taskset'])}: a non-zero hex CPU mask such as 'f0' "
                                "(CPUs 4-7) or '0f' (CPUs 0-3)")
        out["taskset"] = mask
    for key in ("threads", "num_runs", "warmup_runs", "thermal_max_status", "thermal_retries", "reconnect_retries"):
        if not isinstance(out[key], int) or isinstance(out[key], bool) or out[key] < 0:
            raise BadInputError(f"ADB profile key {key!r} must be a non-negative integer, got {short_repr(out[key])}")
    if not 1 <= out["threads"] <= MAX_THREADS:  # issue 13 D12
        raise BadInputError(f"ADB profile 'threads' must be in 1..{MAX_THREADS}, got {short_repr(out['threads'])}")
    for key in ("remote_dir", "benchmark_remote"):
        if not str(out[key]).startswith("/"):
            raise BadInputError(f"ADB profile {key!r} must be an absolute device path, got {short_repr(out[key])}")
    if not isinstance(out["extra_args"], (list, tuple)):
        raise BadInputError(f"ADB profile 'extra_args' must be a list of flags, got {short_repr(out['extra_args'])}")
    if out["adb_transport"] not in MODES:
        raise BadInputError(f"ADB profile 'adb_transport' must be one of {', '.join(MODES)}, got {short_repr(out['adb_transport'])}")
    if out["adb_key"] is not None:
        out["adb_key"] = os.path.expanduser(str(out["adb_key"]))
    if out["benchmark_binary"] is not None:
        out["benchmark_binary"] = str(Path(os.path.expanduser(str(out["benchmark_binary"]))))
    return out


def _measure_config(val: Any) -> MeasureConfig | None:
    if val is None or isinstance(val, MeasureConfig):
        return val
    if not isinstance(val, dict):
        raise BadInputError(f"ADB profile 'measure' must be a mapping of MeasureConfig fields, got {short_repr(val)}")
    try:
        return MeasureConfig(**val)
    except TypeError as e:
        raise BadInputError(f"ADB profile 'measure': {e}; fields: {', '.join(MeasureConfig().to_dict())}") from None


_sha256 = sha256_file


class AdbDevice:
    """An Android phone (or the loopback device) reached over ADB; ``model_format`` 'tflite'."""

    kind = "adb"
    model_format = "tflite"
    runs_on_host = False  # the phone measures: the host may convert models meanwhile
    default_time_budget_s = None  # no budget unless told: the plan does not model the pipelined conversions

    def __init__(self, target: str, profile: dict[str, Any] | None = None, *, transport: AdbTransport | None = None):
        self.profile = validate_profile(profile)
        self.target = target
        self.spec = f"adb:{target}"
        self.transport = transport or open_transport(target, self.profile)
        self._binary_ready = False
        self._binary_sha: str | None = None
        self._pushed: dict[str, str] = {}  # sha256 -> remote path
        self._sha_cache: dict[tuple[str, int, int], str] = {}
        self.last_result = None  # the BenchmarkResult of the last measure()
        self.cooldowns: list[float] = []  # seconds spent cooling down, per cool-down

    # ------------------------------------------------------------------ facts
    def info(self) -> dict[str, Any]:
        props = self._getprops()
        cpus = []
        for line in self.transport.shell_line(_CPU_FACTS, check=False).output.splitlines():
            parts = line.split()
            if len(parts) == 4 and parts[0].startswith("cpu"):
                cpus.append({"cpu": parts[0], "governor": None if parts[1] == "-" else parts[1],
                             "cur_khz": int(parts[2]) if parts[2].isdigit() else None,
                             "max_khz": int(parts[3]) if parts[3].isdigit() else None})
        governors = {c["governor"] for c in cpus if c["governor"]}
        status = self.thermal_status()
        release = props.get("ro.build.version.release")
        return {
            "kind": "adb",
            "transport": self.transport.kind,
            "target": self.target,
            "os": f"Android {release}" if release else None,
            "model": props.get("ro.product.model"),
            "manufacturer": props.get("ro.product.manufacturer"),
            "soc": props.get("ro.soc.model") or props.get("ro.board.platform") or props.get("ro.hardware"),
            "board_platform": props.get("ro.board.platform"),
            "android": props.get("ro.build.version.release"),
            "sdk": props.get("ro.build.version.sdk"),
            "abi": props.get("ro.product.cpu.abi"),
            "governor": (governors.pop() if len(governors) == 1 else ("mixed" if governors else None)),
            "cpus": cpus,
            "thermal_status": status,
            "thermal_status_name": THERMAL_NAMES[status] if status is not None and status < len(THERMAL_NAMES)
            else None,
            "max_zone_temp_c": self._max_zone_temp(),
        }

    def runtime_info(self) -> dict[str, Any]:
        from nagkit.devices.benchmark_model import median_basis

        p = self.profile
        basis = median_basis(self.last_result) if self.last_result is not None else None
        return {"name": "tflite-benchmark_model", "binary": p["benchmark_remote"], "binary_sha256": self._binary_sha,
                "threads": p["threads"], "taskset": p["taskset"],
                "delegate": "xnnpack" if p["use_xnnpack"] else "none", "extra_args": list(p["extra_args"]),
                "statistics": "benchmark_model summary statistics, no samples: median = "
                              + {"p50": "its printed median", "avg": "its average (no median printed)",
                                 None: "its median if printed, else its average"}[basis]
                              + "; p10/p90 estimated from p5/p50/p95 or from the std"}

    def _getprops(self) -> dict[str, str]:
        out = self.transport.shell(["getprop"], check=False).output
        return {m.group(1): m.group(2) for m in re.finditer(r"^\[([^\]]+)\]: \[(.*)\]\s*$", out, re.M)}

    def thermal_status(self) -> int | None:
        """Android's thermal status (0 NONE .. 6 SHUTDOWN), or None where it cannot be read."""
        res = self.transport.shell(["dumpsys", "thermalservice"], check=False)
        m = re.search(r"Thermal Status:\s*(\d+)", res.output)
        return int(m.group(1)) if m else None

    def _max_zone_temp(self) -> float | None:
        temps = [int(t) for t in self.transport.shell_line(_ZONE_TEMPS, check=False).output.split()
                 if t.lstrip("-").isdigit()]
        if not temps:
            return None
        t = max(temps)
        return t / 1000.0 if t > 1000 else float(t)

    # ------------------------------------------------------------------ files
    def _file_sha(self, path: Path) -> str:
        st = path.stat()
        key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
        if key not in self._sha_cache:
            self._sha_cache[key] = _sha256(path)
        return self._sha_cache[key]

    def prepare(self) -> dict[str, Any]:
        """Contact the phone and make sure it can measure (``benchmark_model`` present, pushed
        from ``benchmark_binary`` when given); its facts (:meth:`info`). Fails in seconds, before
        any conversion, when the phone is unreachable, unauthorised or lacks the binary."""
        self.transport.connect()
        self._ensure_binary()
        return self.info()

    def _ensure_binary(self) -> None:
        if self._binary_ready:
            return
        p = self.profile
        remote = p["benchmark_remote"]
        if p["benchmark_binary"]:
            local = input_file(p["benchmark_binary"], "benchmark binary", hint=BINARY_HINT)
            self._binary_sha = sha = self._file_sha(local)
            marker = f"{remote}.sha256"
            _, size, _ = self.transport.stat(remote)
            on_device = self.transport.shell(["cat", marker], check=False).output.strip()
            if size != local.stat().st_size or on_device != sha:
                self.transport.push(local, remote, mode=0o755)
                self.transport.shell_line(f"echo {sha} > {shlex.quote(marker)}")
        else:
            mode, _, _ = self.transport.stat(remote)
            if not mode:
                raise DeviceError(f"{self.spec} has no benchmark_model at {remote} and none was given to push",
                                  hint=BINARY_HINT)
        self.transport.shell(["chmod", "755", remote])
        self._binary_ready = True

    def push_model(self, model_path: str | os.PathLike) -> str:
        """Push a model once; returns its device path (named by its sha256)."""
        local = input_file(model_path, "model file", hint="export it first, e.g. `nagkit export --format tflite`")
        if local.suffix != ".tflite":
            raise BadInputError(f"ADB devices run TFLite models; got {local.name!r}",
                                hint="export with nagkit.runtimes.convert.to_tflite or `nagkit export --format tflite`")
        sha = self._file_sha(local)
        if sha in self._pushed:
            return self._pushed[sha]
        remote = f"{self.profile['remote_dir']}/models/{sha[:32]}.tflite"
        _, size, _ = self.transport.stat(remote)
        if size != local.stat().st_size:
            self.transport.push(local, remote, mode=0o644)
        self._pushed[sha] = remote
        return remote

    # ------------------------------------------------------------------ measuring
    def benchmark_command(self, remote_model: str, cfg: MeasureConfig | None = None) -> str:
        p = self.profile
        cfg = cfg or p["measure"]
        if cfg is None:
            runs, warm, secs, warm_secs, max_secs = (p["num_runs"], p["warmup_runs"], p["min_secs"],
                                                     p["warmup_min_secs"], p["max_secs"])
        else:
            runs, warm, secs, warm_secs, max_secs = (cfg.min_runs, cfg.warmup_runs, cfg.min_time_s, cfg.warmup_s,
                                                     cfg.max_time_s)
        argv: list[str] = ["taskset", p["taskset"]] if p["taskset"] else []
        argv += [p["benchmark_remote"], f"--graph={remote_model}", f"--num_threads={p['threads']}",
                 f"--num_runs={runs}", f"--warmup_runs={warm}", f"--min_secs={secs:g}",
                 f"--warmup_min_secs={warm_secs:g}", f"--max_secs={max_secs:g}",
                 f"--use_xnnpack={'true' if p['use_xnnpack'] else 'false'}", *map(str, p["extra_args"])]
        return quote_command(argv)

    def cool_down(self) -> float:
        """Wait while the thermal status is at or above ``thermal_max_status``; seconds waited."""
        p = self.profile
        start = time.monotonic()
        status = self.thermal_status()
        while status is not None and status >= p["thermal_max_status"]:
            waited = time.monotonic() - start
            if waited >= p["cooldown_max_s"]:
                raise DeviceError(
                    f"device {self.target} stayed at thermal status {status} ({THERMAL_NAMES[min(status, 6)]}) for "
                    f"{waited:.0f} s of cool-down", hint="let the phone cool (screen off, unplugged from the charger) "
                    "or raise thermal_max_status / cooldown_max_s in the device profile")
            log.warning("device %s thermal status %d >= %d; cooling down %.0f s", self.target, status,
                        p["thermal_max_status"], p["cooldown_poll_s"])
            time.sleep(p["cooldown_poll_s"])
            status = self.thermal_status()
        waited = time.monotonic() - start
        if waited > 0.5:
            self.cooldowns.append(waited)
        return waited

    def measure(self, model: str | os.PathLike, input_shape: tuple[int, ...] | None = None,
                cfg: MeasureConfig | None = None) -> LatencyStats:
        """Time one ``.tflite`` with ``benchmark_model``. ``input_shape`` is informational (TFLite
        models carry static shapes)."""
        from nagkit.devices.benchmark_model import parse_benchmark_output, to_latency_stats

        self._ensure_binary()
        remote = self.push_model(model)
        line = self.benchmark_command(remote, cfg)
        for attempt in range(self.profile["thermal_retries"] + 1):
            self.cool_down()
            res = self.transport.shell_line(line, timeout_s=self.profile["run_timeout_s"], check=False)
            result = parse_benchmark_output(res.output)  # raises ProfileParseError quoting the output
            if res.rc != 0:
                raise DeviceError(f"benchmark_model exited {res.rc} on {self.target} although it printed timings",
                                  hint=f"run it by hand: adb -s {self.target} shell {line}")
            status = self.thermal_status()
            if status is None or status < self.profile["thermal_max_status"]:
                break
            if attempt == self.profile["thermal_retries"]:
                raise DeviceError(f"device {self.target} reached thermal status {status} during every one of "
                                  f"{attempt + 1} runs of {Path(model).name}",
                                  hint="cool the phone or raise thermal_max_status in the device profile")
            log.warning("device %s got hot (status %d) while measuring %s; re-measuring after cool-down",
                        self.target, status, Path(model).name)
        self.last_result = result
        cfg = cfg or self.profile["measure"]
        target_iqr = cfg.target_rel_iqr if cfg is not None else MeasureConfig().target_rel_iqr
        stats = to_latency_stats(result, target_rel_iqr=target_iqr)
        if stats.noisy:
            log.warning("noisy measurement of %s on %s: std %.3f ms at median %.3f ms", Path(model).name,
                        self.target, stats.std_ms, stats.median_ms)
        return stats

    def measure_many(self, models, cfg: MeasureConfig | None = None) -> list[LatencyStats]:
        """``measure`` over ``[(model_path, input_shape), ...]`` (or bare paths), in order."""
        out = []
        for item in models:
            path, shape = item if isinstance(item, tuple) else (item, None)
            out.append(self.measure(path, shape, cfg))
        return out

    def close(self) -> None:
        self.transport.close()

    def __enter__(self) -> AdbDevice:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def create_adb_device(target: str, profile: dict[str, Any] | None = None) -> AdbDevice:
    """The registry's entry point for ``adb:SERIAL`` and ``adb:HOST:PORT`` (``target`` is
    the part after ``adb:``). Connects lazily, on first use."""
    if target.startswith("adb:"):
        target = target[4:]
    return AdbDevice(target, profile)
