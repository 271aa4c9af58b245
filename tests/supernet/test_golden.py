"""Bit-level compatibility with OFA: outputs written by OFA's own code must be reproduced."""

import json

import pytest
import torch

from nagkit.space import get_space
from nagkit.supernet import OFAMobileNetV3, StaticNet, load_supernet

from ..shared_data import GOLDEN, needs_shared, read_json

pytestmark = needs_shared(GOLDEN)
CASES = read_json(GOLDEN / "golden_cases.json")  # None without the shared data (then one placeholder case skips)
CKPT = GOLDEN / "ofa_mbv3_d234_e346_k357_w1.0.golden.pth"


@pytest.fixture(scope="module")
def golden_net():
    return load_supernet(CKPT, "ofa-mbv3-w1.0")


@pytest.fixture(scope="module")
def golden_tensors():
    return torch.load(GOLDEN / "golden_cases.pt", weights_only=True)


@pytest.mark.parametrize("space_name, manifest", [
    ("ofa-mbv3-w1.0", "ofa_mbv3_d234_e346_k357_w1.0.keys.json"),
    ("ofa-mbv3-w1.2", "ofa_mbv3_d234_e346_k357_w1.2.keys.json"),
])
def test_state_dict_keys_and_shapes_equal_ofa_manifest(space_name, manifest):
    keys = json.loads((GOLDEN / manifest).read_text())
    sd = OFAMobileNetV3(get_space(space_name)).state_dict()
    assert list(sd) == list(keys)
    assert {k: list(v.shape) for k, v in sd.items()} == keys


@pytest.mark.parametrize("i", range(len(CASES or [None])))
def test_golden_case(i, golden_net, golden_tensors):
    case, t = CASES[i], golden_tensors[f"case{i}"]
    sp = golden_net.space
    arch = sp.parse_arch(dict(case["config"], r=case["resolution"]))
    golden_net.set_active(arch)
    with torch.no_grad():
        y_super = golden_net(t["x"])
        sub = golden_net.extract(arch)
        y_sub = sub(t["x"])
    tol_super = 1e-4 * max(1.0, t["y_super"].abs().max().item())
    tol_sub = 1e-4 * max(1.0, t["y_sub"].abs().max().item())
    assert (y_super - t["y_super"]).abs().max().item() <= tol_super
    assert (y_sub - t["y_sub"]).abs().max().item() <= tol_sub
    assert {k: list(v.shape) for k, v in sub.state_dict().items()} == case["subnet_keys"]
    assert sub.n_params() == case["subnet_params"]


def test_golden_is_sensitive_to_one_kernel_change(golden_net, golden_tensors):
    """The tolerance is meaningful: changing one block's kernel moves the logits far more."""
    case, t = CASES[2], golden_tensors["case2"]
    sp = golden_net.space
    d = dict(case["config"], r=case["resolution"])
    d["ks"] = list(d["ks"])
    d["ks"][0] = 7 if d["ks"][0] != 7 else 3
    golden_net.set_active(sp.parse_arch(d))
    with torch.no_grad():
        y = golden_net(t["x"])
    assert (y - t["y_super"]).abs().max().item() > 5 * 1e-4 * max(1.0, t["y_super"].abs().max().item())


def test_subnet_config_matches_ofa_and_roundtrips(golden_net, golden_tensors):
    case, t = CASES[3], golden_tensors["case3"]
    arch = golden_net.space.parse_arch(dict(case["config"], r=case["resolution"]))
    sub = golden_net.extract(arch)
    cfg = sub.config

    def strip(d):
        if isinstance(d, dict):
            return {k: strip(v) for k, v in d.items() if k not in ("dropout_rate", "meta")}
        if isinstance(d, list):
            return [strip(x) for x in d]
        return d

    assert strip(cfg) == strip(case["subnet_config"])
    rebuilt = StaticNet.from_config(json.loads(json.dumps(cfg)))
    rebuilt.load_state_dict(sub.state_dict())
    rebuilt.eval()
    with torch.no_grad():
        assert torch.equal(rebuilt(t["x"]), sub(t["x"]))


def test_old_mobile_inverted_conv_keys_and_wrapped_state_dict(tmp_path):
    sd = torch.load(CKPT, weights_only=True)
    old = {k.replace(".conv.", ".mobile_inverted_conv.", 1) if k.startswith("blocks.") else k: v
           for k, v in sd.items()}
    assert any(".mobile_inverted_conv." in k for k in old)
    p = tmp_path / "old.pth"
    torch.save({"state_dict": old}, p)
    net = load_supernet(p, "ofa-mbv3-w1.0")
    ref = load_supernet(CKPT, "ofa-mbv3-w1.0")
    for (k1, v1), (k2, v2) in zip(net.state_dict().items(), ref.state_dict().items()):
        assert k1 == k2 and torch.equal(v1, v2)
