"""The supernet accuracy source on a tiny checkpoint and tiny IDX files (CPU)."""

from __future__ import annotations

import gzip
import json
import struct

import numpy as np
import pytest
import torch

from nagkit.data.accuracy import open_accuracy_source
from nagkit.images.fmnist import FILES
from nagkit.data.supernet_acc import SupernetEvaluator, read_results
from nagkit.errors import ArtifactError, BadInputError
from nagkit.io import atomic_torch_save
from nagkit.space import SearchSpace
from nagkit.space.sampling import sample_many
from nagkit.supernet import OFAMobileNetV3


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("acc")
    rng = np.random.default_rng(0)
    for split, n in (("train", 60), ("test", 20)):
        y = rng.integers(0, 10, n).astype(np.uint8)
        x = rng.integers(0, 60, (n, 28, 28)).astype(np.uint8)
        for i, c in enumerate(y):
            x[i, 2 + 2 * c: 4 + 2 * c] = 250
        for stem, arr in zip(FILES[split], (x, y)):
            hdr = struct.pack(">BBBB", 0, 0, 8, arr.ndim) + struct.pack(f">{arr.ndim}I", *arr.shape)
            (root / (stem + ".gz")).write_bytes(gzip.compress(hdr + arr.tobytes()))
    space = SearchSpace(name="tiny-fm", width_mult=0.25, base_stage_width=(16, 16, 24, 40, 80, 112, 160, 120, 160),
                        ks_list=(3, 5), expand_list=(2, 4), depth_list=(1, 2), resolutions=(28, 32), stem_stride=1,
                        in_channels=1, n_classes=10, dropout=0.0, mean=(0.5,), std=(0.5,))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        net = OFAMobileNetV3(space)
    ckpt = root / "supernet.pt"
    atomic_torch_save(ckpt, {"format": "nagkit-supernet/1", "space": space.to_dict(), "state_dict": net.state_dict(),
                             "train": "{}"})
    opts = {"data_dir": str(root), "n_val": 12, "calib_images": 16, "batch_size": 8}
    return space, ckpt, opts, root


def test_accuracies_are_fractions_and_counted(setup):
    space, ckpt, opts, _ = setup
    src = open_accuracy_source(f"supernet:{ckpt}", space, options=opts)
    archs = [space.smallest(), space.largest()] + sample_many(space, 2, 1)
    acc = src.evaluate(archs)
    assert acc.shape == (4,) and np.all((acc >= 0) & (acc <= 1))
    assert np.all(acc * 12 == np.round(acc * 12))  # fractions of the 12 validation images
    assert src.queries == 4
    prov = src.provenance()
    assert prov["name"] == "supernet" and prov["n_val"] == 12 and len(prov["ckpt_sha256"]) == 64
    again = src.evaluate(archs[:2])
    assert np.array_equal(again, acc[:2]) and src.queries == 6  # deterministic, every arch counted


def test_test_split_and_bad_options(setup):
    space, ckpt, opts, _ = setup
    ev = SupernetEvaluator(ckpt, space, {**opts, "split": "test"})
    acc = ev([space.largest()])
    assert np.all(acc * 20 == np.round(acc * 20))  # fractions of the 20 test images
    with pytest.raises(BadInputError, match="calib_imgs.*did you mean 'calib_images'"):
        SupernetEvaluator(ckpt, space, {"calib_imgs": 3})
    with pytest.raises(BadInputError, match="valid: val, test"):
        SupernetEvaluator(ckpt, space, {"split": "train"})


def test_cache_resumes_after_interruption(setup, tmp_path):
    space, ckpt, opts, _ = setup
    cache = tmp_path / "acc.jsonl"
    archs = sample_many(space, 4, 7)
    first = SupernetEvaluator(ckpt, space, {**opts, "cache": str(cache)})
    a = first(archs[:2])
    with open(cache, "a") as f:
        f.write('{"arch": "r28-k3')  # torn line of a killed run
    rows = read_results(cache)
    assert list(rows) == [str(x) for x in archs[:2]]
    second = SupernetEvaluator(ckpt, space, {**opts, "cache": str(cache)})
    b = second(archs)
    assert np.array_equal(b[:2], a)
    fresh = SupernetEvaluator(ckpt, space, opts)(archs)
    assert np.array_equal(b, fresh)  # cached rows equal a fresh evaluation
    lines = [ln for ln in cache.read_text().splitlines() if ln.startswith('{"arch": "r') and ln.endswith("}")]
    assert [json.loads(ln)["arch"] for ln in lines] == [str(x) for x in archs]
    with pytest.raises(ArtifactError, match="other settings"):
        SupernetEvaluator(ckpt, space, {**opts, "calib_images": 8, "cache": str(cache)})


@pytest.mark.slow
def test_cpu_workers_match_one_process(setup):
    space, ckpt, opts, _ = setup
    archs = sample_many(space, 4, 3)
    one = SupernetEvaluator(ckpt, space, opts)(archs)
    ev = SupernetEvaluator(ckpt, space, {**opts, "workers": 2, "threads": 1})
    try:
        two = ev(archs)
    finally:
        ev.close()
    assert np.array_equal(one, two)


def test_validation_split_follows_the_checkpoint(setup, tmp_path):
    space, ckpt, opts, _ = setup
    raw = torch.load(ckpt, weights_only=True)
    raw["train"] = json.dumps({"data": {"n_val": 12, "val_seed": 3}})
    p = tmp_path / "trained.pt"
    atomic_torch_save(p, raw)
    ev = SupernetEvaluator(p, space, {k: v for k, v in opts.items() if k != "n_val"})
    assert (ev.opts["n_val"], ev.opts["val_seed"]) == (12, 3)
    with pytest.raises(BadInputError, match="val_seed=0 differs .* would overlap training images"):
        SupernetEvaluator(p, space, {**opts, "val_seed": 0})


@pytest.mark.slow
def test_sharded_collection_under_torchrun_resumes_and_merges(setup, tmp_path):
    """`torchrun --nproc-per-node 2 -m nagkit.data.supernet_acc ...` on CPU: each rank writes its
    shard, a rerun evaluates nothing new, --merge joins the shards."""
    import os
    import subprocess
    import sys

    space, ckpt, opts, root = setup
    out = tmp_path / "acc"
    args = ["--ckpt", str(ckpt), "--num-archs", "4", "--seed", "3", "--out", str(out), "--data-dir", str(root),
            "--device", "cpu", "--n-val", "12", "--calib-images", "16"]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "-m", "nagkit.data.supernet_acc"]
    subprocess.run(cmd + args, check=True, env=env, capture_output=True, timeout=300)
    shards = {p.name: read_results(p) for p in sorted(out.glob("acc.rank*.jsonl"))}
    assert sorted(shards) == ["acc.rank0.jsonl", "acc.rank1.jsonl"]
    assert [len(v) for v in shards.values()] == [2, 2]
    before = {p: p.read_bytes() for p in out.glob("acc.rank*.jsonl")}
    subprocess.run(cmd + args, check=True, env=env, capture_output=True, timeout=300)
    assert {p: p.read_bytes() for p in out.glob("acc.rank*.jsonl")} == before  # resumed: nothing re-evaluated
    subprocess.run([sys.executable, "-m", "nagkit.data.supernet_acc", *args, "--merge"], check=True, env=env,
                   capture_output=True, timeout=120)
    merged = read_results(out / "acc.jsonl")
    want = {str(a) for a in sample_many(space, 4, 3)}
    assert set(merged) == want
    assert all(0.0 <= v <= 1.0 for v in merged.values())
    direct = SupernetEvaluator(ckpt, space, {**opts, "batch_size": 1000})(space.parse_arch(a) for a in sorted(want))
    assert np.allclose(direct, [merged[a] for a in sorted(want)])


def test_evaluation_leaves_the_callers_thread_count(setup):
    space, ckpt, opts, _ = setup
    src = open_accuracy_source(f"supernet:{ckpt}", space, options={**opts, "threads": 1})
    torch.set_num_threads(2)  # the one_thread fixture restores the count afterwards
    src.evaluate([space.smallest()])
    assert torch.get_num_threads() == 2
