"""The input transform each space declares: what bundles record, what fine-tuning applies, what
the Fashion-MNIST models were trained and evaluated with, and the bundle README's code."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from nagkit.errors import BadInputError
from nagkit.images.fmnist import preprocess
from nagkit.images.preprocessing import apply, augment, preprocessing_for
from nagkit.space import InputTransform, SearchSpace, get_space

FM = get_space("fmnist-mbv3-w0.5")
OFA = get_space("ofa-mbv3-w1.0")


def _images(n=6, h=28, w=28, c=1, seed=0):
    return np.random.default_rng(seed).integers(0, 256, (n, c, h, w), dtype=np.uint8)


def test_spaces_declare_their_transform():
    assert FM.transform == InputTransform(resize="whole", crop_fraction=1.0, antialias=False)
    assert OFA.transform == InputTransform()  # OFA's ImageNet evaluation transform
    fm = preprocessing_for(FM, 36)
    assert fm == {"color": "grayscale", "channels": 1, "resize_rule": "whole", "resize": 36, "center_crop": None,
                  "interpolation": "bilinear", "antialias": False, "scale": 1 / 255, "mean": [0.2860],
                  "std": [0.3530], "layout": "NCHW", "dtype": "float32",
                  "order": ["color", "resize", "center_crop", "scale", "normalize", "layout"]}
    ofa = preprocessing_for(OFA, 224)
    assert (ofa["color"], ofa["resize_rule"], ofa["resize"], ofa["center_crop"], ofa["antialias"]) == \
        ("RGB", "shorter-side", 256, 224, True)
    assert ofa["mean"] == pytest.approx([0.485, 0.456, 0.406]) and ofa["std"] == pytest.approx([0.229, 0.224, 0.225])


@pytest.mark.parametrize("r", [28, 32, 36, 40])
def test_fmnist_transform_is_exactly_the_training_preprocessing(r):
    """The declared recipe, applied, equals nagkit.images.fmnist.preprocess (training, evaluation)."""
    x = _images()
    ours = apply(x, FM, r)
    ref = preprocess(x[:, 0], r, FM.mean, FM.std)
    assert ours.shape == (6, 1, r, r) and torch.equal(ours, ref)


def test_transform_is_not_structure():
    """Two spaces that differ only in the transform are the same networks: equal, same to_dict."""
    other = FM.replace(transform={"resize": "shorter-side", "crop_fraction": 0.875})
    assert other == FM and other.to_dict() == FM.to_dict() and "transform" not in FM.to_dict()
    assert other.transform.resize == "shorter-side"
    back = SearchSpace.from_dict({**FM.to_dict(), "transform": {"resize": "whole", "crop_fraction": 1.0}})
    assert back.transform.resize == "whole" and back.preprocessing(28)["center_crop"] is None
    assert FM.describe()["input"]["resize"] == "whole"


@pytest.mark.parametrize("bad, match", [
    ({"resize": "stretch"}, "resize 'stretch' is not valid; valid: shorter-side, whole"),
    ({"resize": "whole", "crop_fraction": 0.875}, "does not crop"),
    ({"crop_fraction": 0}, "crop_fraction"),
    ({"interpolation": "lanczos"}, "interpolation"),
    ({"layout": "NHWC"}, "layout"),
    ({"antialias": "yes"}, "antialias"),
    ({"rezise": "whole"}, "rezise"),
])
def test_bad_transform_declarations(bad, match):
    with pytest.raises(BadInputError, match=match):
        FM.replace(transform=bad)


def test_shorter_side_resize_then_center_crop():
    x = _images(n=1, h=300, w=200, c=3)
    y = apply(x, OFA, 128)  # shorter side 200 -> ceil(128 / 0.875) = 147, then a 128 x 128 center crop
    assert y.shape == (1, 3, 128, 128)


def test_augment_is_seeded_and_shaped():
    img = torch.as_tensor(_images(n=1, h=50, w=70, c=3)[0])
    a = augment(img, OFA, 128, torch.Generator().manual_seed(3))
    b = augment(img, OFA, 128, torch.Generator().manual_seed(3))
    assert a.shape == (3, 128, 128) and torch.equal(a, b)
    g = augment(torch.as_tensor(_images(n=1)[0]), FM, 32, torch.Generator().manual_seed(0))
    assert g.shape == (1, 32, 32)
