"""The fine-tuning building blocks: a new head, the class-mean init, the training loop."""

from __future__ import annotations

import pytest
import torch

from nagkit.data.synthetic import tiny_space
from nagkit.errors import BadInputError
from nagkit.supernet import StaticNet
from nagkit.supernet.bn import recalibrate_bn
from nagkit.supernet.finetune import Recipe, class_mean_head, features, replace_head, top1, train

pytestmark = pytest.mark.usefixtures("one_thread")


def _task(n=48, seed=0):
    """Three classes told apart by which third of the image is bright."""
    g = torch.Generator().manual_seed(seed)
    y = torch.arange(n) % 3
    x = torch.randn(n, 3, 32, 32, generator=g) * 0.3
    for i in range(n):
        x[i, :, :, int(y[i]) * 10:(int(y[i]) + 1) * 10] += 2.0
    return x, y


def test_class_mean_head_is_the_nearest_class_mean_rule():
    sp = tiny_space()
    net = replace_head(StaticNet.from_arch(sp, sp.smallest(32), seed=0), 3, seed=1)
    assert net.classifier.linear.out_features == 3 and net.classifier.in_features == sp.last_channel
    x, y = _task()
    class_mean_head(net, [(x[:24], y[:24]), (x[24:], y[24:])], 3)
    f = features(net.eval(), x)
    mu = torch.stack([f[y == c].mean(0) for c in range(3)])
    nearest = torch.cdist(f, mu).argmin(1)
    assert torch.equal(net(x).argmax(1), nearest)


def test_train_lowers_the_loss_and_is_seeded():
    sp = tiny_space()
    x, y = _task()

    def run():
        net = replace_head(StaticNet.from_arch(sp, sp.smallest(32), seed=0), 3)
        g = torch.Generator().manual_seed(0)

        def batches(_epoch):
            order = torch.randperm(len(x), generator=g)
            for i in range(0, len(x), 16):
                yield x[order[i:i + 16]], y[order[i:i + 16]]

        losses = train(net, batches, epochs=4, steps_per_epoch=3, recipe=Recipe(lr=0.05, batch_size=16))
        return net, losses

    (a, la), (b, lb) = run(), run()
    assert la == lb and la[-1] < la[0]
    assert torch.equal(a.classifier.linear.weight, b.classifier.linear.weight)
    recalibrate_bn(a, [x])  # the running statistics of 12 steps are not the data's: recalibrate (as the recipe does)
    acc, n = top1(a, [(x, y)])
    assert n == 48 and acc > 0.5
    with pytest.raises(BadInputError, match="at least 1 epoch"):
        train(a, lambda e: [], epochs=0, steps_per_epoch=1)
