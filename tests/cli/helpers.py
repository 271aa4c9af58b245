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


def image_folder(root, classes=("a", "b"), n_train=4, n_val=2, side=28):
    """A small valid ImageFolder for ``finetune --data``: ``root/train/<class>/*.png`` and
    ``root/val/<class>/*.png``, seeded grayscale PNGs of ``side`` x ``side`` (fmnist's 28)."""
    from pathlib import Path

    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    root = Path(root)
    for split, n in (("train", n_train), ("val", n_val)):
        for c in classes:
            d = root / split / c
            d.mkdir(parents=True, exist_ok=True)
            for i in range(n):
                Image.fromarray(rng.integers(0, 256, (side, side), dtype=np.uint8)).save(d / f"{i}.png")
    return root


def tree_state(root) -> dict:
    """Every file and folder under ``root``: relative path -> (size, mtime_ns); to show a refused
    command wrote, removed or changed nothing."""
    from pathlib import Path

    root = Path(root)
    return {p.relative_to(root).as_posix(): (p.lstat().st_size, p.lstat().st_mtime_ns) for p in root.rglob("*")}
