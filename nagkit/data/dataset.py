"""Architecture datasets: JSONL with a provenance header, collected resumably.

Line 1 is the header ``{"nagkit_dataset": 1, "space": ..., "latency_table": {...sha256},
"accuracy_source": {...}, "seed": ..., "nagkit_version": ...}``; every further line is one
sample ``{"i", "arch", "ofa", "latency_ms", "accuracy", "source"}``.

Collection draws archs uniformly from one seeded stream (``numpy.random.default_rng(seed)``)
and appends rows in chunks (flush + fsync). On resume the header must match (same space,
table, accuracy source and seed); the stream is replayed past the rows already on disk, so a
resumed file is identical to an uninterrupted one. A torn last line is cut off first.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from nagkit.errors import ArtifactError, BadInputError, check_seed
from nagkit.io import check_out_path, input_file
from nagkit.space.arch import Arch
from nagkit.space.sampling import sample
from nagkit.space.space import SearchSpace

FORMAT_VERSION = 1
_COMPARED = ("space", "space_def", "latency_table", "accuracy_source", "seed")


@dataclass
class ArchDataset:
    header: dict[str, Any]
    archs: list[Arch]
    latency_ms: np.ndarray
    accuracy: np.ndarray

    def __len__(self) -> int:
        return len(self.archs)

    @property
    def latency_range(self) -> tuple[float, float]:
        return float(self.latency_ms.min()), float(self.latency_ms.max())


def make_header(space: SearchSpace, table_prov: dict[str, Any], acc_prov: dict[str, Any], seed: int) -> dict:
    from nagkit.version import __version__

    return {"nagkit_dataset": FORMAT_VERSION, "space": space.name, "space_def": space.to_dict(),
            "latency_table": _stable(table_prov), "accuracy_source": _stable(acc_prov), "seed": int(seed),
            "sampling": "uniform (nagkit.space.sampling.sample)", "nagkit_version": __version__}


def _stable(d: dict[str, Any]) -> dict[str, Any]:
    """Drop run-specific fields (absolute paths move between checkouts; hashes identify)."""
    out = {k: v for k, v in d.items() if k != "path"}
    return json.loads(json.dumps(out, default=str))


def collect(path: str | Path, *, space: SearchSpace, table, source, n: int, seed: int,
            table_prov: dict[str, Any], chunk: int = 256,
            progress: Callable[[int, int], None] | None = None) -> ArchDataset:
    """Collect ``n`` samples into ``path`` (resuming a matching partial file)."""
    if n <= 0:
        raise BadInputError(f"--n must be positive, got {n}")
    check_seed(seed)
    path = Path(path)
    check_out_path(path)  # --out below an existing file: refused before any work (issue 13 D5)
    header = make_header(space, table_prov, source.provenance(), seed)
    done = _prepare(path, header)
    rng = np.random.default_rng(seed)
    for _ in range(done):  # replay the seeded stream past the rows on disk
        sample(space, rng)
    if progress:
        progress(min(done, n), n)
    with open(path, "a", encoding="utf-8") as f:
        i = done
        while i < n:
            m = min(chunk, n - i)
            archs = [sample(space, rng) for _ in range(m)]
            lat = table.predict_many(space, archs)
            acc = source.evaluate(archs)
            lines = []
            for j, (a, l, c) in enumerate(zip(archs, lat, acc)):
                lines.append(json.dumps({"i": i + j, "arch": str(a), "ofa": space.to_ofa_dict(a),
                                         "latency_ms": round(float(l), 6), "accuracy": round(float(c), 6),
                                         "source": source.name}))
            f.write("\n".join(lines) + "\n")
            f.flush()
            os.fsync(f.fileno())
            i += m
            if progress:
                progress(i, n)
    return load_dataset(path, space=space)


def _prepare(path: Path, header: dict[str, Any]) -> int:
    """Write the header of a new file, or validate a partial one; returns rows already done."""
    if os.path.lexists(path):
        input_file(path, "dataset", hint="choose another --out")  # a FIFO or a folder: refused, not read
    if not path.exists() or path.stat().st_size == 0:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(json.dumps(header) + "\n")
            f.flush()
            os.fsync(f.fileno())
        return 0
    raw = path.read_bytes()
    if not raw.endswith(b"\n"):  # a torn last line from an interrupted run
        cut = raw.rfind(b"\n") + 1
        with open(path, "r+b") as f:
            f.truncate(cut)
        raw = raw[:cut]
        if not raw:
            return _prepare(path, header)
    lines = raw.decode("utf-8").splitlines()
    try:
        old = json.loads(lines[0])
    except json.JSONDecodeError:
        old = None
    if not isinstance(old, dict) or old.get("nagkit_dataset") != FORMAT_VERSION:
        raise ArtifactError(f"{str(path)!r} exists and is not a nagkit dataset; refusing to append",
                            hint="choose another --out or remove the file")
    diff = [k for k in _COMPARED if old.get(k) != header.get(k)]
    if diff and len(lines) == 1:  # a header without rows (a run that failed at once): nothing to keep
        path.unlink()
        return _prepare(path, header)
    if diff:
        raise ArtifactError(
            f"dataset {str(path)!r} was collected with a different {', '.join(diff)} "
            f"(file: {', '.join(repr(old.get(k)) for k in diff)[:300]}); cannot resume it",
            hint="use another --out, or delete the file to start over")
    return len(lines) - 1


def load_dataset(path: str | Path, *, space: SearchSpace | None = None) -> ArchDataset:
    path = input_file(path, "dataset", error=ArtifactError,
                      hint="collect one with `nagkit dataset --workspace W --n 16000`")
    lines = path.read_text(encoding="utf-8").splitlines()
    if not lines:
        raise ArtifactError(f"dataset {str(path)!r} is empty", hint="collect it again with `nagkit dataset`")
    try:
        header = json.loads(lines[0])
    except json.JSONDecodeError:
        header = None
    if not isinstance(header, dict) or header.get("nagkit_dataset") != FORMAT_VERSION:
        raise ArtifactError(f"{str(path)!r} has no nagkit dataset header (format {FORMAT_VERSION})")
    if space is not None and header.get("space") != space.name:
        raise ArtifactError(f"dataset {str(path)!r} is for space {header.get('space')!r}, not {space.name!r}")
    archs, lat, acc = [], [], []
    for ln, line in enumerate(lines[1:], start=2):
        try:
            row = json.loads(line)
            a = Arch.from_string(row["arch"])
            if space is not None:
                space.validate(a)
            archs.append(a)
            lat.append(float(row["latency_ms"]))
            acc.append(float(row["accuracy"]))
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
            raise ArtifactError(f"dataset {str(path)!r} line {ln} is corrupt ({e}); it is refused",
                                hint="resume collection (it cuts torn lines) or collect again") from None
    if not archs:
        raise ArtifactError(f"dataset {str(path)!r} has no samples", hint="collect with `nagkit dataset`")
    return ArchDataset(header, archs, np.array(lat), np.array(acc))


def rows_done(path: str | Path) -> int:
    path = Path(path)
    if not os.path.lexists(path):
        return 0
    input_file(path, "dataset", hint="choose another --out")
    return max(0, len(path.read_bytes().splitlines()) - 1)


def dataset_from_arrays(space: SearchSpace, archs: Sequence[Arch], lat, acc, header=None) -> ArchDataset:
    return ArchDataset(dict(header or {"space": space.name}), list(archs), np.asarray(lat, float),
                       np.asarray(acc, float))


def relabel(src: str | Path, dest: str | Path, *, space: SearchSpace, table, table_prov: dict[str, Any]) -> ArchDataset:
    """A dataset for another latency table without a single accuracy query: the rows of ``src``
    whose arch lies in ``space`` (e.g. at the resolutions a device's table covers), with their
    accuracy and the latency ``table`` predicts. Written atomically to ``dest`` (which may be
    ``src``); the header names the source file (sha256), keeps its accuracy source and seed, and
    records in ``carried_from`` the table the accuracies were first paid for (a training counts
    them as carried over, not as its own queries: decisions 37)."""
    from nagkit.io import atomic_write_text, sha256_file

    old = load_dataset(src)
    keep = []
    for a, c in zip(old.archs, old.accuracy):
        try:
            keep.append((space.validate(a), float(c)))
        except BadInputError:  # e.g. a resolution the device's table does not cover
            continue
    if not keep:
        raise ArtifactError(f"none of the {len(old)} archs of {str(src)!r} lies in space {space.name!r} "
                            f"(resolutions {list(space.resolutions)})",
                            hint="profile the device at the space's resolutions (`nagkit profile --resolutions ...`)")
    archs = [a for a, _ in keep]
    lat = table.predict_many(space, archs)
    header = make_header(space, table_prov, old.header.get("accuracy_source", {}), int(old.header.get("seed", 0)))
    header["carried_from"] = old.header.get("carried_from") or old.header.get("latency_table") or {"file": str(src)}
    header["sampling"] = (f"relabelled: the archs and accuracies of {Path(src).name} (sha256 "
                          f"{sha256_file(src)[:16]}, {len(old)} rows, {old.header.get('sampling', 'uniform')}) lying "
                          f"in this space ({len(keep)} rows), with latency from this table; no accuracy query")
    source = old.header.get("accuracy_source", {}).get("scheme") or "relabelled"
    lines = [json.dumps(header)] + [
        json.dumps({"i": i, "arch": str(a), "ofa": space.to_ofa_dict(a), "latency_ms": round(float(l), 6),
                    "accuracy": round(c, 6), "source": source})
        for i, ((a, c), l) in enumerate(zip(keep, lat))]
    atomic_write_text(dest, "\n".join(lines) + "\n")
    return load_dataset(dest, space=space)
