"""Make an extracted subnet deployable: BN recalibration (always) and optional fine-tuning.

``OFAMobileNetV3.extract`` copies the supernet's BN running statistics, which were accumulated
over many different subnets during progressive shrinking; the accuracy source measures each
subnet after recomputing them. :func:`recalibrate_subnet` does exactly that recomputation on
the images a :class:`~nagkit.images.fmnist.SplitSettings` names (the ``supernet:`` accuracy
source's, from :func:`nagkit.data.supernet_acc.split_settings`), so an exported model is the
model whose accuracy was reported. :func:`finetune_subnet` trains the static subnet further on
the Fashion-MNIST training split (validation images held out as in supernet training).

For a user's own classes (:mod:`nagkit.app.finetune`): :func:`replace_head` gives the subnet a
new classifier, :func:`class_mean_head` sets it from the class means of the inherited features
(a nearest-class-mean classifier: the "before" model, no gradient step), :func:`train` runs the
recipe (:class:`Recipe`) on batches, :func:`top1` measures.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F

from nagkit.images.fmnist import SplitSettings, augment, preprocess
from nagkit.space import SearchSpace
from nagkit.supernet.bn import recalibrate_bn
from nagkit.supernet.evaluate import image_batches
from nagkit.supernet.layers import LinearLayer, global_avg_pool


@dataclass(frozen=True)
class Recipe:
    """How a subnet is fine-tuned: SGD with Nesterov momentum, a cosine learning-rate decay to
    0 over all steps, weight decay on weights only (not BN/bias), label smoothing, gradient
    norm clipping. The classifier trains at ``lr``, the rest at ``lr * backbone_lr_factor``."""

    lr: float = 0.01
    backbone_lr_factor: float = 1.0
    momentum: float = 0.9
    weight_decay: float = 3e-5
    label_smoothing: float = 0.1
    clip_grad_norm: float = 5.0
    batch_size: int = 128

    def to_dict(self) -> dict:
        return asdict(self)


@torch.no_grad()
def recalibrate_subnet(sub: torch.nn.Module, space: SearchSpace, split: SplitSettings = SplitSettings()):
    """Recompute ``sub``'s BN statistics on ``split``'s calibration images."""
    sp = split.load()
    idx = split.calibration_indices(len(sp.train_x))
    dev = next(sub.parameters()).device
    cal = torch.as_tensor(sp.train_x[idx]).unsqueeze(1).to(dev)
    r = int(sub.meta.get("resolution") or max(space.resolutions))
    # channels_last: ~1.5x faster depthwise convolutions on the CPU (3.3 s vs 4.7-6.0 s for 2,000
    # images at r36 on the 2-core reference machine); the weights go back to the default layout.
    sub = sub.to(memory_format=torch.channels_last)
    recalibrate_bn(sub, image_batches(cal, r, space.mean, space.std, 500, channels_last=True))
    return sub.to(memory_format=torch.contiguous_format).eval()


def train(sub: torch.nn.Module, epoch_batches: Callable[[int], Iterable], *, epochs: int, steps_per_epoch: int,
          recipe: Recipe = Recipe()) -> list[float]:
    """Train ``sub`` for ``epochs`` on ``epoch_batches(epoch)`` ((x, y) pairs on the subnet's
    device, ``steps_per_epoch`` of them); returns the mean loss of each epoch. Trains in the
    channels_last layout (about 2x faster steps on the CPU than contiguous NCHW: 1.7-2.0 s vs
    2.9-3.8 s for a batch of 128 of a 0.9 ms fmnist subnet at r36, 1 thread, shared 2-core
    machine); the weights go back to the default layout."""
    from nagkit.errors import BadInputError

    if epochs < 1:
        raise BadInputError(f"fine-tuning needs at least 1 epoch, got {epochs}")
    head = {id(p) for p in sub.classifier.parameters()}
    groups = []
    for is_head in (True, False):
        lr = recipe.lr * (1.0 if is_head else recipe.backbone_lr_factor)
        ps = [p for p in sub.parameters() if (id(p) in head) == is_head]
        groups += [{"params": [p for p in ps if p.ndim > 1], "weight_decay": recipe.weight_decay, "lr": lr},
                   {"params": [p for p in ps if p.ndim <= 1], "weight_decay": 0.0, "lr": lr}]
    opt = torch.optim.SGD([g for g in groups if g["params"]], lr=recipe.lr, momentum=recipe.momentum, nesterov=True)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, max(epochs * steps_per_epoch, 1))
    sub.to(memory_format=torch.channels_last).train()
    losses = []
    for epoch in range(epochs):
        total, n = 0.0, 0
        for xb, yb in epoch_batches(epoch):
            xb = xb.contiguous(memory_format=torch.channels_last)
            loss = F.cross_entropy(sub(xb), yb, label_smoothing=recipe.label_smoothing)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if recipe.clip_grad_norm:
                torch.nn.utils.clip_grad_norm_(sub.parameters(), recipe.clip_grad_norm)
            opt.step()
            sched.step()
            total, n = total + float(loss.detach()), n + 1
        losses.append(total / max(n, 1))
    sub.to(memory_format=torch.contiguous_format)
    return losses


def finetune_subnet(sub: torch.nn.Module, space: SearchSpace, split: SplitSettings = SplitSettings(), *,
                    epochs: int, seed: int = 0, recipe: Recipe = Recipe()):
    """Fine-tune a static subnet on ``split``'s Fashion-MNIST training images (the supernet's
    augmentation: ±2 px shift, flip). Every random draw comes from generators seeded by ``seed``."""
    from nagkit.errors import BadInputError

    if epochs < 1:
        raise BadInputError(f"fine-tuning needs at least 1 epoch, got {epochs}")
    sp = split.load()
    dev = next(sub.parameters()).device
    x = torch.as_tensor(sp.train_x).unsqueeze(1).to(dev)
    y = torch.as_tensor(sp.train_y).to(dev)
    r = int(sub.meta.get("resolution") or max(space.resolutions))
    bs = recipe.batch_size
    steps = len(x) // bs
    g = torch.Generator(device=dev).manual_seed(seed)
    order_gen = torch.Generator().manual_seed(seed)

    def batches(_epoch: int):
        order = torch.randperm(len(x), generator=order_gen)[: steps * bs].view(steps, bs).to(dev)
        for idx in order:
            yield preprocess(augment(x.index_select(0, idx), g), r, space.mean, space.std), y.index_select(0, idx)

    train(sub, batches, epochs=epochs, steps_per_epoch=steps, recipe=recipe)
    return sub.eval()


# -- a new head for the user's classes --------------------------------------------------------
def replace_head(sub: torch.nn.Module, n_classes: int, dropout: float = 0.0, seed: int = 0):
    """Give ``sub`` a new classifier for ``n_classes`` (seeded init; see :func:`class_mean_head`)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        head = LinearLayer(sub.classifier.in_features, int(n_classes), dropout_rate=dropout)
    dev = next(sub.parameters()).device
    sub.classifier = head.to(dev)
    return sub


@torch.no_grad()
def features(sub: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    """The classifier's input (the feature-mix layer's output) for a batch ``x``."""
    h = sub.first_conv(x)
    for b in sub.blocks:
        h = b(h)
    h = sub.feature_mix_layer(global_avg_pool(sub.final_expand_layer(h)))
    return torch.flatten(h, 1)


@torch.no_grad()
def class_mean_head(sub: torch.nn.Module, batches: Iterable, n_classes: int) -> None:
    """Set the classifier to the nearest-class-mean rule of the current features:
    ``w_c = mu_c``, ``b_c = -|mu_c|^2 / 2`` (argmax = the closest class mean)."""
    sub.eval()
    sums, counts = None, torch.zeros(n_classes)
    for xb, yb in batches:
        f = features(sub, xb).double().cpu()
        if sums is None:
            sums = torch.zeros(n_classes, f.shape[1], dtype=torch.float64)
        sums.index_add_(0, yb.cpu(), f)
        counts += torch.bincount(yb.cpu(), minlength=n_classes)
    mu = (sums / counts.clamp(min=1).unsqueeze(1).double()).float()
    lin = sub.classifier.linear
    lin.weight.copy_(mu.to(lin.weight.device))
    lin.bias.copy_((-0.5 * (mu * mu).sum(1)).to(lin.bias.device))


@torch.no_grad()
def top1(sub: torch.nn.Module, batches: Iterable) -> tuple[float, int]:
    """(top-1 accuracy, images) of ``sub`` in eval mode on (x, y) batches."""
    sub.eval()
    correct = n = 0
    for xb, yb in batches:
        correct += int((sub(xb).argmax(1) == yb).sum())
        n += len(yb)
    return correct / max(n, 1), n
