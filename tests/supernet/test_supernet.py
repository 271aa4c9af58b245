import numpy as np
import pytest
import torch

from nagkit.errors import CheckpointError
from nagkit.space.sampling import sample
from nagkit.supernet import OFAMobileNetV3, StaticNet, build_layer, layer_input_shape, load_supernet, recalibrate_bn

from ..shared_data import GOLDEN, needs_shared


def _perturb(net: torch.nn.Module, seed: int = 0) -> None:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, t in net.state_dict().items():
            if t.dtype.is_floating_point:
                if "running_var" in name:
                    t.copy_(torch.rand(t.shape, generator=g) + 0.5)
                else:
                    t.add_(0.1 * torch.randn(t.shape, generator=g))


def test_extract_equals_supernet_forward(tiny_space):
    net = OFAMobileNetV3(tiny_space).eval()
    _perturb(net)
    rng = np.random.default_rng(0)
    for _ in range(5):
        arch = net.sample_active(rng)
        x = torch.randn(2, 3, arch.r, arch.r)
        with torch.no_grad():
            assert torch.allclose(net(x), net.extract(arch)(x), atol=1e-5)
        assert net.active_arch == arch


def test_elastic_kernel_uses_transform_matrices(tiny_space):
    net = OFAMobileNetV3(tiny_space).eval()
    _perturb(net)
    arch = tiny_space.smallest()
    g = torch.Generator().manual_seed(0)
    x = torch.randn(1, 3, arch.r, arch.r, generator=g)
    blk = net.blocks[1]
    with torch.no_grad():
        net.set_active(arch)
        h = net.blocks[0](net.first_conv(x))
        y0 = blk(h)
        w0 = blk.conv.depth_conv.conv.active_filter(blk.conv.max_mid, 3).clone()
        getattr(blk.conv.depth_conv.conv, "5to3_matrix").mul_(2.0)
        y1 = blk(h)
        w1 = blk.conv.depth_conv.conv.active_filter(blk.conv.max_mid, 3)
    assert torch.allclose(w1, 2 * w0, atol=1e-6)  # the 3x3 kernel is the 5x5 centre through 5to3
    assert (y0 - y1).abs().max() > 1e-3


def test_sort_channels_preserves_largest_and_orders_importance(tiny_space):
    net = OFAMobileNetV3(tiny_space).eval()
    _perturb(net, 1)
    arch = tiny_space.largest()
    x = torch.randn(2, 3, arch.r, arch.r)
    with torch.no_grad():
        y0 = net.set_active(arch)(x)
        net.sort_channels()
        y1 = net(x)
    assert torch.allclose(y0, y1, atol=1e-4)  # a permutation of channels changes nothing at full width
    w = net.blocks[1].conv.point_linear.conv.conv.weight
    imp = w.abs().sum(dim=(0, 2, 3))
    assert torch.all(imp[:-1] >= imp[1:])


def test_static_net_serialises_as_config_plus_state_dict(tiny_space, tmp_path):
    net = OFAMobileNetV3(tiny_space).eval()
    _perturb(net, 2)
    arch = sample(tiny_space, np.random.default_rng(3))
    sub = net.extract(arch)
    import json

    torch.save(sub.state_dict(), tmp_path / "w.pt")
    (tmp_path / "c.json").write_text(json.dumps(sub.config))
    back = StaticNet.from_config(json.loads((tmp_path / "c.json").read_text()))
    back.load_state_dict(torch.load(tmp_path / "w.pt", weights_only=True))
    back.eval()
    x = torch.randn(1, 3, arch.r, arch.r)
    with torch.no_grad():
        assert torch.equal(back(x), sub(x))


def test_build_layer_shapes(tiny_space):
    arch = tiny_space.largest()
    for spec in tiny_space.layers(arch):
        m = build_layer(spec).eval()
        y = m(torch.zeros(layer_input_shape(spec)))
        if spec.kind == "classifier":
            assert y.shape == (1, spec.cout)
        else:
            assert y.shape == (1, spec.cout, spec.out_hw, spec.out_hw)


def test_bn_recalibration_sets_statistics_from_data(tiny_space):
    net = OFAMobileNetV3(tiny_space)
    arch = tiny_space.smallest()
    sub = net.extract(arch)
    g = torch.Generator().manual_seed(0)
    data = [torch.randn(8, 3, arch.r, arch.r, generator=g) * 3 + 2 for _ in range(4)]
    recalibrate_bn(sub, data)
    assert not sub.training
    # the stem BN mean equals the mean of the stem conv output over all batches
    with torch.no_grad():
        conv_out = torch.cat([sub.first_conv.conv(x) for x in data])
    assert torch.allclose(sub.first_conv.bn.running_mean, conv_out.mean(dim=(0, 2, 3)), atol=1e-4)
    with pytest.raises(ValueError, match="no batches"):
        recalibrate_bn(sub, [])


@pytest.mark.parametrize("content, message", [
    (None, "does not exist"),
    (b"", "is empty"),
    (b"hello world, not a checkpoint", "not a PyTorch checkpoint"),
    ("truncated", "truncated or corrupt"),
])
def test_bad_checkpoint_files(tmp_path, tiny_space, content, message):
    p = tmp_path / "w.pth"
    if content == "truncated":
        torch.save(OFAMobileNetV3(tiny_space).state_dict(), p)
        p.write_bytes(p.read_bytes()[: p.stat().st_size // 2])
    elif content is not None:
        p.write_bytes(content)
    with pytest.raises(CheckpointError, match=message):
        load_supernet(p, tiny_space)


def test_checkpoint_refuses_code_pickles(tmp_path, tiny_space):
    import pickle

    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    p = tmp_path / "evil.pth"
    p.write_bytes(pickle.dumps({"state_dict": Evil()}, protocol=2))
    with pytest.raises(CheckpointError, match="safely"):
        load_supernet(p, tiny_space)


@needs_shared(GOLDEN)
def test_wrong_space_checkpoint_suggests_space(tmp_path):
    with pytest.raises(CheckpointError) as ei:
        load_supernet(GOLDEN / "ofa_mbv3_d234_e346_k357_w1.0.golden.pth", "ofa-mbv3-w1.2")
    assert "ofa-mbv3-w1.0" in (ei.value.hint or "")
