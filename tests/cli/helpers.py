"""Run the CLI in-process (fast) or as a subprocess (checks exit codes end to end)."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass


@dataclass
class Result:
    code: int
    out: str
    err: str


def run_cli(args: list[str], env: dict | None = None, timeout: float = 600, cwd=None) -> Result:
    p = subprocess.run([sys.executable, "-m", "nagkit", *args], capture_output=True, text=True, env=env,
                       timeout=timeout, cwd=cwd)
    return Result(p.returncode, p.stdout, p.stderr)


def run_cli_inproc(args: list[str], capsys) -> Result:
    from nagkit.cli.main import main

    code = main(args)
    cap = capsys.readouterr()
    return Result(code, cap.out, cap.err)


def assert_refused(r: Result, says, folder) -> None:
    """A refusal as the rules want it: exit 2, nothing on stdout, one error line naming every
    string of ``says`` (with its hint), and ``folder`` left empty."""
    from pathlib import Path

    assert r.code == 2 and r.out == "", r.err
    assert len([ln for ln in r.err.splitlines() if ln.startswith("error:")]) == 1, r.err
    for s in says:
        assert s in r.err, r.err
    assert list(Path(folder).iterdir()) == []
