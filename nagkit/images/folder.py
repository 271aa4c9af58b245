"""A user's labelled images as an ImageFolder (walked by nagkit, decoded with PIL), for fine-tuning.

Layout: ``DIR/train/<class>/*.png`` (any of torchvision's image suffixes), and either
``DIR/val/<class>/...`` or a seeded, per-class split of the training images (``val_fraction``,
at least one image of each class). ``DIR/<class>/...`` without ``train/`` is the training set
too (a ``val/`` beside the class folders is then the validation set, not a class). Labels are
the class folder names, sorted (torchvision's order).

Links (issue 35): the folders are walked by nagkit, not by torchvision's ``os.walk(followlinks=
True)``, which loops forever on ``a/u -> ..``. The rule is *each real folder once, each real file
once*. The root and every class folder are claimed first, so a link to a class folder, up to the
root or into another class is a folder already seen and is not followed (it is listed in
``skipped``); any other folder link is followed once, so a class may be gathered from elsewhere by
links. A file is identified by its device and inode: the same image reached twice (a file link, a
hard link, or the same file under train/ and val/) counts once, where it was first met (sorted
order, train before val), and the others are listed in ``skipped``.

Every image is decoded once up front (PIL), converted to the space's color (``RGB`` or ``L``)
and kept in memory as a uint8 ``[C, H, W]`` tensor, so training never meets a bad file: an image
that cannot be decoded is skipped and counted (:attr:`FolderData.skipped`). The images must all
have one size, whatever it is (the space's transform resizes it to the resolution); images of
several sizes are refused unless ``mixed_sizes`` (``--mixed-sizes``) says to resize each by the
transform: a folder that mixes sizes is often a mistake (thumbnails beside originals, another
camera), and resizing it unasked would change what the model sees without a word. Refused with a
:class:`BadInputError` (exit 2): a missing or empty folder, fewer than two classes, a class
without a readable image, ``val/`` classes that differ from ``train/``'s, images of several
sizes (unless ``mixed_sizes``), a class too small to split, more than ``max_images``.
"""

from __future__ import annotations

import os
import stat
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from nagkit.errors import BadInputError

MAX_IMAGES = 100_000
MAX_PIXELS = 64_000_000  # per image: PIL's decompression-bomb guard, stricter
MAX_BYTES = 2 << 30  # all decoded images together (they are kept in memory)
# torchvision's ImageFolder suffixes (lower case; a file's suffix is compared in lower case)
IMG_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")
_HINT = "lay the images out as DIR/train/<class>/*.png (and DIR/val/<class>/...), one folder per class"


@dataclass
class ImageSet:
    """Decoded images (uint8 ``[C, H, W]`` tensors) and their labels."""

    images: list
    labels: np.ndarray

    def __len__(self) -> int:
        return len(self.images)


@dataclass
class FolderData:
    """The train and val sets of an ImageFolder, with what was skipped and how."""

    root: Path
    classes: list[str]
    train: ImageSet
    val: ImageSet
    val_source: str  # "val/" or "seeded split (fraction f, seed s)"
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path, reason)
    sizes: Counter = field(default_factory=Counter)  # (width, height) -> count

    def summary(self) -> dict[str, Any]:
        return {"dir": str(self.root), "classes": list(self.classes), "train_images": len(self.train),
                "val_images": len(self.val), "val": self.val_source, "skipped_images": len(self.skipped),
                "skipped_examples": [f"{p}: {why}" for p, why in self.skipped[:5]],
                "image_sizes": len(self.sizes)}


def _decode(path: str, mode: str):
    """(uint8 tensor [C, H, W], (w, h)) of one image file, or raise with the reason."""
    import torch
    from PIL import Image

    with warnings.catch_warnings():
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        with Image.open(path) as im:
            if im.width * im.height > MAX_PIXELS:
                raise ValueError(f"{im.width}x{im.height} pixels is over the limit of {MAX_PIXELS}")
            im.load()
            size = im.size
            arr = np.asarray(im.convert(mode), dtype=np.uint8)
    t = torch.from_numpy(arr.copy())
    return (t.unsqueeze(0) if t.ndim == 2 else t.permute(2, 0, 1).contiguous()), size


def _scan(folder: Path, what: str, seen_files: dict[tuple[int, int], str], skipped: list,
          max_images: int, exclude: frozenset[str] = frozenset()) -> tuple[list[str], list[tuple[str, int]]]:
    """The class names and (path, label) samples under ``folder``, walked by the link rules of
    the module docstring: each real folder once, each real file once (``seen_files``, shared by
    train and val), class folders claimed before any is walked."""
    if not folder.is_dir():
        raise BadInputError(f"image folder {str(folder)!r} does not exist or is not a folder", hint=_HINT)
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError as e:
        raise BadInputError(f"{what} folder {str(folder)!r} cannot be read: {e.strerror}", hint=_HINT) from None
    class_dirs = [e for e in entries if e.is_dir(follow_symlinks=True) and not e.name.startswith(".")
                  and e.name not in exclude]
    if not class_dirs:
        raise BadInputError(f"{what} folder {str(folder)!r} has no class folders (it is empty)", hint=_HINT)
    classes = [e.name for e in class_dirs]
    if len(classes) < 2:
        raise BadInputError(f"{what} folder {str(folder)!r} has {len(classes)} class ({', '.join(classes)}); "
                            "fine-tuning a classifier needs at least 2", hint=_HINT)
    # Claim the root and every class folder first: a link into another class (or up to the root)
    # is then a folder already seen, and never relabels or repeats its images.
    seen_dirs = {_identity(folder)} | {_identity(Path(e.path)) for e in class_dirs}
    samples: list[tuple[str, int]] = []
    for label, cdir in enumerate(class_dirs):
        stack = [Path(cdir.path)]
        while stack:
            d = stack.pop()
            try:
                subs = sorted(os.scandir(d), key=lambda e: e.name)
            except OSError as e:
                skipped.append((str(d), f"folder not readable: {e.strerror}"))
                continue
            deeper = []
            for e in subs:
                try:
                    st = os.stat(e.path)  # follows a link: what it points to
                except OSError:
                    skipped.append((e.path, "broken link or unreadable entry"))
                    continue
                ident = (st.st_dev, st.st_ino)
                if stat.S_ISDIR(st.st_mode):
                    if ident in seen_dirs:
                        if e.is_symlink():
                            skipped.append((e.path, "link to a folder already read (not followed again)"))
                        continue
                    seen_dirs.add(ident)
                    deeper.append(Path(e.path))
                elif stat.S_ISREG(st.st_mode) and e.name.lower().endswith(IMG_EXTENSIONS):
                    if ident in seen_files:
                        skipped.append((e.path, f"the same file as {seen_files[ident]} (counted once)"))
                        continue
                    seen_files[ident] = e.path
                    samples.append((e.path, label))
                    if len(samples) > max_images:
                        raise BadInputError(f"{what} folder {str(folder)!r} has more than {max_images} images; "
                                            f"the limit is {max_images}", hint="fine-tune on a subset of the images")
            stack.extend(reversed(deeper))
    if not samples:
        raise BadInputError(f"{what} folder {str(folder)!r} has class folders but no images", hint=_HINT)
    return classes, samples


def _identity(p: Path) -> tuple[int, int]:
    st = p.stat()
    return st.st_dev, st.st_ino


def _load(samples: list[tuple[str, int]], classes: list[str], mode: str, what: str, skipped: list, sizes: Counter,
          max_images: int) -> ImageSet:
    if len(samples) > max_images:
        raise BadInputError(f"{what} has {len(samples)} images; the limit is {max_images}",
                            hint="fine-tune on a subset of the images")
    images, labels, total = [], [], 0
    for path, label in samples:
        try:
            t, size = _decode(path, mode)
        except Exception as e:  # noqa: BLE001 - any file PIL cannot decode is skipped and counted
            skipped.append((path, f"{type(e).__name__}: {str(e).splitlines()[0][:120] if str(e) else ''}"))
            continue
        total += t.numel()
        if total > MAX_BYTES:
            raise BadInputError(f"{what}: the decoded images exceed {MAX_BYTES >> 20} MiB in memory",
                                hint="fine-tune on a subset, or on images scaled down to a few times the resolution")
        images.append(t)
        labels.append(label)
        sizes[size] += 1
    counts = Counter(labels)
    empty = [classes[i] for i in range(len(classes)) if counts[i] == 0]
    if empty:
        raise BadInputError(f"{what}: class(es) {', '.join(repr(c) for c in empty)} have no readable image "
                            f"({len(skipped)} file(s) skipped as unreadable)", hint=_HINT)
    return ImageSet(images, np.asarray(labels, dtype=np.int64))


def split_indices(labels: np.ndarray, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Seeded per-class split: (train indices, val indices), at least one of each class in each."""
    rng = np.random.default_rng(seed)
    tr, va = [], []
    for c in np.unique(labels):
        idx = rng.permutation(np.flatnonzero(labels == c))
        if len(idx) < 2:
            raise BadInputError(f"class {int(c)} has {len(idx)} image; a seeded validation split needs at least "
                                "2 per class", hint="add images, or give a DIR/val folder")
        k = min(len(idx) - 1, max(1, int(round(fraction * len(idx)))))
        va.append(idx[:k])
        tr.append(idx[k:])
    return np.sort(np.concatenate(tr)), np.sort(np.concatenate(va))


def _subset(s: ImageSet, idx: np.ndarray) -> ImageSet:
    return ImageSet([s.images[i] for i in idx], s.labels[idx])


def open_image_folder(root: str | os.PathLike, *, channels: int, val_fraction: float = 0.2, seed: int = 0,
                      max_images: int = MAX_IMAGES, mixed_sizes: bool = False) -> FolderData:
    """Read ``root`` (see the module docstring) as images of ``channels`` channels (1 or 3);
    ``mixed_sizes``: accept images of several sizes (each resized by the space's transform)."""
    if not 0 < val_fraction < 1:
        raise BadInputError(f"the validation fraction must be between 0 and 1, got {val_fraction}")
    root = Path(root).expanduser()
    if not root.is_dir():
        raise BadInputError(f"--data {str(root)!r} does not exist or is not a folder", hint=_HINT)
    train_dir = root / "train" if (root / "train").is_dir() else root
    mode = "RGB" if channels == 3 else "L"
    skipped: list[tuple[str, str]] = []
    sizes: Counter = Counter()
    seen_files: dict[tuple[int, int], str] = {}
    has_val = (root / "val").is_dir()
    classes, samples = _scan(train_dir, "the training", seen_files, skipped, max_images,
                             exclude=frozenset({"val"}) if has_val and train_dir == root else frozenset())
    if has_val:
        val_classes, val_samples = _scan(root / "val", "the validation", seen_files, skipped, max_images)
        if val_classes != classes:
            raise BadInputError(
                f"label mismatch: {str(root / 'val')!r} has {len(val_classes)} classes "
                f"({', '.join(val_classes[:8])}), {str(train_dir)!r} has {len(classes)} ({', '.join(classes[:8])}); "
                "they must have the same class folders", hint=_HINT)
        train = _load(samples, classes, mode, f"{str(train_dir)!r}", skipped, sizes, max_images)
        val = _load(val_samples, classes, mode, f"{str(root / 'val')!r}", skipped, sizes, max_images)
        source = "val/"
    else:
        both = _load(samples, classes, mode, f"{str(train_dir)!r}", skipped, sizes, max_images)
        tr, va = split_indices(both.labels, val_fraction, seed)
        train, val = _subset(both, tr), _subset(both, va)
        source = f"seeded split of the training images (fraction {val_fraction:g}, seed {seed})"
    if len(sizes) > 1 and not mixed_sizes:
        common = ", ".join(f"{w}x{h} ({n} image{'s' if n > 1 else ''})" for (w, h), n in sizes.most_common(3))
        raise BadInputError(f"--data {str(root)!r} mixes {len(sizes)} image sizes: {common}"
                            + (", ..." if len(sizes) > 3 else ""),
                            hint="make them one size, or pass --mixed-sizes to resize each image by the space's "
                                 "transform (the bundle's manifest shows it)")
    return FolderData(root, classes, train, val, source, skipped, sizes)


def batches(s: ImageSet, space, r: int, batch_size: int, *, shuffle=None,
            augment=None, device="cpu", limit: int | None = None):
    """(x, y) batches of ``s`` at resolution ``r``: the space's transform, or with ``augment`` (a
    generator) the train-time augmentation of :mod:`nagkit.images.preprocessing`; in order, or
    shuffled by ``shuffle``. A last batch of one image is dropped when augmenting (BN trains
    on batches)."""
    import torch

    from nagkit.images.preprocessing import apply
    from nagkit.images.preprocessing import augment as augment_one

    n = len(s) if limit is None else min(limit, len(s))
    order = torch.randperm(len(s), generator=shuffle)[:n].tolist() if shuffle is not None else list(range(n))
    for i in range(0, n, batch_size):
        idx = order[i:i + batch_size]
        if augment is not None and len(idx) < 2:
            break
        xs = [augment_one(s.images[j], space, r, augment) if augment is not None else apply(s.images[j], space, r)
              for j in idx]
        yield torch.stack(xs).to(device), torch.as_tensor(s.labels[idx]).to(device)
