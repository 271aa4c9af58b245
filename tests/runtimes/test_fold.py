"""BatchNorm folded before the TFLite conversion (decisions 34): the same model, converted faster.

The converter folds every BatchNorm that follows a convolution; nagkit now folds them in PyTorch
first (``nagkit.runtimes.fold``), which saves the converter a third of its work. These tests
convert the same modules both ways, with the real converter, and compare what the interpreter
runs: the operators in order with their options, every tensor's shape and type, and the bytes of
every constant. Only the tensors' debug names may differ.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch

import nagkit.runtimes.convert as convert
from nagkit.latency.blocks import build_block, unique_layers
from nagkit.runtimes.fold import fold_batchnorms, folded_for_conversion, has_batchnorm
from nagkit.space.layers import layer_input_shape
from nagkit.space.presets import get_space
from nagkit.supernet.static import StaticNet

SPACE = "fmnist-mbv3-w0.5"


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
    from ai_edge_litert.tools import flatbuffer_utils as fu

    model = fu.read_model_from_bytearray(bytearray(path.read_bytes()))
    sg = model.subgraphs[0]

    def tensor(i: int):
        if i < 0:
            return None
        t = sg.tensors[i]
        data = model.buffers[t.buffer].data if t.buffer else None
        raw = bytes(np.asarray(data, np.uint8)) if data is not None and len(data) else None
        return list(t.shape), t.type, raw

    ops = []
    for op in sg.operators:
        code = model.operatorCodes[op.opcodeIndex]
        options = vars(op.builtinOptions) if op.builtinOptions is not None else None
        ops.append((max(code.builtinCode, code.deprecatedBuiltinCode), op.builtinOptionsType, options,
                    [tensor(i) for i in op.inputs], [tensor(i) for i in op.outputs]))
    return {"ops": ops, "inputs": [tensor(i) for i in sg.inputs], "outputs": [tensor(i) for i in sg.outputs],
            "signatures": [(s.signatureKey, [x.name for x in s.inputs], [x.name for x in s.outputs])
                           for s in model.signatureDefs or []]}


def _convert_both(monkeypatch, tmp_path, module, shape, precision="fp32", names=None):
    """``module`` converted as nagkit converts it, and with the fold switched off."""
    folded = convert.convert_module(module, shape, "tflite", tmp_path / "folded.tflite", names=names,
                                    precision=precision)
    with monkeypatch.context() as m:
        m.setattr(convert, "folded_for_conversion", lambda mod: mod)
        plain = convert.convert_module(module, shape, "tflite", tmp_path / "plain.tflite", names=names,
                                       precision=precision)
    return folded, plain


@pytest.fixture(scope="module")
def network() -> tuple[torch.nn.Module, tuple[int, ...]]:
    space = get_space(SPACE)
    arch = space.parse_arch("r32-k7e6.k5e4.k3e3.k7e6-k5e6.k3e4.k7e3.k5e4-k3e6.k5e6.k7e4.k3e3-"
                            "k7e4.k5e3.k3e6.k7e6-k3e3.k5e4.k7e6.k3e4")
    net = _with_running_stats(StaticNet.from_arch(space, arch, seed=0), seed=1)
    return net, (1, space.in_channels, arch.r, arch.r)


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_a_network_folded_first_converts_to_the_same_operators_shapes_and_weights(monkeypatch, tmp_path, network,
                                                                                 precision):
    net, shape = network
    folded, plain = _convert_both(monkeypatch, tmp_path, net, shape, precision, names=convert.IO_NAMES)
    a, b = _graph(folded), _graph(plain)
    assert len(a["ops"]) == len(b["ops"]) > 20
    assert a == b
    assert folded.read_bytes() != plain.read_bytes()  # the debug tensor names differ, nothing the runtime reads
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(2)).numpy()
    from nagkit.runtimes.models import load_model

    assert np.array_equal(load_model(folded).run(x), load_model(plain).run(x))
    assert any(isinstance(m, torch.nn.BatchNorm2d) for m in net.modules())  # the caller's module is unchanged


def test_blocks_folded_first_convert_to_the_same_graph(monkeypatch, tmp_path):
    layers = list(unique_layers(get_space(SPACE), [28]).values())
    picked = {}  # the stem, the first block, MBConvs with and without SE, the final expand
    for layer in layers:
        picked.setdefault((layer.kind, layer.se, layer.expand == 1, layer.bn), layer)
    picked = list(picked.values())
    assert {lay.kind for lay in picked} >= {"stem", "mbconv", "final_expand"} and any(lay.se for lay in picked)
    for i, layer in enumerate(picked):
        block = _with_running_stats(build_block(layer), seed=10 + i)
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
