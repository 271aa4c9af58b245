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
