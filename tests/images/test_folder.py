"""A user's ImageFolder for fine-tuning: layouts, the seeded split, and every bad input of
issue 16 (exit 2, one clear line; corrupt images skipped and counted)."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from nagkit.errors import EXIT_BAD_INPUT, BadInputError, exit_code_for
from nagkit.images.folder import batches, open_image_folder, split_indices
from nagkit.space import get_space


def _folder(root, classes=("a", "b", "c"), n=6, size=(20, 20), split="train", mode="RGB", seed=0):
    rng = np.random.default_rng(seed)
    for c in classes:
        d = root / split / c if split else root / c
        d.mkdir(parents=True, exist_ok=True)
        for i in range(n):
            arr = rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)
            Image.fromarray(arr).convert(mode).save(d / f"{i}.png")
    return root


def _bad(root, match, **kw):
    with pytest.raises(BadInputError, match=match) as ei:
        open_image_folder(root, channels=kw.pop("channels", 3), **kw)
    assert exit_code_for(ei.value) == EXIT_BAD_INPUT and "\n" not in ei.value.message
    return ei.value


def test_train_and_val_folders(tmp_path):
    _folder(tmp_path, n=4)
    _folder(tmp_path, n=2, split="val", seed=1)
    d = open_image_folder(tmp_path, channels=1)
    assert d.classes == ["a", "b", "c"] and len(d.train) == 12 and len(d.val) == 6 and d.val_source == "val/"
    assert d.train.images[0].shape == (1, 20, 20) and d.train.images[0].dtype.is_floating_point is False
    assert sorted(d.train.labels.tolist()) == [0] * 4 + [1] * 4 + [2] * 4


def test_seeded_split_without_val(tmp_path):
    _folder(tmp_path, n=10, split=None)  # class folders right in DIR
    a = open_image_folder(tmp_path, channels=3, val_fraction=0.2, seed=3)
    b = open_image_folder(tmp_path, channels=3, val_fraction=0.2, seed=3)
    assert len(a.train) == 24 and len(a.val) == 6 and "seeded split" in a.val_source
    assert all(np.array_equal(x.numpy(), y.numpy()) for x, y in zip(a.val.images, b.val.images))
    assert np.bincount(a.val.labels).tolist() == [2, 2, 2]
    tr, va = split_indices(np.array([0, 0, 1, 1, 1]), 0.5, 0)
    assert sorted(tr.tolist() + va.tolist()) == [0, 1, 2, 3, 4] and set(np.array([0, 0, 1, 1, 1])[va]) == {0, 1}


def test_mixed_sizes_are_refused_unless_asked_for(tmp_path):
    """Images of several sizes: refused with the sizes named and the fix; with mixed_sizes, each
    image is converted and resized by the space's transform."""
    _folder(tmp_path, classes=("a", "b"), n=3, size=(20, 30))
    _folder(tmp_path, classes=("a", "b"), n=2, size=(64, 48), mode="L", seed=2)  # overwrites 0.png, 1.png
    with pytest.raises(BadInputError, match=r"mixes 2 image sizes: 64x48 \(4 images\), 20x30 \(2 images\)") as e:
        open_image_folder(tmp_path, channels=3, val_fraction=0.34)
    assert "--mixed-sizes" in e.value.hint
    d = open_image_folder(tmp_path, channels=3, val_fraction=0.34, mixed_sizes=True)
    assert len(d.sizes) == 2
    sp = get_space("ofa-mbv3-w1.0")
    xs = [x for x, _ in batches(d.train, sp, 128, 4)]
    assert all(x.shape[1:] == (3, 128, 128) for x in xs)


def test_corrupt_images_are_skipped_and_counted(tmp_path):
    _folder(tmp_path, n=4)
    (tmp_path / "train" / "a" / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 40)
    (tmp_path / "train" / "b" / "empty.jpg").write_bytes(b"")
    good = (tmp_path / "train" / "c" / "0.png").read_bytes()
    (tmp_path / "train" / "c" / "cut.png").write_bytes(good[: len(good) // 2])
    d = open_image_folder(tmp_path, channels=3, val_fraction=0.25)
    assert len(d.skipped) == 3 and len(d.train) + len(d.val) == 12
    assert d.summary()["skipped_images"] == 3
    for name in ("broken.png", "empty.jpg", "cut.png"):
        assert any(p.endswith(name) for p, _ in d.skipped)


def test_bad_inputs(tmp_path):
    _bad(tmp_path / "nope", "does not exist")
    (tmp_path / "empty").mkdir()
    _bad(tmp_path / "empty", "has no class folders")
    _folder(tmp_path / "one", classes=("only",))
    _bad(tmp_path / "one", "1 class .*at least 2")
    (tmp_path / "noimg" / "train" / "a").mkdir(parents=True)
    (tmp_path / "noimg" / "train" / "b").mkdir(parents=True)
    _bad(tmp_path / "noimg", "no images")
    _folder(tmp_path / "mis", n=3)
    _folder(tmp_path / "mis", classes=("a", "b"), n=2, split="val")
    err = _bad(tmp_path / "mis", "label mismatch: .* has 2 classes .* has 3")
    assert "DIR/train/<class>" in err.hint
    _folder(tmp_path / "allbad", classes=("a", "b"), n=2)
    for p in (tmp_path / "allbad" / "train" / "b").iterdir():
        p.write_bytes(b"not an image")
    _bad(tmp_path / "allbad", "'b' have no readable image .*2 file")
    _folder(tmp_path / "tiny", classes=("a", "b"), n=1)
    _bad(tmp_path / "tiny", "needs at least 2 per class")
    _bad(tmp_path / "tiny", "between 0 and 1", val_fraction=1.5)


def test_a_link_loop_is_walked_once_and_no_image_counts_twice(tmp_path):
    """Issue 35, defect 2 (high): ``a/u1 -> ..`` and ``b/u2 -> ..`` made torchvision's walk loop
    forever; ``a/loop -> .`` turned 8 images into 168. Each real folder and file is read once."""
    _folder(tmp_path, classes=("a", "b"), n=4, split=None)
    (tmp_path / "a" / "u1").symlink_to("..", target_is_directory=True)
    (tmp_path / "b" / "u2").symlink_to("..", target_is_directory=True)
    (tmp_path / "a" / "loop").symlink_to(".", target_is_directory=True)
    (tmp_path / "a" / "into-b").symlink_to("../b", target_is_directory=True)  # never relabels b's images
    (tmp_path / "b" / "again.png").symlink_to(tmp_path / "b" / "0.png")  # a file link: the same image
    d = open_image_folder(tmp_path, channels=3, val_fraction=0.25, seed=0)
    assert d.classes == ["a", "b"] and len(d.train) + len(d.val) == 8
    assert sorted(np.concatenate([d.train.labels, d.val.labels]).tolist()) == [0] * 4 + [1] * 4
    reasons = {p.rsplit("/", 1)[-1]: why for p, why in d.skipped}
    assert set(reasons) == {"u1", "u2", "loop", "into-b", "again.png"}
    assert "already read" in reasons["loop"] and "same file" in reasons["again.png"]


def test_a_linked_folder_is_followed_once_and_train_val_never_share_a_file(tmp_path):
    """A class gathered from elsewhere by a folder link is read (once, however many links point
    at it); the same file under train/ and val/ is counted in train only."""
    elsewhere = _folder(tmp_path / "elsewhere", classes=("x",), n=3, split=None) / "x"
    _folder(tmp_path / "data", classes=("a", "b"), n=3)
    _folder(tmp_path / "data", classes=("a", "b"), n=1, split="val", seed=5)
    (tmp_path / "data" / "train" / "b" / "more").symlink_to(elsewhere, target_is_directory=True)
    (tmp_path / "data" / "train" / "b" / "more-again").symlink_to(elsewhere, target_is_directory=True)
    (tmp_path / "data" / "val" / "a" / "leak.png").symlink_to(tmp_path / "data" / "train" / "a" / "1.png")
    d = open_image_folder(tmp_path / "data", channels=3)
    assert np.bincount(d.train.labels).tolist() == [3, 6] and np.bincount(d.val.labels).tolist() == [1, 1]
    assert [why for p, why in d.skipped if p.endswith("leak.png")] == [
        f"the same file as {tmp_path / 'data' / 'train' / 'a' / '1.png'} (counted once)"]
