"""`nagkit profile` end to end on the loopback ADB device (real ADB protocol over TCP)."""

from __future__ import annotations

import json

import pytest
import yaml

from nagkit.latency.blocks import unique_layers
from nagkit.latency.table import LatencyTable
from tests.cli.helpers import run_cli
from tests.latency.conftest import make_tiny_space

pytestmark = [pytest.mark.slow, pytest.mark.adb]


def micro_space():
    """One stage, one block choice: 7 unique blocks, each big enough to take whole microseconds
    (benchmark_model reports integer microseconds; a 0 us median is refused, never used)."""
    return make_tiny_space(name="micro", base_stage_width=(16, 16, 64, 256, 512), ks_list=(3,), expand_list=(3,),
                           depth_list=(1,), resolutions=(64,), stage_strides=(2,), stage_acts=("relu",),
                           stage_se=(True,), n_classes=1000)


def test_profile_over_loopback_adb(tmp_path, cli_env):
    """A phone without benchmark_model: --benchmark-binary pushes the user's (here the loopback's
    stand-in), over adb-shell (no adb server), as a pipeline (converting while measuring)."""
    from nagkit.devices.loopback import LoopbackAdbd, write_benchmark_runner

    space = micro_space()
    space_file = tmp_path / "space.json"
    space_file.write_text(json.dumps(space.to_dict()))
    runner = write_benchmark_runner(tmp_path / "runner" / "benchmark_model")
    env = dict(cli_env, ADB_SERVER_SOCKET="tcp:127.0.0.1:1")  # no adb server: adb-shell
    with LoopbackAdbd(tmp_path / "sandbox", port=0, install_runner=False) as adbd:
        profile = tmp_path / "phone.yaml"
        profile.write_text(yaml.safe_dump({
            "device": f"adb:{adbd.serial}", "taskset": "f0", "threads": 1,
            "num_runs": 5, "warmup_runs": 1, "min_secs": 0.05, "warmup_min_secs": 0.01,
            "adb_key": str(tmp_path / "adbkey"), "connect_timeout_s": 5.0}))
        out = tmp_path / "phone.json"
        res = run_cli(["profile", "--device", str(profile), "--space", str(space_file), "--out", str(out),
                       "--benchmark-binary", str(runner), "--cache-dir", str(tmp_path / "cache"), "--no-progress",
                       "--json"], env=env)
        assert res.code == 0, res.err
        ran = [s for s in adbd.opened_services if "benchmark_model" in s and "--graph=" in s]
        pushed = adbd.sandbox.root / "data/local/tmp/nagkit/benchmark_model"
        assert pushed.read_bytes() == runner.read_bytes()
    layers = unique_layers(space)
    assert len(layers) == 7 and json.loads(res.out)["measured"] == 7
    assert len(ran) >= 7 and all(s.startswith("shell:taskset f0 ") for s in ran)
    table = LatencyTable.load(out)
    assert set(table.entries) == set(layers)
    assert table.device["model"] == "nagkit-loopback" and table.runtime["threads"] == 1
    assert table.device["transport"] == "tcp" and table.provenance["pipelined"] is True
    assert table.predict(space, space.largest()) == pytest.approx(
        sum(e["median_ms"] for e in table.entries.values()), rel=1e-9)
