"""Load supernet checkpoints: OFA's published files or nagkit's own.

Accepted: a plain state_dict, ``{"state_dict": ...}`` (OFA's published files), or nagkit's
``{"state_dict": ..., "space": {...}, ...}``. Keys may use ``.conv.`` or OFA's older
``.mobile_inverted_conv.``. Always ``torch.load(weights_only=True)``: no arbitrary unpickling.
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from nagkit.errors import CheckpointError
from nagkit.io import sha256_file  # noqa: F401 - re-exported by nagkit.supernet
from nagkit.space import SearchSpace, get_space




def read_checkpoint(path: str | os.PathLike) -> dict[str, Any]:
    """Read a checkpoint file safely and return its raw object (a dict)."""
    import torch

    from nagkit.io import input_file

    p = input_file(path, "weights file", error=CheckpointError,
                   hint="pass an OFA checkpoint (.pth) or one written by `nagkit supernet train`")
    if p.stat().st_size == 0:
        raise CheckpointError(f"weights file {str(p)!r} is empty")
    with open(p, "rb") as f:
        head = f.read(4)
    if not (head.startswith(b"PK") or head.startswith(b"\x80")):
        raise CheckpointError(f"weights file {str(p)!r} is not a PyTorch checkpoint (it starts with {head!r})",
                              hint="pass an OFA checkpoint (.pth) or one written by `nagkit supernet train`")
    if head.startswith(b"PK") and not zipfile.is_zipfile(p):
        raise CheckpointError(f"weights file {str(p)!r} is truncated or corrupt (its zip directory is missing)",
                              hint="re-download or re-export the checkpoint")
    try:
        obj = torch.load(p, map_location="cpu", weights_only=True)
    except (RuntimeError, EOFError, zipfile.BadZipFile, OSError) as e:
        txt = str(e).splitlines()[0][:160] if str(e) else type(e).__name__
        raise CheckpointError(f"weights file {str(p)!r} is truncated or corrupt: {txt}",
                              hint="re-download or re-export the checkpoint") from None
    except Exception as e:  # weights_only refusing a pickle with code objects, etc.
        raise CheckpointError(f"weights file {str(p)!r} cannot be loaded safely (weights_only=True): "
                              f"{str(e).splitlines()[0][:160]}",
                              hint="nagkit never unpickles code; re-save the checkpoint as a plain state_dict") from None
    if not isinstance(obj, Mapping):
        raise CheckpointError(f"weights file {str(p)!r} holds a {type(obj).__name__}, not a state_dict")
    return dict(obj)


def extract_state_dict(obj: Mapping[str, Any]) -> dict[str, Any]:
    import torch

    sd = obj.get("state_dict", obj) if isinstance(obj, Mapping) else obj
    if not isinstance(sd, Mapping) or not sd or not all(isinstance(v, torch.Tensor) for v in sd.values()):
        raise CheckpointError("checkpoint has no state_dict of tensors (expected a plain state_dict or "
                              "{'state_dict': ...})")
    out = {}
    for k, v in sd.items():
        k = k.replace(".mobile_inverted_conv.", ".conv.")
        if k.startswith("module."):
            k = k[len("module."):]
        out[k] = v
    return out


def _guess_space(sd: Mapping[str, Any]) -> str | None:
    w = sd.get("first_conv.conv.weight")
    if w is None:
        return None
    from nagkit.space import SPACES

    for name in SPACES.names():
        s = SPACES.get(name)
        if w.shape[0] == s.stem_width and w.shape[1] == s.in_channels:
            return name
    return None


def load_state_into(net, sd: Mapping[str, Any], path: str = "checkpoint") -> None:
    model_sd = net.state_dict()
    missing = [k for k in model_sd if k not in sd]
    unexpected = [k for k in sd if k not in model_sd]
    bad_shape = [(k, tuple(sd[k].shape), tuple(v.shape)) for k, v in model_sd.items()
                 if k in sd and tuple(sd[k].shape) != tuple(v.shape)]
    if missing or unexpected or bad_shape:
        parts = []
        if missing:
            parts.append(f"{len(missing)} missing keys (e.g. {missing[0]})")
        if unexpected:
            parts.append(f"{len(unexpected)} unexpected keys (e.g. {unexpected[0]})")
        if bad_shape:
            k, a, b = bad_shape[0]
            parts.append(f"{len(bad_shape)} shape mismatches (e.g. {k}: file {a} vs space {b})")
        guess = _guess_space(sd)
        hint = f"this looks like a checkpoint for space {guess!r}: pass --space {guess}" if guess and guess != net.space.name \
            else "check --space matches the checkpoint"
        raise CheckpointError(f"{path} does not fit space {net.space.name!r}: " + "; ".join(parts), hint=hint)
    net.load_state_dict(sd, strict=True)


def load_supernet(path: str | os.PathLike, space: SearchSpace | str | None = None):
    """Load a supernet checkpoint for ``space`` (or the space recorded in a nagkit checkpoint)."""
    from nagkit.supernet.network import OFAMobileNetV3

    obj = read_checkpoint(path)
    if space is None:
        if isinstance(obj.get("space"), Mapping):
            space = SearchSpace.from_dict(dict(obj["space"]))
        else:
            guess = _guess_space(extract_state_dict(obj))
            if guess is None:
                raise CheckpointError(f"cannot tell the space of {str(path)!r}", hint="pass --space")
            space = guess
    space = get_space(space)
    sd = extract_state_dict(obj)
    net = OFAMobileNetV3(space)
    load_state_into(net, sd, path=repr(str(path)))
    return net.eval()
