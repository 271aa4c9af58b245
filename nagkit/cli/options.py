"""Click options defined once and reused by every command, plus output helpers.

Results go to stdout (``--json`` for machines); logs and progress go to stderr.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable
from typing import Any

import click

from nagkit.progress import phase_progress  # noqa: F401 - re-exported: (phase, done, total) progress lines

json_option = click.option("--json", "as_json", is_flag=True, help="Print the result as JSON on stdout.")
seed_option = click.option("--seed", type=int, default=0, show_default=True, help="Random seed.")
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
    """Write a result to stdout, as JSON or as human-readable text."""
    if as_json or human is None:
        click.echo(json.dumps(result, indent=2, default=_default))
    else:
        click.echo(human(result))


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

