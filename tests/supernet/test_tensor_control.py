"""Tensor-controlled execution (the arch as a device vector, for CUDA graphs) equals the sliced
execution; on a GPU, a replayed CUDA-graph training step equals the eager step."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from nagkit.space import Arch, make_divisible
from nagkit.space.sampling import sample
from tests.supernet.helpers import random_supernet


def _net(space, seed=0):
    return random_supernet(space, seed)


def _shallow_small_arch(space, rng):
    """A random arch with at least one stage below max depth and one non-maximal block."""
    while True:
        a = sample(space, rng)
        if any(len(st) < space.max_depth for st in a.stages) and any(
                k < max(space.ks_list) or e < max(space.expand_list) for st in a.stages for k, e in st):
            return a


@pytest.mark.parametrize("seed", [0, 2])
def test_tensor_control_forward_and_grads_match_sliced(tiny_space, seed):
    sliced = _net(tiny_space, seed)
    ctl = copy.deepcopy(sliced).set_tensor_control(True)
    arch = _shallow_small_arch(tiny_space, np.random.default_rng(seed))
    x = torch.randn(6, 3, arch.r, arch.r)
    for net in (sliced, ctl):
        net.set_active(arch).train()
    ya, yb = sliced(x), ctl(x)
    assert torch.allclose(ya, yb, atol=1e-4, rtol=1e-4), (ya - yb).abs().max()
    ya.square().sum().backward()
    yb.square().sum().backward()
    pa, pb = dict(sliced.named_parameters()), dict(ctl.named_parameters())
    n_checked = n_zero = 0
    for name, p in pa.items():
        q = pb[name]
        if p.grad is None:  # outside the subnet: no gradient, or an exact zero one
            assert q.grad is None or float(q.grad.abs().max()) == 0.0, name
            n_zero += q.grad is not None
            continue
        n_checked += 1
        assert torch.allclose(p.grad, q.grad, atol=1e-4, rtol=1e-3), (name, (p.grad - q.grad).abs().max())
    assert n_checked > 20 and n_zero > 0  # skipped blocks / unused kernel transforms got zeros
    sliced.eval(), ctl.eval()
    with torch.no_grad():
        assert torch.allclose(sliced(x), ctl(x), atol=1e-4, rtol=1e-4)


def test_control_vector_switches_arch_without_host_state(tiny_space):
    """Writing another arch's control vector into the device tensor alone changes the output
    to that arch's (the path a replayed CUDA graph takes)."""
    net = _net(tiny_space, 4).eval()
    ref = copy.deepcopy(net)
    ctl = net.set_tensor_control(True)
    rng = np.random.default_rng(7)
    a, b = _shallow_small_arch(tiny_space, rng), _shallow_small_arch(tiny_space, rng)
    b = Arch(a.r, b.stages)
    x = torch.randn(4, 3, a.r, a.r)
    ctl.set_active(a)
    with torch.no_grad():
        ctl.control.copy_(torch.from_numpy(ctl.control_vector(b)))
        out = ctl(x)
        want = ref.set_active(b)(x)
        other = ref.set_active(a)(x)
    assert torch.allclose(out, want, atol=1e-4, rtol=1e-4)
    assert not torch.allclose(out, other, atol=1e-3)


def test_control_vector_layout(tiny_space):
    net = _net(tiny_space)
    arch = _shallow_small_arch(tiny_space, np.random.default_rng(3))
    v = net.control_vector(arch)
    n_blocks = len(net.blocks) - 1
    gates = v[-n_blocks:]
    assert gates.sum() == sum(len(st) for st in arch.stages)
    # per block: mid mask has exactly the active middle channels, one kernel is selected
    off = 0
    for si, group in enumerate(net.block_group_info):
        for bi, i in enumerate(group):
            conv = net.blocks[i].conv
            n_mid, n_se, n_k = conv.control_sizes()
            seg = v[off:off + n_mid + n_se + n_k]
            assert seg[n_mid + n_se:].sum() == 1
            if bi < len(arch.stages[si]):
                k, e = arch.stages[si][bi]
                assert seg[:n_mid].sum() == make_divisible(round(conv.cin * e), 8)
                assert seg[n_mid + n_se + conv.ks_list.index(k)] == 1
                assert gates[i - 1] == 1
            else:
                assert gates[i - 1] == 0
            off += n_mid + n_se + n_k
    assert off + n_blocks == len(v)
    with pytest.raises(Exception):
        net.control_vector(Arch(arch.r, ((9, 6),) + arch.stages[1:]))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_graphed_training_steps_match_eager(tiny_space, tmp_path):
    """Trainer with CUDA graphs vs the eager fixed-shape trainer, step by step: the same loss and
    the same gradients (zero where the eager step has none) over steps that cover the eager
    warm-up, the capture and replays with new archs and batches (2 subnets, distillation).
    lr = 0 keeps both networks' weights equal, so every step compares like with like (with
    lr > 0 the trajectories drift apart by design: under graphs, unused parameters get zero
    gradients, so SGD momentum keeps moving them; docs/decisions.md 13)."""
    from nagkit.supernet.train import PhaseConfig, TrainConfig, TrainData, Trainer

    space = tiny_space.replace(resolutions=(32,))  # one graph key: 2 eager steps, capture, replays
    g = np.random.default_rng(0)
    n = 64
    xs = g.integers(0, 256, (n, 3, 32, 32), dtype=np.uint8)
    ys = g.integers(0, 10, n)
    phases = (PhaseConfig("full", 1, 0.0, 1), PhaseConfig("depth1", 1, 0.0, 2))
    trainers = {}
    for graphs in (False, True):
        cfg = TrainConfig(phases=phases, batch_size=16, augment=False, calib_images=16, cuda_graphs=graphs,
                          fixed_shape=True, warmup_epochs=0.0, eval_every_epoch=False)
        data = TrainData.from_numpy(xs, ys, xs[:16], ys[:16], "cuda")
        tr = trainers[graphs] = Trainer(space, cfg, data, tmp_path / str(graphs))
        tr.teacher = tr._frozen_copy()
        tr._make_optimizer(phases[1])
    grads: dict[bool, list] = {}
    for graphs, tr in trainers.items():  # gradients as the optimizer receives them (SGD-Nesterov on
        step = tr.opt.step               # CUDA then adds its momentum into .grad in place)

        def spy(*a, _g=graphs, _tr=tr, _step=step, **k):
            grads[_g] = [None if p.grad is None else p.grad.clone() for p in _tr.net.parameters()]
            return _step(*a, **k)

        tr.opt.step = spy
    names = [n for n, _ in trainers[False].net.named_parameters()]
    n_cmp = 0
    for s in range(6):
        idx = torch.arange(16, device="cuda") + 8 * (s % 5)
        out = {}
        for graphs, tr in trainers.items():
            tr.state.step = s
            out[graphs] = float(tr.train_step(1, idx))
        assert abs(out[False] - out[True]) < 1e-3, (s, out)
        for name, p, q in zip(names, grads[False], grads[True]):
            if p is None:
                assert float(q.abs().max()) == 0.0, (s, name)
                continue
            n_cmp += 1
            assert torch.allclose(p, q, atol=2e-3, rtol=5e-2), (s, name, (p - q).abs().max())
    assert trainers[True].graphs.captures == 1 and n_cmp > 100


def test_trainer_refuses_cuda_graphs_on_cpu(tiny_space, tmp_path):
    from nagkit.errors import BadInputError
    from nagkit.supernet.train import PhaseConfig, TrainConfig, TrainData, Trainer

    xs = np.zeros((8, 3, 32, 32), dtype=np.uint8)
    ys = np.zeros(8, dtype=np.int64)
    cfg = TrainConfig(phases=(PhaseConfig("full", 1, 0.1),), batch_size=4, cuda_graphs=True)
    with pytest.raises(BadInputError, match="CUDA-graph training steps need a CUDA device"):
        Trainer(tiny_space, cfg, TrainData.from_numpy(xs, ys, xs, ys, "cpu"), tmp_path)
