"""`nagkit build --device D` builds for D: predictions and the budget's range come from D's own
table when one exists (the workspace re-targeted to it, its generator trained once), otherwise
the build says which table it used. On a tiny workspace and the loopback ADB device; D's table
stands in for the one `nagkit profile --device D` writes (test_profile_literal.py profiles)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from nagkit.app.build import BuildOptions, build
from nagkit.app.targets import choose_target, find_device_table
from nagkit.app.workspace import load_workspace, user_workspaces_dir
from nagkit.data.synthetic import tiny_space, tiny_workspace_toml
from nagkit.latency.blocks import unique_layers
from nagkit.latency.table import LatencyTable
from nagkit.nag.budgets import BudgetBelowRangeError
from nagkit.space.counts import layer_macs

pytestmark = [pytest.mark.usefixtures("one_thread")]


def _table(scale: float, device: dict, path: Path, host: str = "elsewhere") -> Path:
    sp = tiny_space()
    entries = {}
    for key, layer in unique_layers(sp).items():
        ms = scale * (0.002 + layer_macs(layer) * 1e-6)
        entries[key] = {"median_ms": ms, "mean_ms": ms, "std_ms": ms * 0.01, "p10_ms": ms, "p90_ms": ms, "n": 20}
    t = LatencyTable.create(sp, entries, device=device, runtime={"name": "litert"}, resolutions=sp.resolutions,
                            provenance={"source": "test: stands in for a profile", "host": host})
    path.parent.mkdir(parents=True, exist_ok=True)
    t.save(path)
    return path


@pytest.fixture
def workspace(tmp_path):
    """A tiny workspace whose table is another machine's, with its dataset collected."""
    from nagkit.app.workspace import load_workspace as load
    from nagkit.data.dataset import collect

    root = tmp_path / "ws"
    _table(1.0, {"spec": "cpu:runtime=litert,threads=1", "cpu_model": "elsewhere"}, root / "table.json")
    (root / "nagkit.toml").write_text(tiny_workspace_toml().replace('latency_table = "synthetic:"',
                                                                    'latency_table = "table.json"'))
    ws = load(root)
    src = ws.open_accuracy_source()
    collect(ws.artifact_path("dataset"), space=ws.space, table=ws.latency_table, source=src, n=300, seed=0,
            table_prov=ws.latency_table_provenance())
    return ws


def test_without_a_table_of_the_device_the_build_says_which_table_it_used(workspace):
    from nagkit.devices.registry import get_device

    with get_device("cpu") as dev:
        t = choose_target(workspace, dev)
    assert t.workspace is workspace and not t.device_table
    assert "table.json" in t.note and "no table of cpu" in t.note
    assert "nagkit profile --device cpu" in t.note


def test_a_table_from_a_host_of_this_name_but_another_cpu_model_is_not_this_cpus(tmp_path, monkeypatch):
    """VMs share host names ("vm"): a CPU table is this machine's only if its CPU model is too
    (the shipped tables came from an Intel Xeon VM; an AMD EPYC VM also calls itself "vm")."""
    import platform

    from nagkit.app.targets import table_is_for
    from nagkit.devices.registry import get_device

    monkeypatch.chdir(tmp_path)
    with get_device("cpu:runtime=litert,threads=1") as dev:
        here, spec = dev.info()["cpu_model"], str(dev.spec)
        node = {"host": platform.node()}
        assert table_is_for({"spec": spec, "cpu_model": here}, node, dev)
        assert not table_is_for({"spec": spec, "cpu_model": here + " (another)"}, node, dev)
        assert table_is_for({"spec": spec}, node, dev)  # a table that names no CPU model: the host decides
        assert not table_is_for({"spec": spec, "cpu_model": here}, {"host": "elsewhere"}, dev)
        # The same model name from another CPU (a Zen 4 and a Zen 5 VM both say "AMD EPYC"): the id decides
        ident = dev.info().get("cpu_id")
        if ident:
            assert table_is_for({"spec": spec, "cpu_model": here, "cpu_id": ident}, node, dev)
            assert not table_is_for({"spec": spec, "cpu_model": here, "cpu_id": ident + "0"}, node, dev)
            assert table_is_for({"spec": spec, "cpu_model": here}, node, dev)  # a table from before ids: the name decides
        _table(1.0, {"spec": spec, "cpu_model": here + " (another)"}, tmp_path / "latency_tables" / "other.json",
               host=platform.node())
        assert find_device_table(dev, "tiny") is None
        mine = _table(1.0, {"spec": spec, "cpu_model": here}, tmp_path / "latency_tables" / "mine.json",
                      host=platform.node())
        assert find_device_table(dev, "tiny") == mine.resolve()


@pytest.mark.slow
@pytest.mark.adb
@pytest.mark.serial
def test_build_on_a_device_with_its_own_table(workspace, tmp_path, monkeypatch):
    from nagkit.devices.loopback import LoopbackAdbd

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ADB_SERVER_SOCKET", "tcp:127.0.0.1:1")  # adb-shell, no server
    with LoopbackAdbd(tmp_path / "sandbox", port=0, time_scale=0.05) as adbd:
        spec = f"adb:{adbd.serial}"
        phone = tmp_path / "phone.yaml"
        phone.write_text(yaml.safe_dump({"device": spec, "adb_key": str(tmp_path / "adbkey"), "num_runs": 5,
                                         "warmup_runs": 1}))
        mine = _table(2.0, {"spec": spec, "model": "nagkit-loopback"}, tmp_path / "latency_tables" / "phone.json")
        from nagkit.devices.registry import get_device

        with get_device(str(phone)) as dev:
            assert find_device_table(dev, "tiny") == mine.resolve()
        lo, hi = LatencyTable.load(mine).latency_range(tiny_space())
        with pytest.raises(BudgetBelowRangeError, match=f"{lo:.4g} ms"):  # judged on the phone's table, untrained
            build(lo * 0.75, workspace=workspace, options=BuildOptions(device_spec=str(phone), random_init=True,
                                                                       out=tmp_path / "never"))
        assert not load_workspace("ws@phone").artifact_path("generator").exists()
        lines: list[str] = []
        res = build((lo + hi) / 2, workspace=workspace, say=lines.append, options=BuildOptions(
            device_spec=str(phone), random_init=True, out=tmp_path / "b1"))
        # the second build reuses the device workspace's generator
        res2 = build((lo + hi) / 2, workspace=workspace, options=BuildOptions(
            device_spec=str(phone), random_init=True, out=tmp_path / "b2"))
    assert res2.trained is None and res2.arch == res.arch
    dws = load_workspace("ws@phone")
    assert dws.root == user_workspaces_dir() / "ws@phone" and Path(res.table) == mine.resolve()
    assert res.verified and res.measured["median_ms"] > 0 and res.trained is not None
    assert any("training the generator of ws@phone" in ln for ln in lines)
    ds_head = json.loads(dws.artifact_path("dataset").read_text().splitlines()[0])
    assert "no accuracy query" in ds_head["sampling"]
    manifest = json.loads((tmp_path / "b1" / "manifest.json").read_text())
    b = manifest["build"]
    assert b["verified_on_device"] is True and b["latency_table"]["device_own"] is True
    assert b["workspace"] == "ws@phone" and b["generator_trained_now"] is True
    assert manifest["latency"]["predicted"]["table"]["spec"] == str(mine.resolve())
