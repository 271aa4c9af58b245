"""Supernet training settings: the progressive-shrinking phases, their sub-spaces, the
training configuration, the files a run writes and the metadata read back from its final
checkpoint. No torch at import (``read_train_meta`` loads a checkpoint on demand)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from nagkit.errors import ArtifactError, BadInputError
from nagkit.space import SearchSpace

STATE_NAME = "train_state.pt"
FINAL_NAME = "supernet.pt"
LOG_NAME = "train_log.jsonl"
FORMAT = "nagkit-supernet/1"


@dataclass(frozen=True)
class PhaseConfig:
    name: str
    epochs: int
    lr: float
    subnets: int = 1


def default_phases(space: SearchSpace, epochs: dict[str, int] | None = None) -> tuple[PhaseConfig, ...]:
    """OFA's schedule, shortened for small data: full, kernel, depth1.., expand1.."""
    e = {"full": 12, "kernel": 6, "depth": 4, "expand": 4, **(epochs or {})}
    out = [PhaseConfig("full", e["full"], 0.1, 1)]
    if len(space.ks_list) > 1:
        out.append(PhaseConfig("kernel", e["kernel"], 0.03, 1))
    for i in range(1, len(space.depth_list)):
        out.append(PhaseConfig(f"depth{i}", e.get(f"depth{i}", e["depth"]), 0.01, 2))
    for i in range(1, len(space.expand_list)):
        out.append(PhaseConfig(f"expand{i}", e.get(f"expand{i}", e["expand"]), 0.01, 2))
    return tuple(out)


def parse_epochs(text: str | None) -> dict[str, int]:
    """``"full=12,kernel=6,depth=4,expand=4"`` (``depth``/``expand`` set every stage;
    ``depth1=...`` one stage). Raises BadInputError naming the bad item."""
    if not text:
        return {}
    out: dict[str, int] = {}
    for item in text.split(","):
        k, sep, v = item.strip().partition("=")
        base = k.rstrip("0123456789")
        if not sep or base not in ("full", "kernel", "depth", "expand") or not v.strip().isdigit():
            raise BadInputError(f"bad --epochs item {item!r}; write NAME=N with NAME in full, kernel, depth, expand "
                                "(or depth1, expand2, ...)", hint="e.g. --epochs full=12,kernel=6,depth=4,expand=4")
        out[k] = int(v)
    return out


@dataclass(frozen=True)
class TrainConfig:
    phases: tuple[PhaseConfig, ...]
    batch_size: int = 256            # per process
    momentum: float = 0.9
    weight_decay: float = 3e-5
    label_smoothing: float = 0.1
    kd_ratio: float = 1.0
    warmup_epochs: float = 1.0       # full phase only
    seed: int = 0
    augment: bool = True
    calib_images: int = 2000         # BN recalibration for the end-of-phase evaluation
    eval_every_epoch: bool = True
    ckpt_every_steps: int = 0
    fixed_shape: bool | None = None  # masked largest-shape execution; None = on for CUDA (decisions.md 9)
    cuda_graphs: bool | None = None  # replay each step as a CUDA graph; None = on for CUDA (decisions.md 13)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["phases"] = [asdict(p) for p in self.phases]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TrainConfig:
        d = dict(d)
        d["phases"] = tuple(PhaseConfig(**p) for p in d["phases"])
        return cls(**d)


def phase_space(space: SearchSpace, name: str) -> tuple[SearchSpace, int | None]:
    """The sub-space sampled in phase ``name`` and the ``sort_channels`` stage run at its start."""
    ks, es, ds = space.ks_list, space.expand_list, space.depth_list
    if name == "full":
        return space.replace(ks_list=(max(ks),), expand_list=(max(es),), depth_list=(max(ds),)), None
    if name == "kernel":
        return space.replace(expand_list=(max(es),), depth_list=(max(ds),)), None
    if name.startswith("depth"):
        i = int(name[5:])
        return space.replace(expand_list=(max(es),), depth_list=tuple(sorted(ds)[-(i + 1):])), None
    if name.startswith("expand"):
        i = int(name[6:])
        return space.replace(expand_list=tuple(sorted(es)[-(i + 1):])), i - 1
    raise BadInputError(f"unknown phase {name!r}; valid: full, kernel, depthN, expandN")


def seed_of(*parts: int) -> int:
    """One 63-bit seed from several ints (``np.random.SeedSequence``)."""
    return int(np.random.SeedSequence([int(p) for p in parts]).generate_state(1, np.uint64)[0] >> 1)


def read_train_meta(path: str | Path) -> dict[str, Any]:
    """The JSON training metadata stored in a final nagkit supernet checkpoint."""
    from nagkit.supernet.checkpoint import read_checkpoint

    obj = read_checkpoint(path)
    if obj.get("format") != FORMAT:
        raise ArtifactError(f"{str(path)!r} is not a checkpoint written by `nagkit supernet train`")
    return json.loads(obj.get("train", "{}"))

