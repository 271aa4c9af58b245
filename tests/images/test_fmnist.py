"""Fashion-MNIST IDX reading: real files, and corrupt/truncated/mismatched files refused clearly."""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import numpy as np
import pytest

from nagkit.images import fmnist
from nagkit.errors import ArtifactError, BadInputError


def _idx(arr: np.ndarray) -> bytes:
    return struct.pack(">BBBB", 0, 0, 0x08, arr.ndim) + struct.pack(f">{arr.ndim}I", *arr.shape) + arr.tobytes()


def _write_set(folder: Path, n_train=30, n_test=10, gz=True, seed=0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    out = None
    for split, n in (("train", n_train), ("test", n_test)):
        x = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
        y = rng.integers(0, 10, n).astype(np.uint8)
        for stem, arr in zip(fmnist.FILES[split], (x, y)):
            data = _idx(arr)
            (folder / (stem + (".gz" if gz else ""))).write_bytes(gzip.compress(data) if gz else data)
        if split == "train":
            out = (x, y)
    return out


@pytest.mark.parametrize("gz", [True, False])
def test_reads_gz_and_raw(tmp_path, gz):
    x, y = _write_set(tmp_path, gz=gz)
    gx, gy = fmnist.load_split("train", tmp_path)
    assert np.array_equal(gx, x) and np.array_equal(gy, y) and gy.dtype == np.int64


def test_validation_split_is_seeded_and_disjoint(tmp_path):
    x, _ = _write_set(tmp_path)
    a = fmnist.load_splits(tmp_path, n_val=8, seed=3)
    b = fmnist.load_splits(tmp_path, n_val=8, seed=3)
    c = fmnist.load_splits(tmp_path, n_val=8, seed=4)
    assert np.array_equal(a.val_x, b.val_x) and not np.array_equal(a.val_x, c.val_x)
    assert len(a.train_x) == 22 and len(a.val_x) == 8 and len(a.test_x) == 10
    rows = {r.tobytes() for r in a.train_x} | {r.tobytes() for r in a.val_x}
    assert rows == {r.tobytes() for r in x}
    with pytest.raises(BadInputError, match="validation size 30"):
        fmnist.load_splits(tmp_path, n_val=30)


def test_truncated_payload_refused(tmp_path):
    _write_set(tmp_path, gz=False)
    p = tmp_path / "train-images-idx3-ubyte"
    p.write_bytes(p.read_bytes()[:-100])
    with pytest.raises(ArtifactError, match=r"train-images-idx3-ubyte.*truncated.*needs 23520 data bytes.*23420"):
        fmnist.load_split("train", tmp_path)


def test_truncated_gzip_refused(tmp_path):
    _write_set(tmp_path, gz=True)
    p = tmp_path / "train-labels-idx1-ubyte.gz"
    p.write_bytes(p.read_bytes()[:20])
    with pytest.raises(ArtifactError, match="truncated or corrupt gzip"):
        fmnist.load_split("train", tmp_path)


def test_bad_magic_and_shape_refused(tmp_path):
    _write_set(tmp_path, gz=False)
    p = tmp_path / "train-images-idx3-ubyte"
    raw = bytearray(p.read_bytes())
    raw[0] = 0x42
    p.write_bytes(bytes(raw))
    with pytest.raises(ArtifactError, match="bad magic number 0x42000803"):
        fmnist.load_split("train", tmp_path)
    arr = np.zeros((30, 32, 32), np.uint8)  # wrong image size
    p.write_bytes(_idx(arr))
    with pytest.raises(ArtifactError, match=r"shape \(30, 32, 32\); dimension 1 should be 28"):
        fmnist.load_split("train", tmp_path)


def test_label_count_and_range_checked(tmp_path):
    _write_set(tmp_path, gz=False)
    (tmp_path / "train-labels-idx1-ubyte").write_bytes(_idx(np.zeros(29, np.uint8)))
    with pytest.raises(ArtifactError, match="30 images but .* 29 labels"):
        fmnist.load_split("train", tmp_path)
    (tmp_path / "train-labels-idx1-ubyte").write_bytes(_idx(np.full(30, 12, np.uint8)))
    with pytest.raises(ArtifactError, match="label 12"):
        fmnist.load_split("train", tmp_path)


def test_missing_files_say_how_to_install(tmp_path):
    with pytest.raises(BadInputError, match="dataset-fashion-mnist"):
        fmnist.load_split("train", tmp_path)
    with pytest.raises(BadInputError, match="does not exist"):
        fmnist.data_dir(tmp_path / "nope")


def test_preprocess_and_augment_shapes():
    import torch

    x = np.full((4, 28, 28), 255, np.uint8)
    y = fmnist.preprocess(x, 36, (0.5,), (0.5,))
    assert y.shape == (4, 1, 36, 36) and torch.allclose(y, torch.ones_like(y))
    img = torch.zeros(64, 1, 28, 28, dtype=torch.uint8)
    img[:, :, :, :14] = 200  # left half bright: flips and shifts move it
    g1, g2 = torch.Generator().manual_seed(0), torch.Generator().manual_seed(0)
    a, b = fmnist.augment(img, g1), fmnist.augment(img, g2)
    assert torch.equal(a, b) and a.shape == img.shape and a.dtype == torch.uint8
    assert not torch.equal(a, img)
    assert (a[:, 0, 10, -1] == 200).any() and (a[:, 0, 10, 0] == 200).any()  # both orientations occur


@pytest.mark.skipif(not (fmnist.DEFAULT_DIR / "train-labels-idx1-ubyte.gz").exists(),
                    reason="Debian's dataset-fashion-mnist is not installed")
def test_debian_files():
    x, y = fmnist.load_split("test")
    assert x.shape == (10000, 28, 28) and np.bincount(y).tolist() == [1000] * 10
