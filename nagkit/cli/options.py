"""Click options defined once and reused by every command, plus output helpers.

Results go to stdout (``--json`` for machines); logs and progress go to stderr.
"""

from __future__ import annotations

import json
import logging
import math
import sys
from collections.abc import Callable
from typing import Any

import click

from nagkit.progress import phase_progress  # noqa: F401 - re-exported: (phase, done, total) progress lines


class FiniteFloat(click.ParamType):
    """A float option that refuses ``inf``, ``nan`` and (with ``positive``) numbers <= 0 at the
    CLI boundary, naming the bad value (issue 13 D10). ``click.FloatRange`` lets ``nan`` through."""

    name = "float"

    def __init__(self, positive: bool = False) -> None:
        self.positive = positive

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        from nagkit.errors import short_repr

        if isinstance(value, float) and math.isfinite(value) and (value > 0 or not self.positive):
            return value
        try:
            v = float(value)
        except (TypeError, ValueError, OverflowError):
            self.fail(f"{short_repr(value)} is not a number", param, ctx)
        if not math.isfinite(v):
            self.fail(f"{short_repr(value)} is not a finite number (inf and nan are refused)", param, ctx)
        if self.positive and v <= 0:
            self.fail(f"{short_repr(value)} must be > 0", param, ctx)
        return v


FINITE = FiniteFloat()
POSITIVE = FiniteFloat(positive=True)


class BoundedInt(click.ParamType):
    """An int option within [lo, hi], refused in one line otherwise (click's ``IntRange`` has no
    upper bound by default, and ``int('9' * 5000)`` raises a multi-line ``ValueError``)."""

    name = "integer"

    def __init__(self, lo: int, hi: int) -> None:
        self.lo, self.hi = lo, hi

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        from nagkit.errors import short_repr

        if isinstance(value, int) and not isinstance(value, bool):
            v = value
        else:
            text = str(value).strip()
            if not (text.lstrip("+-").isascii() and text.lstrip("+-").isdigit()) or len(text) > 30:
                self.fail(f"{short_repr(value)} is not an integer in {self.lo}..{self.hi}", param, ctx)
            v = int(text)
        if not self.lo <= v <= self.hi:
            self.fail(f"{short_repr(v)} is not in {self.lo}..{self.hi}", param, ctx)
        return v


def _seed_max() -> int:
    from nagkit.errors import SEED_MAX

    return SEED_MAX


#: Every ``--seed`` (and ``--calibrate-seed``, ``--exclude-seed``): the one seed range, 0..2**32-1
#: (``nagkit.errors.SEED_MAX``), as in nagkit.toml and the Python API (issue 35).
SEED = BoundedInt(0, _seed_max())


def seed_flag(*names: str, default: int | None = 0, help: str = "Random seed.") -> Callable:
    """A seed option (``--seed`` unless ``names`` say otherwise) of type :data:`SEED`; its help
    states the range."""
    return click.option(*(names or ("--seed",)), type=SEED, default=default, show_default=default is not None,
                        help=f"{help} (0..{_seed_max()})")


def samples_flag(help: str = "Generator samples per budget (default: the workspace's).") -> Callable:
    """``--samples N``: 1..``nag.config.MAX_SAMPLES``, as ``[inference] samples`` in nagkit.toml."""
    from nagkit.nag.config import MAX_SAMPLES

    return click.option("--samples", type=BoundedInt(1, MAX_SAMPLES), default=None, help=f"{help} (1..{MAX_SAMPLES:,})")


json_option = click.option("--json", "as_json", is_flag=True, help="Print the result as JSON on stdout.")


def limit_options(f: Callable) -> Callable:
    """``--max-params``, ``--max-size-mb``, ``--max-macs``, ``--max-peak-kb`` (issue 34, decisions
    39), as text: :meth:`nagkit.nag.constraints.Limits.parse` checks them (one error line naming
    the value and the valid form)."""
    opts = [("--max-peak-kb", "max_peak_kb", "K", "Peak activation memory of the exported graph, in kB (10^3 bytes), "
             "run one operator at a time, batch 1 (docs/decisions.md 39)."),
            ("--max-macs", "max_macs", "N", "Multiply-accumulates (e.g. 300M; suffixes K, M, G)."),
            ("--max-size-mb", "max_size_mb", "X", "The exported model file, in MB (10^6 bytes), at the export's "
             "precision."),
            ("--max-params", "max_params", "N", "Parameters (e.g. 2.5M; suffixes K, M, G).")]
    for flag, name, metavar, text in opts:
        f = click.option(flag, name, default=None, metavar=metavar, help=text + " Every generated arch meets it.")(f)
    return f


def limit_lines(c: dict | None, indent: str = "") -> list[str]:
    """The lines of ``generate`` and ``build`` for the limits (a ``constraints`` record): each
    one's value against it, and which binds; none without limits."""
    if not c or len(c["constraints"]) < 2:
        return []
    units = {"params": ("params", "{:,.0f}"), "macs": ("MACs", "{:,.0f}"), "size_mb": ("file", "{:.3f} MB"),
             "peak_kb": ("peak", "{:.1f} kB"), "latency_ms": ("latency", "{:.3f} ms")}
    parts = []
    for k, row in c["constraints"].items():
        name, fmt = units[k]
        est = " (estimate)" if k == "size_mb" and not row.get("measured") else ""
        parts.append(f"{name} {fmt.format(row['value'])} <= {fmt.format(row['limit'])}{est}")
    share = 100 * c["constraints"][c["binding"]]["share"]
    return [f"{indent}limits    {'; '.join(parts)}", f"{indent}binding   {units[c['binding']][0]} ({share:.1f}% of its limit)"]


seed_option = seed_flag()
space_option = click.option(
    "--space", "space_name", default="ofa-mbv3-w1.0", show_default=True,
    help="Search space name (see `nagkit space show`).",
)
device_option = click.option(
    "--device", "device_spec", default=None,
    help="Device: cpu[:runtime=litert|onnxruntime|torch,threads=N,cores=0-3], cuda[:i], "
    "adb:SERIAL, adb:HOST:PORT, or a name from device_profiles/.",
)
workspace_option = click.option(
    "--workspace", "-w", "workspace", default=None,
    help="Workspace folder or preset name (default: the embedded default workspace).",
)


def verbosity_option(f: Callable) -> Callable:
    """-v/-vv for more logging on stderr, -q for errors only."""

    def _verbose(ctx: click.Context, param: click.Parameter, value: int) -> int:
        if value:
            setup_logging(logging.INFO if value == 1 else logging.DEBUG)
        return value

    def _quiet(ctx: click.Context, param: click.Parameter, value: bool) -> bool:
        if value:
            setup_logging(logging.ERROR)
        return value

    f = click.option("-v", "--verbose", count=True, expose_value=False, callback=_verbose,
                     help="More logging on stderr (-vv for debug).")(f)
    f = click.option("-q", "--quiet", is_flag=True, expose_value=False, callback=_quiet,
                     help="Only errors on stderr.")(f)
    return f


class _Format(logging.Formatter):
    """``warning: message`` (nagkit's own lines); with -v also the logger's name."""

    def format(self, record: logging.LogRecord) -> str:
        text = f"{record.levelname.lower()}: {record.getMessage()}"
        if logging.getLogger("nagkit").isEnabledFor(logging.INFO):
            text = f"{record.levelname.lower()} {record.name}: {record.getMessage()}"
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        return text


def setup_logging(level: int = logging.WARNING) -> None:
    """nagkit's log on stderr at ``level`` (warnings by default, -v info, -vv debug, -q errors)."""
    root = logging.getLogger("nagkit")
    root.setLevel(level)
    if not root.handlers:
        h = logging.StreamHandler(sys.stderr)
        h.setFormatter(_Format())
        root.addHandler(h)


def emit(result: Any, as_json: bool, human: Callable[[Any], str] | None = None) -> None:
    """Write a result to stdout, as JSON or as human-readable text. The JSON is strict
    (RFC 8259): a non-finite float (a NaN statistic, say) is written as ``null``, never as
    ``NaN``/``Infinity``, which JSON parsers other than Python's refuse (issue 13 D10)."""
    if as_json or human is None:
        click.echo(strict_json(result))
    else:
        click.echo(human(result))


def strict_json(result: Any, indent: int | None = 2) -> str:
    """``json.dumps`` with ``allow_nan=False``; non-finite floats become ``null``."""
    try:
        return json.dumps(result, indent=indent, default=_default, allow_nan=False)
    except ValueError:  # a non-finite float somewhere: round-trip, then replace it
        plain = json.loads(json.dumps(result, default=_default))
        return json.dumps(_finite_or_null(plain), indent=indent, allow_nan=False)


def _finite_or_null(o: Any) -> Any:
    if isinstance(o, float):
        return o if math.isfinite(o) else None
    if isinstance(o, dict):
        return {k: _finite_or_null(v) for k, v in o.items()}
    if isinstance(o, list):
        return [_finite_or_null(v) for v in o]
    return o


def _default(o: Any) -> Any:
    if hasattr(o, "to_dict"):
        return o.to_dict()
    if hasattr(o, "tolist"):
        return o.tolist()
    if hasattr(o, "__str__"):
        return str(o)
    raise TypeError(type(o).__name__)


def log(msg: str) -> None:
    """A progress/log line on stderr."""
    click.echo(msg, err=True)

