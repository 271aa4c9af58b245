"""`nagkit profile` end to end on the loopback ADB device (real ADB protocol over TCP)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

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


def test_int8_profile_over_loopback_adb(tmp_path, cli_env):
    """`--precision int8` on a phone: the blocks are quantized on the host, pushed and timed
    over ADB (adb-shell, the loopback's benchmark_model stand-in); the files the device ran are
    full-integer models, and the table says int8."""
    import numpy as np

    from nagkit.devices.loopback import LoopbackAdbd, write_benchmark_runner
    from nagkit.runtimes.litert import open_interpreter

    space = micro_space()
    space_file = tmp_path / "space.json"
    space_file.write_text(json.dumps(space.to_dict()))
    runner = write_benchmark_runner(tmp_path / "runner" / "benchmark_model")
    env = dict(cli_env, ADB_SERVER_SOCKET="tcp:127.0.0.1:1")
    with LoopbackAdbd(tmp_path / "sandbox", port=0, install_runner=False) as adbd:
        profile = tmp_path / "phone.yaml"
        profile.write_text(yaml.safe_dump({
            "device": f"adb:{adbd.serial}", "threads": 1, "num_runs": 5, "warmup_runs": 1, "min_secs": 0.05,
            "warmup_min_secs": 0.01, "adb_key": str(tmp_path / "adbkey"), "connect_timeout_s": 5.0}))
        out = tmp_path / "phone-int8.json"
        res = run_cli(["profile", "--device", str(profile), "--space", str(space_file), "--out", str(out),
                       "--precision", "int8", "--benchmark-binary", str(runner), "--cache-dir",
                       str(tmp_path / "cache"), "--no-progress", "--json"], env=env)
        assert res.code == 0, res.err
        graphs = [a.removeprefix("--graph=") for s in adbd.opened_services if "benchmark_model" in s
                  for a in shlex.split(s.removeprefix("shell:")) if a.startswith("--graph=")]
        ran = {Path(adbd.sandbox.resolve(g)) for g in graphs}
        assert len(ran) == len(unique_layers(space)) and all(p.suffix == ".tflite" for p in ran)
        weighted = 0
        for p in ran:  # what the device timed: every conv / fc is int8 in and int8 weights (a pooling-only
            it = open_interpreter(p, threads=1)  # block has none: its MEAN stays float, as in a bundle)
            by_index = {t["index"]: t for t in it.get_tensor_details()}
            for op in it._get_ops_details():
                if op["op_name"] in ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED"):
                    weighted += 1
                    x, w = by_index[op["inputs"][0]], by_index[op["inputs"][1]]
                    assert x["dtype"] == np.int8 and w["dtype"] == np.int8, (p.name, op)
        assert weighted >= len(ran) - 1
    table = LatencyTable.load(out)
    assert table.precision == "int8"
    assert set(table.entries) == set(unique_layers(space))
    assert all(e["median_ms"] > 0 for e in table.entries.values())
