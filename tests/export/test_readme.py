"""The bundle README's preprocessing code (PIL + numpy, no nagkit) reproduces the space's
declared transform: exactly for Fashion-MNIST (training and evaluation), closely for OFA's."""

from __future__ import annotations

import numpy as np
import pytest

from nagkit.images.fmnist import preprocess
from nagkit.images.preprocessing import apply
from nagkit.space import get_space

FM = get_space("fmnist-mbv3-w0.5")
OFA = get_space("ofa-mbv3-w1.0")


def _images(n=6, h=28, w=28, c=1, seed=0):
    return np.random.default_rng(seed).integers(0, 256, (n, c, h, w), dtype=np.uint8)


def _readme_preprocess(space, r, shape):
    from nagkit.export.readme import preprocess_code

    ns: dict = {}
    exec(preprocess_code(space.preprocessing(r), shape), ns)  # noqa: S102 - our own generated code
    return ns["preprocess"]


@pytest.mark.parametrize("r", [28, 36, 40])
def test_readme_code_reproduces_the_fmnist_preprocessing(tmp_path, r):
    """The bundle README's preprocess() (PIL + numpy, no nagkit) on a PNG = nagkit's transform."""
    from PIL import Image

    x = _images(n=3)
    fn = _readme_preprocess(FM, r, [1, 1, r, r])
    for i in range(3):
        Image.fromarray(x[i, 0]).save(tmp_path / f"{i}.png")
        got = fn(tmp_path / f"{i}.png")
        assert got.shape == (1, 1, r, r) and got.dtype == np.float32
        np.testing.assert_allclose(got, preprocess(x[i:i + 1, 0], r, FM.mean, FM.std).numpy(), atol=2e-5)


def test_readme_code_follows_the_imagenet_transform(tmp_path):
    """Shorter side + center crop: the same crop as torchvision; PIL's antialiasing is close to torch's."""
    from PIL import Image

    x = _images(n=1, h=180, w=240, c=3, seed=2)
    Image.fromarray(x[0].transpose(1, 2, 0)).save(tmp_path / "a.png")
    got = _readme_preprocess(OFA, 128, [1, 3, 128, 128])(tmp_path / "a.png")
    ref = apply(x, OFA, 128).numpy()
    assert got.shape == ref.shape
    assert np.abs(got - ref).mean() < 0.02 and np.corrcoef(got.ravel(), ref.ravel())[0, 1] > 0.99
