"""Fashion-MNIST from IDX files (Debian's ``dataset-fashion-mnist``), nothing downloaded.

The four files (``train-images-idx3-ubyte``, ``train-labels-idx1-ubyte``, ``t10k-...``) are
read from :data:`DEFAULT_DIR` or ``--data-dir``, gzipped or raw. Every header is checked
(magic number, element type, number of dimensions, sizes) and the payload length must match
the header exactly, so a truncated or corrupt file is refused with an :class:`ArtifactError`
that names the file and what is wrong; a missing file is a :class:`BadInputError` that says
how to install the package.

Splits: ``train`` minus a seeded validation split (default 5,000 images) is for training,
``val`` for every accuracy the tools use (supernet evaluation, datasets), and ``test`` only
for final reports.

Preprocessing (one definition for training, evaluation and exported models): uint8
``[N, 28, 28]`` -> float ``[N, 1, r, r]`` = bilinear resize (torchvision, no antialias) of
``x / 255``, then ``(x - mean) / std`` with the space's mean and std.
"""

from __future__ import annotations

import gzip
import os
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from nagkit.errors import ArtifactError, BadInputError

DEFAULT_DIR = Path("/usr/share/datasets/fashion-mnist")
ENV_DIR = "NAGKIT_FMNIST_DIR"
FILES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}
N_CLASSES = 10
IMAGE_HW = 28
INSTALL_HINT = ("install Debian's package (sudo apt-get install dataset-fashion-mnist, or `make setup`), "
                "or pass --data-dir with the four IDX files")
MAX_IDX_BYTES = 1 << 30  # Fashion-MNIST's largest file is 47 MB unpacked
# IDX element types: code -> (numpy dtype, size in bytes).
_IDX_TYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def data_dir(path: str | os.PathLike | None = None) -> Path:
    """The folder holding the IDX files: ``path``, else $NAGKIT_FMNIST_DIR, else Debian's."""
    if path is None:
        path = os.environ.get(ENV_DIR) or DEFAULT_DIR
    p = Path(path).expanduser()
    if not p.is_dir():
        raise BadInputError(f"Fashion-MNIST folder {str(p)!r} does not exist", hint=INSTALL_HINT)
    return p


def find_idx(folder: Path, stem: str) -> Path:
    for name in (stem + ".gz", stem, stem.replace("-idx", ".idx") + ".gz", stem.replace("-idx", ".idx")):
        if (folder / name).is_file():
            return folder / name
    present = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
    raise BadInputError(
        f"Fashion-MNIST file {stem!r} (or {stem}.gz) is missing in {str(folder)!r}; the folder holds: "
        f"{', '.join(present) if present else '(nothing)'}", hint=INSTALL_HINT)


def _read_bytes(path: Path) -> bytes:
    from nagkit.io import read_input_file

    raw = read_input_file(path, "IDX file", max_bytes=MAX_IDX_BYTES, error=ArtifactError, hint=INSTALL_HINT)
    if raw[:2] == b"\x1f\x8b":
        try:
            return gzip.decompress(raw)
        except (EOFError, OSError, zlib.error) as e:
            raise ArtifactError(f"IDX file {str(path)!r} is a truncated or corrupt gzip file ({e})",
                                hint="reinstall it: sudo apt-get install --reinstall dataset-fashion-mnist") from None
    return raw


def read_idx(path: str | os.PathLike, *, ndim: int | None = None, dims: tuple[int | None, ...] | None = None
             ) -> np.ndarray:
    """Read one IDX file (gz or raw), checking the header against the payload.

    ``ndim``/``dims`` are the expected number of dimensions and sizes (``None`` = any).
    Raises :class:`ArtifactError` naming the file and the mismatch.
    """
    path = Path(path)
    data = _read_bytes(path)
    fix = "reinstall it: sudo apt-get install --reinstall dataset-fashion-mnist"
    if len(data) < 4:
        raise ArtifactError(f"IDX file {str(path)!r} is truncated: {len(data)} bytes, no header", hint=fix)
    if data[0] != 0 or data[1] != 0 or data[2] not in _IDX_TYPES:
        raise ArtifactError(
            f"IDX file {str(path)!r} has a bad magic number 0x{data[:4].hex()} (expected 0x0000TTNN with element "
            f"type TT in {', '.join(f'0x{t:02x}' for t in _IDX_TYPES)})", hint=fix)
    dtype = np.dtype(_IDX_TYPES[data[2]])
    nd = data[3]
    if ndim is not None and nd != ndim:
        raise ArtifactError(f"IDX file {str(path)!r} has {nd} dimensions; expected {ndim}", hint=fix)
    head = 4 + 4 * nd
    if len(data) < head:
        raise ArtifactError(f"IDX file {str(path)!r} is truncated inside its header ({len(data)} bytes)", hint=fix)
    shape = tuple(int(v) for v in np.frombuffer(data, ">u4", count=nd, offset=4))
    if dims is not None:
        for i, (got, want) in enumerate(zip(shape, dims)):
            if want is not None and got != want:
                raise ArtifactError(f"IDX file {str(path)!r} has shape {shape}; dimension {i} should be {want}",
                                    hint=fix)
    n = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    got = len(data) - head
    if got != n:
        what = "truncated" if got < n else "longer than its header says"
        raise ArtifactError(f"IDX file {str(path)!r} is {what}: the header {shape} needs {n} data bytes, "
                            f"the file has {got}", hint=fix)
    return np.frombuffer(data, dtype, offset=head).reshape(shape).astype(dtype.newbyteorder("="))


def load_split(split: str, folder: str | os.PathLike | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(images uint8 [N, 28, 28], labels int64 [N])`` of ``train`` or ``test``."""
    if split not in FILES:
        raise BadInputError(f"unknown Fashion-MNIST split {split!r}; valid: {', '.join(FILES)}")
    d = data_dir(folder)
    img_p, lab_p = (find_idx(d, s) for s in FILES[split])
    images = read_idx(img_p, ndim=3, dims=(None, IMAGE_HW, IMAGE_HW))
    labels = read_idx(lab_p, ndim=1)
    if images.dtype != np.uint8 or labels.dtype != np.uint8:
        raise ArtifactError(f"Fashion-MNIST files in {str(d)!r} must hold unsigned bytes "
                            f"(got {images.dtype} images, {labels.dtype} labels)")
    if len(images) != len(labels):
        raise ArtifactError(f"{str(img_p)!r} holds {len(images)} images but {str(lab_p)!r} holds {len(labels)} labels",
                            hint="the two files come from different datasets; reinstall dataset-fashion-mnist")
    if len(labels) and int(labels.max()) >= N_CLASSES:
        raise ArtifactError(f"{str(lab_p)!r} holds label {int(labels.max())}; Fashion-MNIST labels are 0..9")
    return images, labels.astype(np.int64)


@dataclass(frozen=True)
class Splits:
    """Train (minus validation), validation and test arrays; uint8 images, int64 labels."""

    train_x: np.ndarray
    train_y: np.ndarray
    val_x: np.ndarray
    val_y: np.ndarray
    test_x: np.ndarray
    test_y: np.ndarray
    provenance: dict[str, Any]

    def split(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        if name not in ("train", "val", "test"):
            raise BadInputError(f"unknown split {name!r}; valid: train, val, test")
        return getattr(self, f"{name}_x"), getattr(self, f"{name}_y")


def split_train_val(n: int, n_val: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Seeded disjoint index sets (train, val) of ``range(n)``; both sorted."""
    if not 0 < n_val < n:
        raise BadInputError(f"validation size {n_val} must be between 1 and {n - 1} (the training set has {n})")
    perm = np.random.default_rng(seed).permutation(n)
    return np.sort(perm[n_val:]), np.sort(perm[:n_val])


@dataclass(frozen=True)
class SplitSettings:
    """Which images: the seeded validation split taken off the training set (``n_val``,
    ``val_seed``) and the seeded subset of the rest used for BN recalibration
    (``calib_images``, ``calib_seed``). ``data_dir`` None: :func:`data_dir`'s default."""

    data_dir: str | None = None
    n_val: int = 5000
    val_seed: int = 0
    calib_images: int = 2000
    calib_seed: int = 0

    def load(self, *, with_test: bool = False) -> Splits:
        return load_splits(self.data_dir, n_val=self.n_val, seed=self.val_seed, with_test=with_test)

    def calibration_indices(self, n_train: int) -> np.ndarray:
        """The sorted indices of the calibration images among ``n_train`` training images."""
        return np.sort(np.random.default_rng(self.calib_seed).permutation(n_train)[: self.calib_images])


def load_splits(folder: str | os.PathLike | None = None, *, n_val: int = 5000, seed: int = 0,
                with_test: bool = True) -> Splits:
    """Fashion-MNIST with a seeded validation split taken off the training set."""
    x, y = load_split("train", folder)
    tr, va = split_train_val(len(x), n_val, seed)
    if with_test:
        tx, ty = load_split("test", folder)
    else:
        tx, ty = np.zeros((0, IMAGE_HW, IMAGE_HW), np.uint8), np.zeros(0, np.int64)
    prov = {"dataset": "fashion-mnist", "dir": str(data_dir(folder)), "n_val": n_val, "val_seed": seed,
            "n_train": int(len(tr)), "n_test": int(len(tx))}
    return Splits(x[tr], y[tr], x[va], y[va], tx, ty, prov)


# -- preprocessing -----------------------------------------------------------------------------
def preprocess(images, resolution: int, mean: tuple[float, ...], std: tuple[float, ...]):
    """uint8 ``[N, 28, 28]`` or ``[N, 1, 28, 28]`` (numpy or torch) -> normalised float
    ``[N, 1, r, r]`` on the tensor's device. The one preprocessing used everywhere."""
    import torch
    from torchvision.transforms.v2 import functional as TF

    x = torch.as_tensor(images)
    if x.ndim == 3:
        x = x.unsqueeze(1)
    x = x.float().div_(255.0)
    if x.shape[-1] != resolution or x.shape[-2] != resolution:
        x = TF.resize(x, [resolution, resolution], interpolation=TF.InterpolationMode.BILINEAR, antialias=False)
    return TF.normalize(x, list(mean), list(std))


def augment(images, generator, pad: int = 2):
    """Per-sample random translation (zero padding ``pad``) and horizontal flip of uint8
    ``[N, 1, H, W]`` images, drawn from ``generator`` (on the images' device)."""
    import torch

    n, _, h, w = images.shape
    dev = images.device
    if pad > 0:
        padded = torch.nn.functional.pad(images, (pad, pad, pad, pad))
        oy = torch.randint(0, 2 * pad + 1, (n,), generator=generator, device=dev)
        ox = torch.randint(0, 2 * pad + 1, (n,), generator=generator, device=dev)
        iy = (oy[:, None] + torch.arange(h, device=dev))[:, :, None]
        ix = (ox[:, None] + torch.arange(w, device=dev))[:, None, :]
        images = padded[torch.arange(n, device=dev)[:, None, None], 0, iy, ix].unsqueeze(1)
    flip = torch.rand(n, generator=generator, device=dev) < 0.5
    return torch.where(flip[:, None, None, None], images.flip(-1), images)


def torch_dataset(images: np.ndarray, labels: np.ndarray, resolution: int, mean: tuple[float, ...],
                  std: tuple[float, ...]):
    """A torchvision ``VisionDataset`` of (preprocessed image ``[1, r, r]``, label) pairs."""
    from torchvision.datasets import VisionDataset

    class _IdxDataset(VisionDataset):
        def __init__(self) -> None:
            super().__init__(root=None, transform=lambda im: preprocess(im[None], resolution, mean, std)[0])

        def __len__(self) -> int:
            return len(images)

        def __getitem__(self, i: int):
            return self.transform(images[i]), int(labels[i])

    return _IdxDataset()
