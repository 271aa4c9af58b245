"""nagkit's Adam, one-cycle schedule and Kendall tau (docs/decisions.md 46): the same numbers as
torch.optim and scipy, which training no longer imports (their first use cost ~3 s of every
`nagkit train`)."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pytest
import torch
from torch import nn

from nagkit.nag.optim import Adam, one_cycle
from nagkit.nag.rankstats import kendall_tau
from tests.nag.test_v3 import _tiny


class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 1))
        self.unused = nn.Linear(3, 3)  # never in the graph: its grad stays None, torch skips it

    def forward(self, x):
        return self.mlp(x)


def _net(seed: int) -> nn.Module:
    torch.manual_seed(seed)
    return _Net()


def _train(net: nn.Module, step_fn, steps: int, seed: int) -> list[float]:
    g = torch.Generator().manual_seed(seed)
    losses = []
    for k in range(steps):
        x = torch.randn(32, 6, generator=g)
        loss = (net(x).squeeze(-1) - x.sum(1)).pow(2).mean()
        step_fn(k, loss)
        losses.append(float(loss.detach()))
    return losses


@pytest.mark.parametrize("weight_decay", [0.0, 1e-4])
def test_adam_updates_like_torch_adam_bit_for_bit(weight_decay):
    a, b = _net(0), _net(0)
    ours = Adam(a.parameters(), lr=3e-3, weight_decay=weight_decay)
    ref = torch.optim.Adam(b.parameters(), lr=3e-3, weight_decay=weight_decay)

    def ours_step(_k, loss):
        ours.zero_grad()
        loss.backward()
        ours.step()

    def ref_step(_k, loss):
        ref.zero_grad(set_to_none=True)
        loss.backward()
        ref.step()

    la, lb = _train(a, ours_step, 60, 1), _train(b, ref_step, 60, 1)
    assert la == lb
    for pa, pb in zip(a.parameters(), b.parameters()):
        assert torch.equal(pa, pb)
    assert a.unused.weight.grad is None and torch.equal(a.unused.weight, _net(0).unused.weight)


def test_the_one_cycle_schedule_is_torchs_one_cycle_lr_with_momentum_cycling():
    steps, lr, pct = 50, 2e-3, max(0.1, 2.0 / 50)
    a, b = _net(3), _net(3)
    ours, sched = Adam(a.parameters(), lr=lr), one_cycle(steps, lr, pct)
    ref = torch.optim.Adam(b.parameters(), lr=lr)
    ref_sched = torch.optim.lr_scheduler.OneCycleLR(ref, max_lr=lr, total_steps=steps, pct_start=pct)
    seen = []

    def ours_step(k, loss):
        ours.zero_grad()
        loss.backward()
        ours.lr, ours.beta1 = sched[k]
        ours.step()

    def ref_step(_k, loss):
        ref.zero_grad(set_to_none=True)
        loss.backward()
        seen.append((ref.param_groups[0]["lr"], ref.param_groups[0]["betas"][0]))
        ref.step()
        ref_sched.step()

    assert _train(a, ours_step, steps, 2) == _train(b, ref_step, steps, 2)
    assert sched == seen  # lr and beta1 of every step, exactly
    assert max(s[0] for s in sched) == pytest.approx(lr) and sched[0][1] == 0.95
    for pa, pb in zip(a.parameters(), b.parameters()):
        assert torch.equal(pa, pb)
    with pytest.raises(ValueError):
        one_cycle(0, lr, 0.3)


def test_kendall_tau_is_scipys_tau_b_with_ties_and_nan():
    from scipy.stats import kendalltau

    rng = np.random.default_rng(0)
    for n in (3, 17, 1500, 2600):  # the last two span blocks of the pair count
        x = rng.normal(size=n)
        y = x + rng.normal(size=n)
        assert kendall_tau(x, y) == pytest.approx(kendalltau(x, y).statistic, abs=1e-12)
        xt, yt = np.round(x), np.round(y * 2)  # many ties in both
        assert kendall_tau(xt, yt) == pytest.approx(kendalltau(xt, yt).statistic, abs=1e-12)
    assert kendall_tau([1, 2, 3], [3, 2, 1]) == -1.0
    assert math.isnan(kendall_tau([1, 1, 1], [1, 2, 3]))  # a constant input, as scipy
    assert math.isnan(kendall_tau([1, np.nan, 3], [1, 2, 3]))
    assert math.isnan(kendall_tau([1], [1]))
    with pytest.raises(ValueError):
        kendall_tau([1, 2], [1, 2, 3])


def test_a_training_imports_neither_torch_dynamo_nor_scipy(tmp_path):
    """`nagkit train` on a tiny workspace, in its own process: neither heavy module is loaded
    (torch.optim's first optimizer imports torch._dynamo, scipy.stats took ~1 s)."""
    ws = _tiny(tmp_path, dataset={"n": 100}, frontier={"total_queries": 600})
    code = ("import sys, json\nfrom nagkit.cli.main import main\n"
            f"assert main(['dataset', '--workspace', {str(ws)!r}]) == 0\n"
            f"assert main(['train', '--workspace', {str(ws)!r}]) == 0\n"
            "print(json.dumps(sorted(m for m in sys.modules if m.startswith(('torch._dynamo', 'scipy')))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert (ws / "generator.pt").exists()
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []
