"""The Python API (`nagkit.profile/build/generate/check`): importable from `nagkit`, cheap to
import, and safe with the `spawn` start method: scripts that call it at their top level, with no
`if __name__ == "__main__":` guard, run a profile through the conversion workers, and the
README's example (run from the installed wheel: tests/test_wheel.py)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def readme_example() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    m = re.search(r"<!-- api-example -->\s*```python\n(.*?)```\s*<!-- /api-example -->", text, re.S)
    assert m, "README.md has no <!-- api-example --> block"
    return m.group(1)


def _run_unguarded(tmp_path: Path, env: dict, body: str) -> subprocess.CompletedProcess:
    """``body`` as a script's top level under the spawn start method (no __main__ guard)."""
    script = tmp_path / "user_script.py"
    script.write_text("import multiprocessing\nmultiprocessing.set_start_method('spawn', force=True)\n" + body)
    return subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=900)


def test_the_api_is_importable_and_lazy():
    code = ("import sys, nagkit; assert callable(nagkit.build) and callable(nagkit.profile); "
            "assert callable(nagkit.generate) and callable(nagkit.check); "
            "print(sorted(m for m in ('torch', 'litert_torch', 'adb_shell') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"  # nothing heavy is imported to reach the API
    import nagkit

    assert {"profile", "build", "generate", "check"} <= set(dir(nagkit))
    with pytest.raises(AttributeError):
        nagkit.nope  # noqa: B018


@pytest.mark.slow
@pytest.mark.adb
def test_profile_through_the_conversion_workers_under_spawn_without_a_guard(tmp_path, cli_env):
    """nagkit.profile on a phone (the loopback): conversions run in worker processes."""
    from nagkit.devices.loopback import LoopbackAdbd
    from tests.latency.test_profile_adb import micro_space

    (tmp_path / "space.json").write_text(json.dumps(micro_space().to_dict()))
    env = dict(cli_env, ADB_SERVER_SOCKET="tcp:127.0.0.1:1", NAGKIT_CACHE=str(tmp_path / "cache"))
    with LoopbackAdbd(tmp_path / "sandbox", port=0, time_scale=0.05) as adbd:
        p = _run_unguarded(tmp_path, env, textwrap.dedent(f"""
            import nagkit
            res = nagkit.profile("adb:{adbd.serial}", space="space.json", jobs=2)
            print(res.out, len(res.table.entries), res.table.provenance["pipelined"])
            """))
    assert p.returncode == 0, p.stdout + p.stderr[-3000:]
    assert p.stdout.split() == ["latency_tables/nagkit-loopback-tflite-micro.json", "7", "True"]
