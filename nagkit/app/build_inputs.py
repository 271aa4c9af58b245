"""What a build reads before its stages run: the supernet weights, the workspace's images (for
BN recalibration, fine-tuning and int8 calibration), the accuracy source's value for an arch,
and the table's prediction. Split out of :mod:`nagkit.app.build` (module size)."""

from __future__ import annotations

import logging
from pathlib import Path

from nagkit.data.accuracy import AccuracySource
from nagkit.errors import BadInputError, check_int, check_seed
from nagkit.latency.predictor import LatencyPredictor
from nagkit.nag.config import MAX_EPOCHS, MAX_SAMPLES

log = logging.getLogger(__name__)


def check_counts(opts) -> None:
    """A build's counts in their ranges, the same for the CLI and the API (issue 35): --samples
    1..MAX_SAMPLES (as ``[inference] samples``), --seed 0..SEED_MAX, --finetune 0..MAX_EPOCHS
    epochs, --max-tries 1..1000."""
    if opts.samples is not None:
        check_int(opts.samples, 1, MAX_SAMPLES, "--samples")
    check_seed(opts.seed)
    check_int(opts.finetune, 0, MAX_EPOCHS, "--finetune (epochs)")
    check_int(opts.max_tries, 1, 1000, "--max-tries")


def predict(table: LatencyPredictor, space, arch) -> tuple[float, float]:
    """(calibrated, raw) predicted latency: every predictor takes ``calibrated``."""
    return float(table.predict(space, arch)), float(table.predict(space, arch, calibrated=False))


def load_weights(ws, space, weights: str | None, random_init: bool, seed: int):
    import torch

    from nagkit.supernet import OFAMobileNetV3, load_supernet, sha256_file

    path = Path(weights) if weights else ws.supernet_path()
    if path is not None:
        if random_init:
            raise BadInputError("--random-init conflicts with supernet weights; drop one of them")
        net = load_supernet(path, space)
        return net, sha256_file(path), str(path)
    if not random_init:
        raise BadInputError(
            f"workspace {ws.name!r} has no supernet weights, so a bundle would carry random weights",
            hint="pass --weights OFA_CHECKPOINT.pth, or --random-init for a latency-only bundle")
    with torch.random.fork_rng(devices=[]):  # seeded weights; the caller's RNG state is left alone
        torch.manual_seed(seed)
        return OFAMobileNetV3(space).eval(), None, None


def source_accuracy(source: AccuracySource | None, arch, mode: str) -> float | None:
    """The accuracy source's value for ``arch`` as ``mode`` allows (see :class:`BuildOptions`)."""
    if source is None or mode == "never":
        return None
    if mode == "auto" and source.expensive:
        cached = source.cached(arch)
        if cached is None:
            log.info("accuracy not measured: the %s source is expensive here and has no cached value for %s "
                     "(pass --accuracy always)", source.name, arch)
        return cached
    return float(source.evaluate([arch])[0])


def split(ws):
    """The images the workspace's ``supernet:`` accuracy source recalibrates and validates on."""
    from nagkit.data.supernet_acc import split_settings

    try:
        ckpt = ws.supernet_path()
    except Exception:  # noqa: BLE001 - a workspace without weights
        ckpt = None
    return split_settings(ws.accuracy_options, ckpt)


def has_fmnist_data(ws) -> bool:
    """Whether the workspace's images are on this machine: its accuracy source is a supernet
    evaluated on Fashion-MNIST (Debian's package)."""
    return ws.accuracy_spec.startswith("supernet:")


def finetune_data(ws, o):
    """The ImageFolder to fine-tune on (opened now: bad data fails before any work), or None."""
    if not o.finetune:
        return None
    if o.data:
        from nagkit.images.folder import open_image_folder

        data = open_image_folder(o.data, channels=ws.space.in_channels, val_fraction=o.val_fraction, seed=o.seed,
                                 mixed_sizes=o.mixed_sizes)
        if data.skipped:  # counted in the manifest too (weights.fine_tuned.data)
            log.warning("skipped %d unreadable image(s), e.g. %s", len(data.skipped), data.skipped[0][0])
        return data
    if not has_fmnist_data(ws):
        raise BadInputError(f"--finetune on workspace {ws.name!r} needs --data DIR: the images its space "
                            f"{ws.space.name!r} was trained on are not on this machine",
                            hint="pass --data DIR, an ImageFolder of your classes (DIR/train/<class>/*.png)")
    return None
