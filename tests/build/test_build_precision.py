"""Issue 14: a table predicts only bundles of its own precision (decisions 25).

`nagkit build --export tflite-int8` on `fmnist` (an fp32 table) generates with its int8 twin
`fmnist-int8` (the same space, device and host, an int8 table, a generator trained on it); an
fp32 export of `fmnist-int8` uses `fmnist`. Without a twin the mismatch is a clear error (exit 2,
nothing written) unless `--quantize-after` asks for the fp32 choice quantized, which the
manifest says. These are refused or decided before any model work, so the tests are fast.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nagkit.app.targets import precision_workspace
from nagkit.app.workspace import load_workspace
from nagkit.errors import BadInputError
from nagkit.latency.table import LatencyTable
from nagkit.resources import ROOT as RESOURCES_DIR
from tests.cli.helpers import run_cli_inproc

FMNIST_INT8 = RESOURCES_DIR / "workspaces" / "fmnist-int8"


def _orphan(tmp_path: Path, precision: str, **device) -> Path:
    """A workspace like fmnist(-int8) whose table was measured on another device (``device``:
    what differs; default another phone's spec): no twin."""
    src = "fmnist-cpu-litert-int8.json" if precision == "int8" else "fmnist-cpu-litert.json"
    table = LatencyTable.load(RESOURCES_DIR / "latency_tables" / src)
    table = LatencyTable.create(table.space(), table.entries, device={**table.device, **(device or {"spec": "adb:OTHERPHONE"})},
                                runtime=table.runtime, resolutions=table.resolutions, provenance=table.provenance,
                                precision=table.precision)
    ws = tmp_path / f"orphan-{precision}"
    ws.mkdir(parents=True)
    table.save(ws / "table.json")
    sn = RESOURCES_DIR / "workspaces" / "fmnist" / "supernet" / "supernet.pt"
    (ws / "nagkit.toml").write_text(
        f'name = "orphan-{precision}"\nspace = "fmnist-mbv3-w0.5"\nlatency_table = "table.json"\n'
        f'accuracy = "supernet:{sn}"\nsupernet = "{sn}"\n')
    return ws


def test_each_precision_finds_its_twin():
    fm, fm8 = load_workspace("fmnist"), load_workspace("fmnist-int8")
    assert fm.latency_table.precision == "fp32" and fm8.latency_table.precision == "int8"
    assert precision_workspace(fm, "int8").root == fm8.root
    assert precision_workspace(fm8, "fp32").root == fm.root
    assert precision_workspace(fm, "fp32").root == fm.root
    assert precision_workspace(fm, "int8", quantize_after=True).root == fm.root  # asked for: kept, said in the manifest
    with pytest.raises(BadInputError, match="nothing to quantize after"):
        precision_workspace(fm8, "int8", quantize_after=True)


def test_the_int8_twin_was_trained_on_its_own_table():
    fm8 = load_workspace("fmnist-int8")
    meta = json.loads(fm8.artifact_path("generator").with_suffix(".json").read_text())
    from nagkit.io import sha256_file

    assert meta["provenance"]["latency_table"]["sha256"] == sha256_file(FMNIST_INT8.parent.parent / "latency_tables"
                                                                         / "fmnist-cpu-litert-int8.json")
    assert fm8.supernet_path() == load_workspace("fmnist").supernet_path()  # one supernet, not a copy


@pytest.mark.parametrize("precision, export, says", [
    ("int8", "tflite", ["latency table 'table.json' is int8, but the export is fp32", "no fp32 workspace",
                        "--export tflite-int8"]),
    ("fp32", "tflite-int8", ["is fp32, but the export is int8", "--precision int8", "--quantize-after"]),
])
def test_a_table_of_another_precision_without_a_twin_exits_2_and_writes_nothing(tmp_path, capsys, precision, export,
                                                                               says):
    ws = _orphan(tmp_path, precision)
    out = tmp_path / "out"
    out.mkdir()
    r = run_cli_inproc(["build", "--budget", "3", "--workspace", str(ws), "--export", export, "--out",
                        str(out / "b")], capsys)
    assert r.code == 2 and r.out == "", r.err
    assert len([ln for ln in r.err.splitlines() if ln.startswith("error:")]) == 1, r.err
    for s in says:
        assert s in r.err, r.err
    assert list(out.iterdir()) == []


def test_quantize_after_goes_with_an_int8_or_fp16_export(tmp_path, capsys):
    r = run_cli_inproc(["build", "--budget", "3", "--export", "tflite", "--quantize-after", "--out",
                        str(tmp_path / "b")], capsys)
    assert r.code == 2 and "--quantize-after goes with an int8 or fp16 export" in r.err, r.err
    assert "tflite-fp16" in r.err, r.err
    assert list(tmp_path.iterdir()) == []


def test_an_fp16_export_of_an_fp32_table_without_a_twin_exits_2_and_says_both_fixes(tmp_path, capsys):
    r = run_cli_inproc(["build", "--budget", "3", "--export", "tflite-fp16", "--out", str(tmp_path / "b")], capsys)
    assert r.code == 2 and r.out == "", r.err
    assert len([ln for ln in r.err.splitlines() if ln.startswith("error:")]) == 1, r.err
    for s in ("is fp32, but the export is fp16", "no fp16 workspace", "--precision fp16", "--quantize-after"):
        assert s in r.err, r.err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_an_fp16_build_quantized_after_says_so_and_holds_float16_weights(tmp_path):
    """`--export tflite-fp16 --quantize-after` on fmnist: the fp32 table's pick with float16
    weights, checked against its float16 reference; the manifest says the latency is fp32's.
    The supernet's weights as --weights (no BN recalibration: the float16 path is under test)."""
    import torch

    from nagkit.app.build import BuildOptions, build
    from nagkit.app.int8 import FP16_TABLE_NOTE

    sn = RESOURCES_DIR / "workspaces" / "fmnist" / "supernet" / "supernet.pt"
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        res = build(0.8, workspace="fmnist", options=BuildOptions(formats="tflite-fp16", quantize_after=True,
                                                                  accuracy="never", out=tmp_path / "b",
                                                                  weights=str(sn)))
    finally:
        torch.set_num_threads(n)
    m = json.loads((tmp_path / "b" / "manifest.json").read_text())
    assert res.precision == "fp16" and m["build"]["workspace"] == "fmnist"
    assert m["files"]["model.tflite"]["precision"] == "fp16" and m["quantization"]["precision"] == "fp16"
    assert m["files"]["model.tflite"]["parity"]["passed"] is True and FP16_TABLE_NOTE in m["notes"]
    assert 0 < m["quantization"]["parity"]["max_abs_diff"] < m["quantization"]["parity"]["fp32"]["max_abs_diff"]
    assert m["accuracy"] is None  # --accuracy never: the 10,000-image run is tested for fp32 (test_build_manifest)


def test_a_twin_was_measured_on_the_same_cpu_model_not_only_a_host_of_the_same_name(tmp_path):
    """VMs share host names ("vm"): fmnist-int8 (an Intel Xeon's table) is no twin of an fp32
    table made on another CPU model under the same host name, and is one of a copy of fmnist's."""
    same = load_workspace(str(_orphan(tmp_path / "same", "fp32", spec=load_workspace("fmnist").table_origin()[0]["spec"])))
    assert precision_workspace(same, "int8").root == load_workspace("fmnist-int8").root
    other = load_workspace(str(_orphan(tmp_path / "other", "fp32", cpu_model="AMD EPYC")))
    with pytest.raises(BadInputError, match="no int8 workspace"):
        precision_workspace(other, "int8")


def test_a_copy_of_the_int8_twin_reads_the_shipped_supernet_cache_and_never_writes_it():
    from nagkit.app.workspace import init_workspace

    ws = init_workspace("my-int8", source="fmnist-int8")
    assert not ws.shipped and ws.supernet_path() == load_workspace("fmnist").supernet_path()
    assert ws.open_accuracy_source().provenance()["options"]["cache_readonly"] is True
