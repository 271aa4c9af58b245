"""Progressive-shrinking training on CPU: every phase, exact resume, final checkpoint."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from nagkit.errors import BadInputError
from nagkit.space import SearchSpace
from nagkit.supernet import load_supernet
from nagkit.supernet.train import (FINAL_NAME, LOG_NAME, STATE_NAME, TrainConfig, TrainData, Trainer, default_phases,
                                   parse_epochs, phase_space, read_train_meta)


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def space() -> SearchSpace:
    return SearchSpace(name="tiny-fm", width_mult=0.25, base_stage_width=(16, 16, 24, 40, 80, 112, 160, 120, 160),
                       ks_list=(3, 5), expand_list=(2, 3, 4), depth_list=(1, 2), resolutions=(28, 32), stem_stride=1,
                       in_channels=1, n_classes=10, dropout=0.1, mean=(0.5,), std=(0.5,))


def _data() -> TrainData:
    rng = np.random.default_rng(0)
    # Learnable: the label is the brightest of 10 horizontal bands.
    y = rng.integers(0, 10, 80)
    x = rng.integers(0, 60, (80, 28, 28)).astype(np.uint8)
    for i, c in enumerate(y):
        x[i, 2 + 2 * c: 4 + 2 * c, :] = 250
    return TrainData.from_numpy(x[:48], y[:48], x[48:], y[48:], "cpu", {"dataset": "bands"})


def _cfg(space, **kw) -> TrainConfig:
    return TrainConfig(phases=default_phases(space, {"full": 1, "kernel": 1, "depth": 1, "expand": 1}),
                       batch_size=16, calib_images=16, eval_every_epoch=False, **kw)


def _params(net) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in net.state_dict().items()}


@pytest.fixture(scope="module")
def full_run(space, tmp_path_factory):
    torch.set_num_threads(1)
    out = tmp_path_factory.mktemp("run")
    tr = Trainer(space, _cfg(space), _data(), out)
    assert tr.run() == "done"
    return tr, out


def test_phases_follow_ofa_order(space):
    names = [p.name for p in default_phases(space)]
    assert names == ["full", "kernel", "depth1", "expand1", "expand2"]
    full, _ = phase_space(space, "full")
    assert (full.ks_list, full.expand_list, full.depth_list) == ((5,), (4,), (2,))
    e1, sort1 = phase_space(space, "expand1")
    assert e1.expand_list == (3, 4) and sort1 == 0
    assert phase_space(space, "expand2") == (space, 1)


@pytest.mark.slow
def test_trains_through_every_phase(full_run, space):
    tr, out = full_run
    done = [r for r in tr.state.log if r.get("done")]
    assert [r["phase"] for r in done] == ["full", "kernel", "depth1", "expand1", "expand2"]
    for r in done:
        assert r["images"] == 3 * 16 and r["images_per_s"] > 0
    vals = [r["val"] for r in tr.state.log if "val" in r]
    assert len(vals) == 5 and all(0 <= v <= 1 for d in vals for v in d.values())
    assert tr.teacher is not None  # KD from the trained full network after phase 1
    # The final checkpoint loads safely and fully into the space it records.
    net = load_supernet(out / FINAL_NAME)
    assert net.space == space
    for k, v in tr.net.state_dict().items():
        assert torch.equal(net.state_dict()[k], v.float() if v.is_floating_point() else v)
    meta = read_train_meta(out / FINAL_NAME)
    assert meta["complete"] is True
    assert [p["phase"] for p in meta["phases"]] == [r["phase"] for r in done]
    lines = (out / LOG_NAME).read_text().splitlines()
    assert len(lines) == len(tr.state.log) and json.loads(lines[-1])["phase"] == "expand2"
    raw = torch.load(out / FINAL_NAME, weights_only=True)
    assert set(raw) == {"format", "space", "state_dict", "train"}


@pytest.mark.slow
def test_resume_is_bitwise_identical(full_run, space, tmp_path):
    ref, _ = full_run
    # Interrupt mid-epoch in the kernel phase (step 4), then mid-epoch in expand1 (step 11).
    tr = Trainer(space, _cfg(space), _data(), tmp_path)
    assert tr.run(max_steps=4) == "stopped"
    assert (tmp_path / STATE_NAME).is_file()
    partial = read_train_meta(tmp_path / FINAL_NAME)  # a usable, labelled partial checkpoint
    assert partial["complete"] is False and partial["progress"] == {"phase": 1, "epoch": 0, "step": 1}
    tr = Trainer(space, _cfg(space), _data(), tmp_path)
    assert tr.run(resume=True, max_steps=11) == "stopped"
    assert (tr.state.phase, tr.state.step) == (3, 2)
    tr = Trainer(space, _cfg(space), _data(), tmp_path)
    assert tr.run(resume=True) == "done"
    a, b = _params(ref.net), _params(tr.net)
    assert a.keys() == b.keys()
    bad = [k for k in a if not torch.equal(a[k], b[k])]
    assert not bad, f"{len(bad)} tensors differ after resume, e.g. {bad[:3]}"
    assert all(torch.equal(x, y) for x, y in zip(_params(ref.teacher).values(), _params(tr.teacher).values()))
    assert [r["phase"] for r in tr.state.log] == [r["phase"] for r in ref.state.log]


def test_resume_refuses_changed_settings(space, tmp_path):
    tr = Trainer(space, _cfg(space), _data(), tmp_path)
    torch.manual_seed(123)
    before = torch.get_rng_state()
    assert tr.run(max_steps=1) == "stopped"
    assert torch.equal(torch.get_rng_state(), before)  # steps seed dropout inside a fork: no global state
    other = Trainer(space, _cfg(space, label_smoothing=0.0), _data(), tmp_path)
    with pytest.raises(BadInputError, match="label_smoothing"):
        other.run(resume=True)


def test_parse_epochs():
    assert parse_epochs("full=3,kernel=2,depth=1,expand2=5") == {"full": 3, "kernel": 2, "depth": 1, "expand2": 5}
    with pytest.raises(BadInputError, match="widht"):
        parse_epochs("widht=3")
    with pytest.raises(BadInputError, match="batch size"):
        Trainer(SearchSpace(name="x", in_channels=1, n_classes=10, resolutions=(28,)),
                TrainConfig(phases=(), batch_size=64), _data(), "/nonexistent")


def _write_idx(folder, n_train=40, n_test=8):
    import gzip
    import struct

    from nagkit.images.fmnist import FILES

    rng = np.random.default_rng(1)
    for split, n in (("train", n_train), ("test", n_test)):
        y = rng.integers(0, 10, n).astype(np.uint8)
        x = rng.integers(0, 256, (n, 28, 28)).astype(np.uint8)
        for stem, arr in zip(FILES[split], (x, y)):
            hdr = struct.pack(">BBBB", 0, 0, 8, arr.ndim) + struct.pack(f">{arr.ndim}I", *arr.shape)
            (folder / (stem + ".gz")).write_bytes(gzip.compress(hdr + arr.tobytes()))


@pytest.mark.slow
def test_cli_train_eval_and_corrupt_data(space, tmp_path, cli_env):
    import subprocess
    import sys

    data = tmp_path / "idx"
    data.mkdir()
    _write_idx(data)
    ws = tmp_path / "ws"
    ws.mkdir()
    sp = "\n".join(f"{k} = {json.dumps(v)}" for k, v in space.to_dict().items() if k != "labels")
    (ws / "nagkit.toml").write_text(f'name = "t"\nlatency_table = "synthetic:"\naccuracy = "supernet:supernet/supernet.pt"\n'
                                    f'supernet = "supernet/supernet.pt"\n[space]\n{sp}\n')
    env = {**cli_env, "NAGKIT_FMNIST_DIR": str(data)}

    def nagkit(*args):
        return subprocess.run([sys.executable, "-m", "nagkit", *args], env=env, capture_output=True, text=True,
                              timeout=300)

    r = nagkit("supernet", "train", "--workspace", str(ws), "--device", "cpu", "--threads", "1", "--epochs",
               "full=1,kernel=1,depth=1,expand=1", "--batch-size", "16", "--n-val", "8", "--eval-per-phase", "--json")
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert res["status"] == "done" and [p["phase"] for p in res["phases"]][-1] == "expand2"
    r = nagkit("supernet", "eval", "--workspace", str(ws), "--device", "cpu", "--calib-images", "16", "--json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)["results"]
    assert len(rows) == 2 and all(0 <= x["accuracy"] <= 1 for x in rows)
    # A truncated IDX file: exit 2 and a message naming the file and the problem.
    p = data / "train-images-idx3-ubyte.gz"
    p.write_bytes(p.read_bytes()[:200])
    r = nagkit("supernet", "train", "--workspace", str(ws), "--device", "cpu", "--out", str(tmp_path / "o2"))
    assert r.returncode == 2
    assert "train-images-idx3-ubyte.gz" in r.stderr and "truncated or corrupt gzip" in r.stderr
    # CUDA graphs asked for on the CPU: a clear error before any work, nothing written
    r = nagkit("supernet", "train", "--workspace", str(ws), "--device", "cpu", "--cuda-graphs",
               "--out", str(tmp_path / "o3"))
    assert r.returncode == 2 and "--cuda-graphs needs --device cuda" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "o3").exists()


def test_recalibrate_and_finetune_subnet(space, tmp_path):
    from nagkit.data.supernet_acc import split_settings
    from nagkit.supernet import OFAMobileNetV3
    from nagkit.supernet.finetune import Recipe, finetune_subnet, recalibrate_subnet

    _write_idx(tmp_path, n_train=48)
    split = split_settings({"n_val": 8, "calib_images": 16, "data_dir": str(tmp_path), "workers": 2})
    assert (split.n_val, split.calib_images, split.val_seed, split.data_dir) == (8, 16, 0, str(tmp_path))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        net = OFAMobileNetV3(space)
    arch = space.smallest(32)
    sub = net.extract(arch)
    before = sub.blocks[1].conv.depth_conv.bn.running_var.clone()
    recalibrate_subnet(sub, space, split)
    after = sub.blocks[1].conv.depth_conv.bn.running_var.clone()
    assert not torch.equal(before, after) and not sub.training
    again = recalibrate_subnet(net.extract(arch), space, split)  # same images: same statistics
    assert torch.equal(again.blocks[1].conv.depth_conv.bn.running_var, after)
    w0 = sub.classifier.linear.weight.clone()
    tuned = finetune_subnet(sub, space, split, epochs=1, recipe=Recipe(batch_size=16))
    out = tuned(torch.zeros(2, 1, 32, 32))
    assert out.shape == (2, 10) and torch.isfinite(out).all()
    assert not torch.equal(w0, tuned.classifier.linear.weight)
    with pytest.raises(BadInputError, match="at least 1 epoch"):
        finetune_subnet(sub, space, split, epochs=0)
