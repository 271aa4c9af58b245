"""Fixed-shape (masked) execution of the supernet equals the sliced execution."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from nagkit.space.sampling import sample
from tests.supernet.helpers import random_supernet


def _pair(space, seed=0):
    a = random_supernet(space, seed)
    b = copy.deepcopy(a).set_fixed_shape(True)
    return a, b


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fixed_shape_forward_and_grads_match_sliced(tiny_space, seed):
    sliced, fixed = _pair(tiny_space, seed)
    arch = sample(tiny_space, np.random.default_rng(seed))
    assert any(k < max(tiny_space.ks_list) or e < max(tiny_space.expand_list)
               for st in arch.stages for k, e in st), "want a non-maximal arch"
    x = torch.randn(6, 3, arch.r, arch.r)
    for net in (sliced, fixed):
        net.set_active(arch).train()
    ya, yb = sliced(x), fixed(x)
    assert torch.allclose(ya, yb, atol=1e-4, rtol=1e-4), (ya - yb).abs().max()
    ya.square().sum().backward()
    yb.square().sum().backward()
    pa, pb = dict(sliced.named_parameters()), dict(fixed.named_parameters())
    n_checked = 0
    for name, p in pa.items():
        q = pb[name]
        if p.grad is None:
            assert q.grad is None or float(q.grad.abs().max()) == 0.0, name
            continue
        n_checked += 1
        assert torch.allclose(p.grad, q.grad, atol=1e-4, rtol=1e-3), (name, (p.grad - q.grad).abs().max())
    assert n_checked > 20
    # eval mode with the running statistics the training step updated (active channels agree)
    sliced.eval(), fixed.eval()
    with torch.no_grad():
        assert torch.allclose(sliced(x), fixed(x), atol=1e-4, rtol=1e-4)


def test_fixed_shape_keeps_conv_shapes_constant(tiny_space):
    _, net = _pair(tiny_space)
    shapes = set()

    def hook(mod, inp, out):
        shapes.add((tuple(inp[0].shape), tuple(out.shape)))

    rng = np.random.default_rng(0)
    block = net.blocks[2].conv
    h = block.register_forward_hook(hook)
    with torch.no_grad():
        for _ in range(8):
            net.set_active(sample(tiny_space.replace(resolutions=(32,)), rng))
            net(torch.randn(2, 3, 32, 32))
    h.remove()
    assert len(shapes) == 1


def test_fixed_shape_accuracy_equals_extracted_subnet(tiny_space):
    from nagkit.supernet.evaluate import subnet_accuracy, subnet_accuracy_fixed

    net, scratch = _pair(tiny_space, 3)
    g = torch.Generator().manual_seed(0)
    cal = torch.randint(0, 256, (32, 3, 16, 16), dtype=torch.uint8, generator=g)
    x = torch.randint(0, 256, (96, 3, 16, 16), dtype=torch.uint8, generator=g)
    rng = np.random.default_rng(5)
    for _ in range(2):
        arch = sample(tiny_space, rng)
        # labels = the extracted subnet's own predictions, perturbed, so accuracy is informative
        sub = net.extract(arch)
        from nagkit.supernet.evaluate import image_batches
        from nagkit.supernet.bn import recalibrate_bn

        recalibrate_bn(sub, image_batches(cal, arch.r, tiny_space.mean, tiny_space.std, 32))
        with torch.no_grad():
            pred = torch.cat([sub(b).argmax(1) for b in image_batches(x, arch.r, tiny_space.mean, tiny_space.std, 48)])
        y = torch.where(torch.arange(96) % 3 == 0, (pred + 1) % 10, pred)
        a = subnet_accuracy(net, arch, cal, x, y, batch_size=48, calib_batch_size=16)
        b = subnet_accuracy_fixed(scratch, arch, cal, x, y, batch_size=48, calib_batch_size=16)
        assert 0.5 < a < 0.8
        assert abs(a - b) <= 1 / 96
