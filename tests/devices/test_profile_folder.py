"""The top-level `device_profiles/` folder, where a user's own profiles go: its README documents
the format the loader accepts (every key of every kind, and its example loads), `--device NAME`
finds a profile put there, and its .gitignore keeps the user's files out of commits."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
import yaml

from nagkit.devices.kinds import profile_keys
from nagkit.devices.profiles import PROFILE_COMMON_KEYS, find_profile, load_profile, profile_dirs
from nagkit.devices.registry import parse_device_spec

from tests.conftest import ROOT

FOLDER = ROOT / "device_profiles"


def _readme() -> str:
    return (FOLDER / "README.md").read_text()


def test_readme_names_every_key_the_loader_accepts():
    text = _readme()
    keys = set(re.findall(r"`([a-z_]+)`", text))
    for kind in ("cpu", "cuda", "adb"):
        missing = set(profile_keys(kind)) - keys
        assert not missing, (kind, missing)
    assert set(PROFILE_COMMON_KEYS) <= keys
    from dataclasses import fields

    from nagkit.devices.base import MeasureConfig

    assert {f.name for f in fields(MeasureConfig)} <= keys


def test_readme_example_is_found_by_name_and_loads(tmp_path, monkeypatch):
    example = re.search(r"```yaml\n(.*?)```", _readme(), re.S).group(1)
    name = yaml.safe_load(example)["name"]
    (tmp_path / "device_profiles").mkdir()
    (tmp_path / "device_profiles" / f"{name}.yaml").write_text(example)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("NAGKIT_PROFILE_PATH", raising=False)
    assert tmp_path / "device_profiles" in [d.resolve() for d in profile_dirs()]
    assert find_profile(name) == tmp_path / "device_profiles" / f"{name}.yaml"
    spec = parse_device_spec(name)
    assert spec.kind == "cpu" and spec.source == name and spec.description.startswith("this machine")
    assert spec == load_profile(find_profile(name))
    assert spec.opts["runtime"] == "onnxruntime" and spec.opts["threads"] == 2 and spec.opts["cores"] == (0, 1)
    assert spec.measure.min_runs == 20 and spec.measure.max_time_s == 5.0


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_gitignore_keeps_user_profiles_out_and_the_readme_in(tmp_path):
    """Checked with git itself, in a scratch repository holding only this .gitignore."""
    (tmp_path / "device_profiles").mkdir()
    shutil.copy(FOLDER / ".gitignore", tmp_path / "device_profiles" / ".gitignore")
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)

    def ignored(rel: str) -> bool:
        r = subprocess.run(["git", "check-ignore", "-q", "--no-index", rel], cwd=tmp_path)
        assert r.returncode in (0, 1), r
        return r.returncode == 0

    assert ignored("device_profiles/my-phone.yaml") and ignored("device_profiles/lab.yml")
    assert not ignored("device_profiles/README.md") and not ignored("device_profiles/.gitignore")
