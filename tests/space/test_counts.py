import json

import numpy as np
import pytest
import torch

from nagkit.space import get_space
from nagkit.space.encoding import ofa_predictor_encoding, onehot_dim, onehot_encoding
from nagkit.space.sampling import sample_many
from nagkit.supernet import OFAMobileNetV3

from ..shared_data import GOLDEN, needs_shared


def hook_macs(model: torch.nn.Module, x: torch.Tensor) -> int:
    total = 0

    def conv_hook(m, inp, out):
        nonlocal total
        k = m.kernel_size[0] * m.kernel_size[1]
        total += out.shape[2] * out.shape[3] * m.out_channels * (m.in_channels // m.groups) * k

    def lin_hook(m, inp, out):
        nonlocal total
        total += m.in_features * m.out_features

    hs = []
    for m in model.modules():
        if isinstance(m, torch.nn.Conv2d):
            hs.append(m.register_forward_hook(conv_hook))
        elif isinstance(m, torch.nn.Linear):
            hs.append(m.register_forward_hook(lin_hook))
    with torch.no_grad():
        model(x)
    for h in hs:
        h.remove()
    return total


@pytest.mark.parametrize("space_name", ["ofa-mbv3-w1.0", "ofa-mbv3-w1.2"])
def test_params_equal_extracted_subnet_and_macs_match_hooks(space_name):
    sp = get_space(space_name)
    net = OFAMobileNetV3(sp).eval()
    for arch in sample_many(sp, 4, seed=11) + [sp.smallest(), sp.largest()]:
        sub = net.extract(arch)
        assert sp.params(arch) == sum(p.numel() for p in sub.parameters())
        hm = hook_macs(sub, torch.zeros(1, 3, arch.r, arch.r))
        assert abs(sp.macs(arch) - hm) <= 0.01 * hm


@needs_shared(GOLDEN)
def test_params_match_ofa_golden_counts():
    sp = get_space("ofa-mbv3-w1.0")
    for c in json.loads((GOLDEN / "golden_cases.json").read_text()):
        arch = sp.parse_arch(dict(c["config"], r=c["resolution"]))
        assert sp.params(arch) == c["subnet_params"]


def test_ofa_predictor_encoding_layout():
    sp = get_space("ofa-mbv3-w1.2")
    a = sp.parse_arch("r224-k3e4.k5e6-k7e3.k3e3.k5e4-k3e6.k3e3.k3e3.k3e3-k5e4.k7e6-k5e6.k3e4.k3e4")
    v = ofa_predictor_encoding(sp, a)
    assert v.shape == (128,)
    ks, es, r = v[:60].reshape(20, 3), v[60:120].reshape(20, 3), v[120:]
    assert ks[0].tolist() == [1, 0, 0] and ks[1].tolist() == [0, 1, 0]
    assert ks[2].sum() == 0 and ks[3].sum() == 0  # stage 0 depth 2: slots 2, 3 inactive
    assert es[4].tolist() == [1, 0, 0] and es[1].tolist() == [0, 0, 1]
    assert r.tolist() == [0, 0, 0, 0, 0, 0, 0, 1]  # (224 - 112) // 16 = 7
    assert v.sum() == 2 * a.n_blocks + 1


def test_general_onehot_distinguishes_archs():
    sp = get_space("ofa-mbv3-w1.0")
    archs = sample_many(sp, 100, seed=2)
    enc = np.stack([onehot_encoding(sp, a) for a in archs])
    assert enc.shape == (100, onehot_dim(sp))
    assert len({e.tobytes() for e in enc}) == len(set(archs))
