"""The loopback device's file system: a sandbox folder that stands in for the phone's.

Device paths under ``/data``, ``/sdcard`` and ``/storage`` map to the same paths under the
sandbox folder, both for file transfer (``sync:``) and inside shell commands (where those
path prefixes are rewritten). Any other absolute path in a shell command is this machine's
own (``/sys``, ``/proc``, ``/bin``), so the device facts read there are the host's.

``.nagkit-loopback/bin`` (first on the shell's ``PATH``) holds **mocks of the phone's
tools**, clearly labelled as loopback stand-ins in their own text:

* ``getprop`` - prints properties from ``.nagkit-loopback/build.prop``;
* ``taskset`` - applies the CPU mask intersected with this host's CPUs, then runs the command;
* ``dumpsys`` - ``dumpsys thermalservice`` prints ``Thermal Status: N`` from
  ``.nagkit-loopback/thermal_status`` (tests raise it to exercise cool-down).

The ``benchmark_model`` stand-in (LiteRT on the host CPU, real output format) is written by
:func:`write_benchmark_runner` and pushed like the real binary.
"""

from __future__ import annotations

import os
import platform
import re
import stat
import sys
from pathlib import Path

from nagkit.errors import DeviceError

DEVICE_ROOTS = ("data", "sdcard", "storage")
_ROOT_RE = re.compile(r"(?<![\w.~/-])/(" + "|".join(DEVICE_ROOTS) + r")(?=[/\s'\";|&)]|$)")
STATE = ".nagkit-loopback"
RUNNER_PATH = "/data/local/tmp/nagkit/benchmark_model"  # where AdbDevice looks by default

_GETPROP = """#!/bin/sh
# nagkit loopback stand-in for Android's getprop: a MOCK for tests, not the phone's tool.
# Reads KEY=VALUE lines from $NAGKIT_LOOPBACK_SANDBOX/.nagkit-loopback/build.prop.
f="$NAGKIT_LOOPBACK_SANDBOX/.nagkit-loopback/build.prop"
if [ $# -eq 0 ]; then
  sed -n 's/^\\([^=#][^=]*\\)=\\(.*\\)$/[\\1]: [\\2]/p' "$f"
else
  grep -m1 "^$1=" "$f" | cut -d= -f2-
  exit 0
fi
"""

_TASKSET = """#!{python}
# nagkit loopback stand-in for Android's toybox taskset: a MOCK for tests.
# Usage: taskset MASK COMMAND [ARGS...]. Applies MASK intersected with this host's CPUs
# (all of the host's CPUs if the intersection is empty, with a note on stderr).
import os, sys
if len(sys.argv) < 3:
    sys.stderr.write("usage: taskset MASK COMMAND [ARGS...]\\n"); sys.exit(1)
try:
    mask = int(sys.argv[1], 16)
except ValueError:
    sys.stderr.write("taskset: bad mask %r\\n" % sys.argv[1]); sys.exit(1)
allowed = os.sched_getaffinity(0)
cpus = {{i for i in range(mask.bit_length()) if mask >> i & 1}} & allowed
if not cpus:
    sys.stderr.write("taskset (loopback stand-in): mask %s selects none of this host's CPUs %s; using all\\n"
                     % (sys.argv[1], sorted(allowed)))
    cpus = allowed
os.sched_setaffinity(0, cpus)
try:
    os.execvp(sys.argv[2], sys.argv[2:])
except OSError as e:
    sys.stderr.write("taskset: %s: %s\\n" % (sys.argv[2], e.strerror)); sys.exit(127)
"""

_DUMPSYS = """#!/bin/sh
# nagkit loopback stand-in for Android's dumpsys: a MOCK for tests.
# Only `dumpsys thermalservice` is known; the status comes from .nagkit-loopback/thermal_status.
if [ "$1" = thermalservice ]; then
  s=$(cat "$NAGKIT_LOOPBACK_SANDBOX/.nagkit-loopback/thermal_status" 2>/dev/null || echo 0)
  echo "IsStatusOverride: false"
  echo "Thermal Status: $s"
else
  echo "Can't find service: $1"
fi
"""

_RUNNER = """#!{python}
# nagkit loopback stand-in for TensorFlow Lite's benchmark_model: a MOCK of the phone's
# binary that runs the .tflite with LiteRT on this host's CPU and prints the real format.
from nagkit.devices.loopback.runner import main
raise SystemExit(main())
"""


class SandboxError(DeviceError):
    """A device path that would leave the loopback sandbox."""


def write_benchmark_runner(path: str | os.PathLike) -> Path:
    """Write the ``benchmark_model`` stand-in (an executable script) to ``path``; push it as
    the benchmark binary of a loopback device profile."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(_RUNNER.format(python=sys.executable))
    path.chmod(0o755)
    return path


def _host_cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


class Sandbox:
    def __init__(self, root: Path):
        self.root = Path(root).resolve()
        if not re.fullmatch(r"[\w./+-]+", str(self.root)):
            raise SandboxError(f"loopback sandbox path {str(self.root)!r} must be shell-safe "
                               "(letters, digits, . _ - + /), because device paths are rewritten into commands")
        self.state = self.root / STATE

    def prepare(self, install_runner: bool = True) -> Sandbox:
        """Create the folders and stand-ins; with ``install_runner`` the benchmark_model
        stand-in is pre-placed at :data:`RUNNER_PATH` (so a profile needs no binary)."""
        for d in ("data/local/tmp", "sdcard", f"{STATE}/bin"):
            (self.root / d).mkdir(parents=True, exist_ok=True)
        tools = {"getprop": _GETPROP, "taskset": _TASKSET.format(python=sys.executable), "dumpsys": _DUMPSYS}
        for name, text in tools.items():
            p = self.state / "bin" / name
            p.write_text(text)
            p.chmod(0o755)
        prop = self.state / "build.prop"
        if not prop.exists():
            props = {
                "ro.product.name": "nagkit_loopback",
                "ro.product.model": "nagkit-loopback",
                "ro.product.device": "loopback",
                "ro.product.manufacturer": "nagkit",
                "ro.soc.model": _host_cpu_name(),
                "ro.board.platform": platform.machine(),
                "ro.build.version.release": "loopback",
                "ro.build.version.sdk": "0",
                "ro.product.cpu.abi": platform.machine(),
            }
            prop.write_text("# loopback device properties (edit freely in tests)\n"
                            + "".join(f"{k}={v}\n" for k, v in props.items()))
        if not (self.state / "thermal_status").exists():
            self.set_thermal_status(0)
        if install_runner:
            runner = self.root / RUNNER_PATH.lstrip("/")
            if not runner.exists():
                write_benchmark_runner(runner)
        return self

    def set_time_scale(self, scale: float) -> None:
        """Make the benchmark_model stand-in spend ``scale`` times the seconds its flags ask for
        (``--min_secs``, ``--warmup_min_secs``): a quick stand-in for tests that time many models.
        The counts (``--num_runs``, ``--warmup_runs``) still hold."""
        if not scale > 0:
            raise SandboxError(f"time scale must be > 0, got {scale!r}")
        tmp = self.state / ".time_scale.tmp"
        tmp.write_text(f"{float(scale)!r}\n")
        os.replace(tmp, self.state / "time_scale")

    def set_thermal_status(self, status: int) -> None:
        tmp = self.state / ".thermal_status.tmp"
        tmp.write_text(f"{int(status)}\n")
        os.replace(tmp, self.state / "thermal_status")

    def props(self) -> dict[str, str]:
        out: dict[str, str] = {}
        p = self.state / "build.prop"
        if p.exists():
            for line in p.read_text().splitlines():
                if "=" in line and not line.startswith("#"):
                    k, v = line.split("=", 1)
                    out[k.strip()] = v.strip()
        return out

    def resolve(self, device_path: str) -> str:
        """The host path for a device path; refuses anything that ends up outside the sandbox."""
        if "\0" in device_path:
            raise SandboxError(f"NUL byte in device path {device_path!r}")
        rel = device_path.lstrip("/")
        real = os.path.realpath(os.path.join(self.root, rel))
        if real != str(self.root) and not real.startswith(str(self.root) + os.sep):
            raise SandboxError(f"device path {device_path!r} leaves the loopback sandbox {self.root}")
        return real

    def rewrite_command(self, command: str) -> str:
        """Map ``/data``, ``/sdcard`` and ``/storage`` in a shell command into the sandbox."""
        if re.search(r"(?<![\w.~/-])/(" + "|".join(DEVICE_ROOTS) + r")/(?:[^\s'\";|&]*/)?\.\.(?:/|\s|$)", command):
            raise SandboxError("'..' in a device path is not allowed on the loopback device")
        return _ROOT_RE.sub(lambda m: f"{self.root}/{m.group(1)}", command)

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k in ("LANG", "LC_ALL", "TMPDIR", "HOME", "USER")}
        env["PATH"] = f"{self.state / 'bin'}:/usr/local/bin:/usr/bin:/bin"
        env["NAGKIT_LOOPBACK_SANDBOX"] = str(self.root)
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env["PYTHONPATH"] = str(Path(__file__).resolve().parents[3])  # this nagkit, for the stand-ins
        return env


def is_executable(path: Path) -> bool:
    return path.is_file() and bool(path.stat().st_mode & stat.S_IXUSR)
