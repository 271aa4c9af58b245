"""Issue 14: latency tables at a precision (`nagkit profile --precision int8`).

An int8 profile times every block quantized (full-integer, as `--export tflite-int8` makes it),
the table says it is int8, and `lut validate`/`calibrate` of that table time int8 whole networks.
A journal of one precision is never resumed at another; unknown precisions are refused up front.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from nagkit.errors import ArtifactError, BadInputError
from nagkit.latency.table import LatencyTable
from tests.cli.helpers import run_cli_inproc
from tests.latency.conftest import make_tiny_space, synthetic_entries

FAST_MEASURE = "{warmup_runs: 2, warmup_s: 0.01, min_runs: 5, min_time_s: 0.03, max_time_s: 0.3, max_runs: 300}"


def _int8_tensors(path) -> tuple[int, int]:
    """(int8 tensors, float32 tensors) of a .tflite file, read by LiteRT's interpreter."""
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_path=str(path))
    kinds = [np.dtype(t["dtype"]).name for t in it.get_tensor_details()]
    return kinds.count("int8"), kinds.count("float32")


def _dtype_tensors(path, dtype) -> int:
    """How many tensors of ``dtype`` a .tflite file has, read by LiteRT's interpreter."""
    from ai_edge_litert.interpreter import Interpreter

    return sum(np.dtype(t["dtype"]) == np.dtype(dtype) for t in Interpreter(model_path=str(path)).get_tensor_details())


def test_a_table_records_its_precision_and_old_tables_are_fp32(tmp_path):
    space = make_tiny_space()
    t = LatencyTable.create(space, synthetic_entries(space), device={"spec": "synthetic"}, runtime={"name": "none"},
                            resolutions=space.resolutions, precision="int8")
    t.save(tmp_path / "t.json")
    assert LatencyTable.load(tmp_path / "t.json").precision == "int8"
    obj = json.loads((tmp_path / "t.json").read_text())
    del obj["precision"]  # a table written before precisions existed
    (tmp_path / "old.json").write_text(json.dumps(obj))
    assert LatencyTable.load(tmp_path / "old.json").precision == "fp32"
    obj["precision"] = "int4"
    (tmp_path / "bad.json").write_text(json.dumps(obj))
    with pytest.raises(ArtifactError, match="precision 'int4' is not one of fp32, int8"):
        LatencyTable.load(tmp_path / "bad.json")
    with pytest.raises(BadInputError, match="precision"):
        LatencyTable.create(space, synthetic_entries(space), device={}, runtime={}, resolutions=[32], precision="fp8")


def test_the_shipped_int8_table_is_int8_and_the_others_fp32():
    from nagkit.resources import LATENCY_TABLES

    precisions = {p.name: LatencyTable.load(p).precision for p in sorted(LATENCY_TABLES.glob("*.json"))}
    assert precisions.pop("fmnist-cpu-litert-int8.json") == "int8"
    assert set(precisions.values()) == {"fp32"}, precisions


def test_a_torch_device_has_no_int8_blocks():
    from nagkit.latency.blocks import BlockCache, check_format_precision

    with pytest.raises(BadInputError, match="tflite or onnx"):
        check_format_precision("torch", "int8")
    with pytest.raises(BadInputError, match="tflite or onnx"):
        BlockCache("torch", precision="int8")
    assert BlockCache("tflite", precision="int8").dir.name.startswith("tflite-int8-")
    assert BlockCache("tflite").dir.name != BlockCache("tflite", precision="int8").dir.name


@pytest.mark.parametrize("value, says", [
    ("int4", ["unknown precision 'int4'", "Valid precisions: fp16, fp32, int8", "--precision int8"]),
    ("fp8", ["unknown precision 'fp8'", "fp16"]),
    ("", ["unknown precision ''"]),
])
def test_an_unknown_precision_is_refused_before_any_work(tmp_path, capsys, value, says):
    out = tmp_path / "t.json"
    r = run_cli_inproc(["profile", "--device", "cpu", "--precision", value, "--out", str(out),
                        "--cache-dir", str(tmp_path / "cache"), "--no-progress"], capsys)
    assert r.code == 2 and r.out == "", r.err
    assert len([ln for ln in r.err.splitlines() if ln.startswith("error:")]) == 1, r.err
    for s in says:
        assert s in r.err, r.err
    assert list(tmp_path.iterdir()) == []  # no table, no journal, no cache


def test_fp16_is_a_tflite_precision_and_an_onnx_profile_at_it_is_refused(tmp_path, capsys):
    from nagkit.latency.blocks import BlockCache, check_format_precision

    assert check_format_precision("tflite", "fp16") == "fp16"
    assert BlockCache("tflite", precision="fp16").dir.name.startswith("tflite-fp16-")
    with pytest.raises(BadInputError, match="not built for onnx"):
        check_format_precision("onnx", "fp16")
    with pytest.raises(BadInputError, match="tflite or onnx"):
        check_format_precision("torch", "fp16")
    out = tmp_path / "t.json"
    r = run_cli_inproc(["profile", "--device", "cpu:runtime=onnxruntime", "--precision", "fp16", "--out", str(out),
                        "--cache-dir", str(tmp_path / "cache"), "--no-progress"], capsys)
    assert r.code == 2 and r.out == "" and "'fp16' is not built for onnx" in r.err, r.err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_an_fp16_profile_times_float16_weight_blocks(tmp_path):
    """A tiny space profiled at fp16 on CPU LiteRT: every block with weights stores them float16."""
    with _tiny_device(tmp_path) as dev:
        _, table, bc = _profile_tiny(dev, tmp_path, "fp16", expand_list=(3,))
    with_weights = 0
    for key in table.entries:
        n_half = _dtype_tensors(bc.path_for(key), np.float16)
        assert n_half > 0 or key.startswith("pool-"), key
        with_weights += n_half > 0
    assert with_weights > 0


def _tiny_device(tmp_path):
    from nagkit.devices.registry import get_device

    dev_file = tmp_path / "dev.yaml"
    dev_file.write_text(f"device: cpu:runtime=litert,threads=1\nmeasure: {FAST_MEASURE}\n")
    return get_device(str(dev_file))


def _profile_tiny(dev, tmp_path, precision: str, expand_list: tuple[int, ...]):
    """(space, table, block cache): a tiny space (r=32, k3, depth 1) profiled at ``precision`` into
    ``tmp_path/t.json``, checked to be a table of that precision with every block and no fp32 block
    converted."""
    from nagkit.latency.blocks import BlockCache, unique_layers
    from nagkit.latency.profiler import profile

    space = make_tiny_space(resolutions=(32,), ks_list=(3,), expand_list=expand_list, depth_list=(1,))
    cache = tmp_path / "cache"
    res = profile(dev, space, [32], tmp_path / "t.json", cache_dir=cache, progress=False, precision=precision)
    table = LatencyTable.load(tmp_path / "t.json")
    assert table.precision == precision and res.to_dict()["precision"] == precision
    assert set(table.entries) == set(unique_layers(space, [32]))
    assert not BlockCache("tflite", cache).dir.exists()  # no fp32 block was converted
    return space, table, BlockCache("tflite", cache, precision=precision)


@pytest.mark.slow
def test_an_int8_profile_times_quantized_blocks_and_validates_int8_networks(tmp_path):
    """A tiny space (10 blocks, 4 archs at r=32) profiled at int8 on CPU LiteRT; then validated."""
    from nagkit.latency.profiler import profile
    from nagkit.latency.validate import NetworkCache, validate

    cache = tmp_path / "cache"
    with _tiny_device(tmp_path) as dev:
        space, table, bc = _profile_tiny(dev, tmp_path, "int8", expand_list=(3, 4))
        for key in table.entries:  # every block with weights was timed quantized (a lone pool has none to quantize)
            n_int8, _ = _int8_tensors(bc.path_for(key))
            assert n_int8 > 0 or key.startswith("pool-"), key
        with pytest.raises(BadInputError, match="precision: journal 'int8' vs now 'fp32'"):
            profile(dev, space, [32], tmp_path / "t.json", resume=True, cache_dir=cache, progress=False)
        report = validate(table, dev, space, n=2, seed=3, cache_dir=cache, progress=False, passes=1, extra_passes=0)
    assert report["samples"] == 2 and report["network_cache"]["precision"] == "int8"
    nets = NetworkCache("tflite", cache, precision="int8")
    files = sorted(nets.dir.rglob("*.tflite"))
    assert len(files) == 2 and all(_int8_tensors(f)[0] > _int8_tensors(f)[1] for f in files)
    assert not NetworkCache("tflite", cache).dir.exists()
