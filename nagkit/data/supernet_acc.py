"""The ``supernet:CKPT`` accuracy source: inherited weights + BN recalibration + validation.

For each arch: extract the subnet from the supernet (weights copied), recompute its BN
statistics on a fixed, seeded subset of the training split (``calib_images``, no
augmentation), and measure top-1 accuracy on the validation split (seeded, split off the
training set; ``split = "test"`` only for final reports). Evaluation runs in fp32, so results
do not depend on autocast.

Options (the workspace's ``accuracy_options``): ``data_dir``, ``split`` (val|test), ``n_val``,
``val_seed``, ``calib_images``, ``calib_seed``, ``batch_size``, ``device`` (cpu|cuda),
``workers`` (CPU processes, or one process per GPU with ``device = "cuda"``), ``cache`` (a
JSONL file, relative to the checkpoint's folder: every evaluated arch is appended durably (flush + fsync) and archs already in it
are not evaluated again, so an interrupted collection resumes), ``cache_readonly`` (read the
cache but keep new values in memory only: a workspace shipped in the package is never written).

Sharded collection: ``python -m nagkit.data.supernet_acc --ckpt C --space S --num-archs N --seed K
--out DIR`` evaluates the archs of ``nagkit dataset``'s seeded stream; under ``torchrun`` rank
``r`` of ``w`` takes archs ``r::w`` and appends to ``DIR/acc.rank{r}.jsonl``; a rerun skips
what is on disk. Point ``cache`` at the merged file (``--merge``) and ``nagkit dataset``
reads the accuracies from it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from nagkit.errors import BadInputError, check_seed
from nagkit.space import Arch, SearchSpace, get_space

METHOD = "inherited weights + BN recalibration (train subset) + top-1 on split"
_OPTIONS = {"data_dir": None, "split": "val", "n_val": 5000, "val_seed": 0, "calib_images": 2000, "calib_seed": 0,
            "batch_size": 1000, "device": "cpu", "workers": 1, "cache": None, "threads": None,
            "eval_images": 0, "cache_readonly": False}


def check_options(options: dict[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(options) - set(_OPTIONS))
    if unknown:
        from nagkit.errors import did_you_mean

        parts = [u + (f" ({dym})" if (dym := did_you_mean(u, _OPTIONS)) else "") for u in unknown]
        raise BadInputError(f"unknown supernet accuracy option(s) {', '.join(parts)}; valid: {', '.join(_OPTIONS)}")
    out = {**_OPTIONS, **{k: v for k, v in options.items() if v is not None}}
    if not isinstance(out["eval_images"], int) or out["eval_images"] < 0:
        raise BadInputError(f"supernet accuracy eval_images must be an integer >= 0 (0 = the whole split), "
                            f"got {out['eval_images']!r}")
    for k in ("val_seed", "calib_seed"):  # the one seed range (issue 35)
        check_seed(out[k], f"accuracy_options.{k}", hint=f"fix accuracy_options.{k} in the workspace")
    if out["split"] not in ("val", "test"):
        raise BadInputError(f"supernet accuracy split {out['split']!r} is not valid; valid: val, test")
    if out["device"] not in ("cpu", "cuda") and not str(out["device"]).startswith("cuda:"):
        raise BadInputError(f"supernet accuracy device {out['device']!r} is not valid; valid: cpu, cuda, cuda:N")
    return out


class _Worker:
    """Supernet + data on one device; evaluates archs one by one."""

    def __init__(self, ckpt: str, space_dict: dict[str, Any], opts: dict[str, Any], device: str):
        import torch

        from nagkit.images.fmnist import load_splits
        from nagkit.supernet.checkpoint import load_supernet

        # one thread by default on the CPU: much faster on a shared, busy CPU (set per call, so
        # the process that opened the source keeps its own thread count)
        self.threads = int(opts.get("threads") or 1) if device == "cpu" else None
        self.space = SearchSpace.from_dict(space_dict)
        self.device = torch.device(device)
        self.net = load_supernet(ckpt, self.space).to(self.device)
        sp = load_splits(opts["data_dir"], n_val=opts["n_val"], seed=opts["val_seed"],
                         with_test=opts["split"] == "test")
        ex, ey = sp.split(opts["split"])
        if opts.get("eval_images"):  # a fixed, seeded subset of the split (cheaper on a CPU)
            keep = np.sort(np.random.default_rng(opts["val_seed"] + 1).permutation(len(ex))[: int(opts["eval_images"])])
            ex, ey = ex[keep], ey[keep]
        g = np.random.default_rng(opts["calib_seed"])
        cal = np.sort(g.permutation(len(sp.train_x))[: opts["calib_images"]])

        def t(a, img=False):
            x = torch.as_tensor(np.ascontiguousarray(a))
            return (x.unsqueeze(1) if img else x).to(self.device)

        self.cal, self.x, self.y = t(sp.train_x[cal], True), t(ex, True), t(ey)
        self.batch_size = int(opts["batch_size"])
        # On a GPU, evaluate inside a fixed-shape copy of the supernet: same numbers as the
        # extracted subnet, without cuDNN's set-up for every new subnet shape (decisions.md 9).
        self.scratch = None
        if self.device.type == "cuda":
            import copy

            self.scratch = copy.deepcopy(self.net).set_fixed_shape(True)

    def __call__(self, arch_strings: Sequence[str]) -> list[float]:
        from nagkit.runtimes.threads import torch_threads

        with torch_threads(self.threads):
            return self._evaluate(arch_strings)

    def _evaluate(self, arch_strings: Sequence[str]) -> list[float]:
        from nagkit.supernet.evaluate import subnet_accuracy, subnet_accuracy_fixed

        if self.scratch is not None:
            return [subnet_accuracy_fixed(self.scratch, self.space.parse_arch(a), self.cal, self.x, self.y,
                                          batch_size=self.batch_size) for a in arch_strings]
        return [subnet_accuracy(self.net, self.space.parse_arch(a), self.cal, self.x, self.y,
                                batch_size=self.batch_size) for a in arch_strings]


_POOL_WORKER: _Worker | None = None


def _pool_init(ckpt, space_dict, opts, devices, counter) -> None:
    global _POOL_WORKER
    with counter.get_lock():
        i = counter.value
        counter.value += 1
    _POOL_WORKER = _Worker(ckpt, space_dict, opts, devices[i % len(devices)])


def _pool_eval(arch_strings: list[str]) -> list[float]:
    assert _POOL_WORKER is not None
    return _POOL_WORKER(arch_strings)


class SupernetEvaluator:
    """Callable ``archs -> np.ndarray`` of accuracies (fractions), with ``provenance()``."""

    def __init__(self, ckpt: str | os.PathLike, space: SearchSpace, options: dict[str, Any] | None = None):
        self.ckpt = str(ckpt)
        self.space = space
        self._sha: str | None = None
        options = {k: v for k, v in dict(options or {}).items() if v is not None}
        split = _training_split(self.ckpt)
        for k, v in split.items():  # validate on images the supernet did not train on
            if k in options and options[k] != v:
                raise BadInputError(
                    f"supernet accuracy option {k}={options[k]!r} differs from the split the checkpoint was trained "
                    f"with ({k}={v!r}): validation images would overlap training images",
                    hint=f"drop {k} from accuracy_options (it defaults to the checkpoint's)")
        self.opts = check_options({**split, **options})
        self.queries = 0
        self._local: _Worker | None = None
        self._pool = None
        self._cache: dict[str, float] = {}
        self._cache_path = None
        if self.opts["cache"]:  # relative to the checkpoint's folder
            self._cache_path = Path(self.ckpt).parent / Path(self.opts["cache"]).expanduser()
        if self._cache_path is not None and os.path.lexists(self._cache_path):
            self._cache = read_results(self._cache_path, self._key_fields())

    def _key_fields(self) -> dict[str, Any]:
        from nagkit.supernet.checkpoint import sha256_file

        if self._sha is None:
            self._sha = sha256_file(self.ckpt)
        o = self.opts
        return {"ckpt_sha256": self._sha, "split": o["split"], "n_val": o["n_val"], "val_seed": o["val_seed"],
                "calib_images": o["calib_images"], "calib_seed": o["calib_seed"],
                **({"eval_images": o["eval_images"]} if o.get("eval_images") else {})}

    def provenance(self) -> dict[str, Any]:
        return {"method": METHOD, **self._key_fields()}

    # -- evaluation ------------------------------------------------------------------------------
    def _devices(self) -> list[str]:
        dev, n = self.opts["device"], max(int(self.opts["workers"]), 1)
        if dev == "cuda":
            import torch

            if not torch.cuda.is_available():
                raise BadInputError("supernet accuracy device 'cuda' but torch sees no GPU",
                                    hint="set accuracy_options.device = \"cpu\"")
            return [f"cuda:{i % torch.cuda.device_count()}" for i in range(n)]
        return [dev] * n

    def _run(self, todo: list[str]) -> list[float]:
        devices = self._devices()
        if len(devices) == 1 or len(todo) < 2:
            if self._local is None:
                self._local = _Worker(self.ckpt, self.space.to_dict(), self.opts, devices[0])
            return self._local(todo)
        if self._pool is None:
            import torch.multiprocessing as mp

            ctx = mp.get_context("spawn")
            counter = ctx.Value("i", 0)
            self._pool = ctx.Pool(len(devices), initializer=_pool_init,
                                  initargs=(self.ckpt, self.space.to_dict(), self.opts, devices, counter))
        shards = [todo[i::len(devices)] for i in range(len(devices))]
        parts = self._pool.map(_pool_eval, shards)
        out = [0.0] * len(todo)
        for i, part in enumerate(parts):
            out[i::len(devices)] = part
        return out

    def __call__(self, archs: Sequence[Arch]) -> np.ndarray:
        keys = [str(self.space.validate(a)) for a in archs]
        todo = [k for k in dict.fromkeys(keys) if k not in self._cache]
        if todo:
            chunk = 64 if self._cache_path is not None else len(todo)
            for i in range(0, len(todo), chunk):
                part = todo[i:i + chunk]
                accs = self._run(part)
                new = dict(zip(part, accs))
                if self._cache_path is not None and not self.opts["cache_readonly"]:
                    append_results(self._cache_path, new, self._key_fields())
                self._cache.update(new)
        self.queries += len(keys)
        return np.array([self._cache[k] for k in keys], dtype=np.float64)

    evaluate = __call__

    def cached(self, arch: Arch) -> float | None:
        """The cached accuracy of ``arch`` (no evaluation), or None."""
        return self._cache.get(str(self.space.validate(arch)))

    @property
    def name(self) -> str:
        return "supernet"

    def close(self) -> None:
        if self._pool is not None:
            self._pool.terminate()
            self._pool = None

    def __del__(self) -> None:  # pragma: no cover - interpreter shutdown order
        try:
            self.close()
        except Exception:
            pass


def _training_split(ckpt: str) -> dict[str, Any]:
    """``n_val``/``val_seed`` recorded by ``nagkit supernet train`` (empty for other checkpoints)."""
    from nagkit.errors import ArtifactError

    try:
        from nagkit.supernet.train_config import read_train_meta

        data = read_train_meta(ckpt).get("data", {})
    except ArtifactError:
        return {}
    return {k: data[k] for k in ("n_val", "val_seed") if k in data}


def split_settings(options: Mapping[str, Any] | None = None, ckpt: str | os.PathLike | None = None):
    """The images the ``supernet:`` source recalibrates BN on and validates with, for
    ``options`` (a workspace's ``accuracy_options``; other keys ignored) and the split recorded
    in ``ckpt`` (a checkpoint of ``nagkit supernet train``), as a
    :class:`~nagkit.images.fmnist.SplitSettings` (what :mod:`nagkit.supernet.finetune` takes)."""
    from nagkit.images.fmnist import SplitSettings

    o = {**_OPTIONS, **{k: v for k, v in dict(options or {}).items() if k in _OPTIONS}}
    if ckpt:
        o.update(_training_split(str(ckpt)))
    return SplitSettings(data_dir=o["data_dir"], n_val=o["n_val"], val_seed=o["val_seed"],
                         calib_images=o["calib_images"], calib_seed=o["calib_seed"])


def make_evaluate_fn(ckpt: Path, space: SearchSpace, options: dict[str, Any]) -> SupernetEvaluator:
    """The hook :mod:`nagkit.data.accuracy` calls for ``supernet:CKPT`` specs."""
    return SupernetEvaluator(ckpt, space, options)


# -- durable per-arch results -------------------------------------------------------------------
def _check_cache_file(path: Path) -> None:
    """A results file that exists must be a regular file (a FIFO would hang its reader)."""
    if os.path.lexists(path):
        from nagkit.io import input_file

        input_file(path, "supernet accuracy cache", hint="fix `cache` in the workspace's [accuracy_options]")


def append_results(path: Path, results: dict[str, float], key: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    _check_cache_file(path)
    if path.exists() and path.stat().st_size:
        raw = path.read_bytes()
        if not raw.endswith(b"\n"):  # cut the torn last line of an interrupted run
            with open(path, "r+b") as f:
                f.truncate(raw.rfind(b"\n") + 1)
    fresh = not path.exists() or path.stat().st_size == 0
    with open(path, "a", encoding="utf-8") as f:
        if fresh:
            f.write(json.dumps({"nagkit_supernet_acc": 1, **key}) + "\n")
        f.write("".join(json.dumps({"arch": a, "accuracy": float(v)}) + "\n" for a, v in results.items()))
        f.flush()
        os.fsync(f.fileno())


def read_results(path: Path, key: dict[str, Any] | None = None) -> dict[str, float]:
    """Rows of a results file (a torn last line is ignored); refuses a file for other settings."""
    from nagkit.errors import ArtifactError

    _check_cache_file(path)
    lines = path.read_text(encoding="utf-8").splitlines()
    if not lines:
        return {}
    try:
        head = json.loads(lines[0])
    except json.JSONDecodeError:
        head = None
    if not isinstance(head, dict) or head.get("nagkit_supernet_acc") != 1:
        raise ArtifactError(f"{str(path)!r} is not a nagkit supernet accuracy file")
    if key is not None:
        diff = [k for k in key if head.get(k) != key[k]]
        if diff:
            raise ArtifactError(f"{str(path)!r} holds accuracies for other settings ({', '.join(diff)} differ)",
                                hint="use another cache file, or delete it to start over")
    out: dict[str, float] = {}
    for ln in lines[1:]:
        try:
            row = json.loads(ln)
        except json.JSONDecodeError:
            continue  # torn last line of an interrupted run
        out[row["arch"]] = float(row["accuracy"])
    return out


def collect_main(argv: list[str] | None = None) -> int:
    """Sharded collection (one process per GPU under torchrun, or one process)."""
    ap = argparse.ArgumentParser(prog="python -m nagkit.data.supernet_acc")
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--space", default=None, help="space name (default: the one stored in the checkpoint)")
    # not "--n": torchrun (python -m torch.distributed.run) reads "--n" as an ambiguous abbreviation of its own options
    ap.add_argument("--num-archs", dest="n", type=int, required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", required=True)
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--merge", action="store_true", help="merge DIR/acc.rank*.jsonl into DIR/acc.jsonl and exit")
    ap.add_argument("--n-val", type=int, default=None, help="validation images split off the training set")
    ap.add_argument("--calib-images", type=int, default=None)
    ap.add_argument("--eval-images", type=int, default=None, help="a seeded subset of the split (default: all)")
    a = ap.parse_args(argv)
    from nagkit.space.sampling import sample_many

    if a.space:
        space = get_space(a.space)
    else:
        from nagkit.supernet.checkpoint import read_checkpoint

        stored = read_checkpoint(a.ckpt).get("space")
        if not isinstance(stored, dict):
            raise SystemExit(f"error: {a.ckpt!r} stores no space; pass --space NAME")
        space = SearchSpace.from_dict(stored)
    out = Path(a.out)
    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    device = a.device
    if device == "cuda":
        device = f"cuda:{int(os.environ.get('LOCAL_RANK', 0))}"
    ev = SupernetEvaluator(a.ckpt, space, {"data_dir": a.data_dir, "device": device, "n_val": a.n_val,
                                           "calib_images": a.calib_images, "eval_images": a.eval_images})
    if a.merge:
        merged: dict[str, float] = {}
        for p in sorted(out.glob("acc.rank*.jsonl")):
            merged.update(read_results(p, ev._key_fields()))
        target = out / "acc.jsonl"
        tmp = out / ".acc.jsonl.merging"
        tmp.unlink(missing_ok=True)
        append_results(tmp, merged, ev._key_fields())
        os.replace(tmp, target)
        print(json.dumps({"merged": len(merged), "file": str(target)}))
        return 0
    archs = sample_many(space, a.n, a.seed)[rank::world]
    ev.opts["cache"] = str(out / f"acc.rank{rank}.jsonl")
    ev._cache_path = Path(ev.opts["cache"])
    if ev._cache_path.is_file():
        ev._cache = read_results(ev._cache_path, ev._key_fields())
    t0 = time.perf_counter()
    done0 = len(ev._cache)
    for i in range(0, len(archs), 256):
        ev(archs[i:i + 256])
        print(f"rank {rank}: {min(i + 256, len(archs))}/{len(archs)} archs "
              f"({(len(ev._cache) - done0) / (time.perf_counter() - t0):.1f}/s)", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(collect_main())
