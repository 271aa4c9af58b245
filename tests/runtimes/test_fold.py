"""BatchNorm folded before the TFLite conversion (decisions 34): the same model, converted faster.

The converter folds every BatchNorm that follows a convolution; nagkit now folds them in PyTorch
first (``nagkit.runtimes.fold``), which saves the converter a third of its work. These tests
convert the same modules both ways, with the real converter, and compare what the interpreter
runs: the operators in order with their options, every tensor's shape and type, and the bytes of
every constant (trained-like BatchNorm statistics: equal; untrained ones: the last bit of a few
weights, see the test). Only the tensors' debug names may differ.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch

import nagkit.runtimes.convert as convert
from nagkit.latency.blocks import build_block, unique_layers
from nagkit.runtimes.fold import fold_batchnorms, folded_for_conversion, has_batchnorm
from nagkit.runtimes.graph import model_graph, tflite_float_constants
from nagkit.space.layers import layer_input_shape
from nagkit.space.presets import get_space
from nagkit.supernet.static import StaticNet

SPACE = "fmnist-mbv3-w0.5"  # the blocks test: every kind of block of the default space


def _with_running_stats(module: torch.nn.Module, seed: int) -> torch.nn.Module:
    """Random BatchNorm statistics and affine parameters, so that a fold is not a no-op."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in module.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.copy_(torch.randn(m.num_features, generator=g) * 0.2)
                m.running_var.copy_(torch.rand(m.num_features, generator=g) + 0.5)
                m.weight.copy_(torch.randn(m.num_features, generator=g))
                m.bias.copy_(torch.randn(m.num_features, generator=g) * 0.1)
    return module.eval()


def _graph(path) -> dict:
    """What the interpreter runs: operators (code, options), tensor shapes/types, constant bytes."""
    return model_graph(path, constants=True)


def _convert_both(monkeypatch, tmp_path, module, shape, precision="fp32", names=None):
    """``module`` converted as nagkit converts it, and with the fold switched off."""
    folded = convert.convert_module(module, shape, "tflite", tmp_path / "folded.tflite", names=names,
                                    precision=precision)
    with monkeypatch.context() as m:
        m.setattr(convert, "folded_for_conversion", lambda mod: mod)
        plain = convert.convert_module(module, shape, "tflite", tmp_path / "plain.tflite", names=names,
                                       precision=precision)
    return folded, plain


# The whole-network tests: a two-stage space (tests/latency/conftest.py's) with every kind of block
# the converter sees: ReLU without SE, h-swish with SE, two blocks a stage (so a residual each), the
# stem, the final expand and the head. Half the conversion time of the shallowest fmnist network
# ("r28-k7e6.k5e4-k3e3.k7e6-k5e6.k3e4-k7e4.k5e3-k3e6.k7e3": 12 s against 23 s on the 2-core, issue 35).
TINY_ARCH = "r32-k5e4.k3e3-k3e4.k5e3"


def _tiny():
    from tests.latency.conftest import make_tiny_space

    space = make_tiny_space()
    assert space.stage_acts == ("relu", "h_swish") and space.stage_se == (False, True)
    return space, space.parse_arch(TINY_ARCH)


@pytest.fixture(scope="module")
def network() -> tuple[torch.nn.Module, tuple[int, ...]]:
    space, arch = _tiny()
    net = _with_running_stats(StaticNet.from_arch(space, arch, seed=0), seed=1)
    return net, (1, space.in_channels, arch.r, arch.r)


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_a_network_folded_first_converts_to_the_same_operators_shapes_and_weights(monkeypatch, tmp_path, network,
                                                                                 precision):
    net, shape = network
    folded, plain = _convert_both(monkeypatch, tmp_path, net, shape, precision, names=convert.IO_NAMES)
    a, b = _graph(folded), _graph(plain)
    assert len(a["ops"]) == len(b["ops"]) > 20 and a["signatures"][0]["inputs"] == ["image"]
    # TFLite builtin codes: ADD (residuals), DEPTHWISE_CONV_2D, MEAN (SE, pooling), HARD_SWISH
    assert {0, 4, 40, 117} <= {op["op"] for op in a["ops"]}
    assert a == b
    assert folded.read_bytes() != plain.read_bytes()  # the debug tensor names differ, nothing the runtime reads
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(2)).numpy()
    from nagkit.runtimes.models import load_model

    assert np.array_equal(load_model(folded).run(x), load_model(plain).run(x))
    assert any(isinstance(m, torch.nn.BatchNorm2d) for m in net.modules())  # the caller's module is unchanged


def test_a_freshly_initialised_network_differs_at_most_in_the_last_bit_of_a_few_weights(monkeypatch, tmp_path):
    """The calibration's networks have untrained BatchNorms (mean 0, var 1, weight 1, bias 0):
    there the converter simplifies its own fold, and a few weights round one unit in the last
    place differently (decisions 34). The graph is the same; no weight moves more than that."""
    space, arch = _tiny()
    net = StaticNet.from_arch(space, arch, seed=0)
    folded, plain = _convert_both(monkeypatch, tmp_path, net, (1, space.in_channels, arch.r, arch.r),
                                  names=convert.IO_NAMES)
    assert model_graph(folded) == model_graph(plain)
    a, b = tflite_float_constants(folded), tflite_float_constants(plain)
    assert [x.shape for x in a] == [y.shape for y in b] and sum(x.size for x in a) > 10_000
    ulps = [np.abs(x.view(np.int32).astype(np.int64) - y.view(np.int32).astype(np.int64)) for x, y in zip(a, b)]
    assert max(int(u.max()) for u in ulps) <= 1
    assert sum(int((u > 0).sum()) for u in ulps) <= 0.001 * sum(x.size for x in a)


def test_blocks_folded_first_convert_to_the_same_graph(monkeypatch, tmp_path):
    layers = list(unique_layers(get_space(SPACE), [28]).values())
    picked = {}  # the stem, the first block, MBConvs with and without SE, the final expand
    for layer in layers:  # the blocks with a BatchNorm (one without has nothing to fold: converted as it is)
        if layer.bn:
            picked.setdefault((layer.kind, layer.se, layer.expand == 1), layer)
    picked = list(picked.values())
    assert {lay.kind for lay in picked} >= {"stem", "mbconv", "final_expand"} and any(lay.se for lay in picked)
    for i, layer in enumerate(picked):
        block = _with_running_stats(build_block(layer), seed=10 + i)
        assert has_batchnorm(block), layer
        d = tmp_path / str(i)
        d.mkdir()
        folded, plain = _convert_both(monkeypatch, d, block, layer_input_shape(layer))
        assert _graph(folded) == _graph(plain), layer


def test_fold_follows_the_data_flow_and_leaves_what_it_cannot_fold():
    class Branchy(torch.nn.Module):  # the conv's output is used twice: its BatchNorm cannot be folded
        def __init__(self) -> None:
            super().__init__()
            self.conv, self.bn = torch.nn.Conv2d(2, 2, 1), torch.nn.BatchNorm2d(2)

        def forward(self, x):
            y = self.conv(x)
            return self.bn(y) + y

    seq = torch.nn.Sequential(torch.nn.Conv2d(2, 3, 3), torch.nn.BatchNorm2d(3), torch.nn.ReLU())
    seq = _with_running_stats(seq, 3)
    x = torch.randn(2, 2, 5, 5, generator=torch.Generator().manual_seed(4))
    f = fold_batchnorms(seq)
    assert not has_batchnorm(f) and has_batchnorm(seq)
    with torch.no_grad():
        assert torch.allclose(f(x), seq(x), atol=1e-5)
    branchy = _with_running_stats(Branchy(), 5)
    fb = fold_batchnorms(branchy)
    assert has_batchnorm(fb)
    with torch.no_grad():
        assert torch.equal(fb(x), branchy(x))


def test_a_module_torch_fx_cannot_trace_is_converted_as_it_is_and_the_log_says_so(caplog):
    class DataDependent(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv, self.bn = torch.nn.Conv2d(2, 2, 1), torch.nn.BatchNorm2d(2)

        def forward(self, x):
            if x.sum() > 0:  # control flow on a tensor's value: symbolic tracing refuses it
                x = -x
            return self.bn(self.conv(x))

    m = DataDependent().eval()
    with caplog.at_level(logging.INFO, logger="nagkit.runtimes.fold"):
        assert folded_for_conversion(m) is m
    assert "without folding BatchNorm first" in caplog.text and "DataDependent" in caplog.text
    plain = torch.nn.Sequential(torch.nn.Conv2d(2, 2, 1), torch.nn.ReLU()).eval()
    assert folded_for_conversion(plain) is plain  # nothing to fold: no copy


def test_model_graph_sees_a_changed_weight_and_not_a_changed_name(tmp_path):
    from nagkit.runtimes.convert import to_onnx

    def net(seed: int) -> torch.nn.Module:
        torch.manual_seed(seed)
        return torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU()).eval()

    x = torch.zeros(1, 3, 8, 8)
    a = to_onnx(net(0), x, tmp_path / "a.onnx")
    b = to_onnx(net(0), x, tmp_path / "b.onnx", names=("pixels", "scores"))
    c = to_onnx(net(1), x, tmp_path / "c.onnx")
    ga, gc = model_graph(a, constants=True), model_graph(c, constants=True)
    assert model_graph(a) == model_graph(c) and ga != gc  # the same graph, other weights
    assert ga["initializers"] and ga["initializers"][0][:2] == gc["initializers"][0][:2]
    gb = model_graph(b, constants=True)
    assert gb["inputs"][0][0] == "pixels" and gb["initializers"] == ga["initializers"]
