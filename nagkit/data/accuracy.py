"""Accuracy sources: where an architecture's accuracy comes from.

An accuracy source is named by a spec ``SCHEME:PATH`` (e.g.
``ofa-predictor:ofa/acc_predictor.pth``, shipped in the package, or ``supernet:ckpt.pt``) and
opened with :func:`open_accuracy_source`. Every source follows :class:`AccuracySource`:

- ``evaluate(archs) -> np.ndarray``: top-1 accuracy as a fraction in [0, 1], one per arch,
  evaluated as one batch; every arch evaluated counts as one *query* (no cache, so counts are
  comparable with OFA's "37,600 queries per budget");
- ``name``: a short label (``ofa-predictor``), ``spec``: the spec it was opened from;
- ``provenance()``: a JSON-able dict (scheme, path, sha256, ...) recorded in every artifact;
- ``queries``: the number of archs evaluated so far (``reset_queries()`` sets it to 0);
- ``expensive``: True when a query costs seconds here (a supernet evaluated on this machine),
  so callers may settle for ``cached(arch)``: the value already known for ``arch`` without a
  query (not counted), or None.

Schemes live in :data:`ACCURACY_SCHEMES`. The ``supernet`` scheme calls
``nagkit.data.supernet_acc.make_evaluate_fn(ckpt, space, options)`` which returns a callable
``archs -> accuracies`` (inherited weights + BN recalibration + validation accuracy) with a
cache; this module wraps it in :class:`CallableAccuracySource` so counting and checks are
shared. The ``synthetic`` scheme wraps :func:`nagkit.data.synthetic.synthetic_accuracy`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from nagkit.io import sha256_file
from nagkit.errors import ArtifactError, BadInputError, CheckpointError, NagkitError
from nagkit.registry import Registry
from nagkit.space.arch import Arch
from nagkit.space.space import SearchSpace


@runtime_checkable
class AccuracySource(Protocol):
    name: str
    spec: str
    queries: int
    expensive: bool

    def evaluate(self, archs: Sequence[Arch]) -> np.ndarray: ...

    def cached(self, arch: Arch) -> float | None: ...

    def provenance(self) -> dict[str, Any]: ...

    def reset_queries(self) -> None: ...


file_sha256 = sha256_file


class BaseAccuracySource:
    """Shared counting and output checks. Subclasses implement ``_evaluate``."""

    name = "base"
    expensive = False  # a query costs milliseconds

    def cached(self, arch: Arch) -> float | None:
        """No cache: every value is a query."""
        return None

    def __init__(self, space: SearchSpace, spec: str):
        self.space = space
        self.spec = spec
        self.queries = 0

    def _evaluate(self, archs: Sequence[Arch]) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def evaluate(self, archs: Sequence[Arch]) -> np.ndarray:
        archs = list(archs)
        if not archs:
            return np.zeros(0, dtype=np.float64)
        acc = np.asarray(self._evaluate(archs), dtype=np.float64).reshape(-1)
        if acc.shape[0] != len(archs):
            raise NagkitError(f"accuracy source {self.spec!r} returned {acc.shape[0]} values for {len(archs)} archs")
        return self._checked(acc, lambda i: archs[i])

    def reset_queries(self) -> None:
        self.queries = 0

    def evaluate_decisions(self, dec) -> np.ndarray:
        """:meth:`evaluate` on a :class:`~nagkit.space.decisions.Decisions` batch (counted the same)."""
        return self.evaluate(dec.to_archs(self.space))

    def _checked(self, acc: np.ndarray, archs_of) -> np.ndarray:
        """Count and return ``acc``, or raise naming the first bad value (``archs_of(i)`` -> arch)."""
        bad = ~np.isfinite(acc) | (acc < 0) | (acc > 1)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise NagkitError(
                f"accuracy source {self.spec!r} returned {acc[i]!r} for {archs_of(i)}; accuracies must be "
                "fractions in [0, 1]", hint="check the checkpoint/predictor matches the workspace's space",
            )
        self.queries += len(acc)
        return acc

    def provenance(self) -> dict[str, Any]:
        return {"name": self.name, "spec": self.spec}


class OfaPredictorSource(BaseAccuracySource):
    """OFA's ImageNet accuracy predictor: an MLP over :func:`ofa_predictor_encoding`.

    The state dict is read with ``torch.load(weights_only=True)``; its ``N.weight``/``N.bias``
    keys define the layer sizes (OFA's is 128-400-400-400-1, ReLU between, output a fraction).
    """

    name = "ofa-predictor"

    def __init__(self, space: SearchSpace, spec: str, path: Path):
        super().__init__(space, spec)
        import torch

        from nagkit.io import input_file

        self.path = input_file(path, "OFA accuracy predictor", error=CheckpointError,
                               hint="point the workspace's `accuracy` at OFA's acc_predictor.pth (shipped: "
                                    "ofa/acc_predictor.pth)")
        try:
            sd = torch.load(self.path, map_location="cpu", weights_only=True)
        except Exception as e:  # noqa: BLE001 - any unreadable file is a bad checkpoint
            raise CheckpointError(f"cannot read OFA predictor {str(self.path)!r}: {e}") from None
        if isinstance(sd, Mapping) and "state_dict" in sd:
            sd = sd["state_dict"]
        if not isinstance(sd, Mapping):
            raise CheckpointError(f"{str(self.path)!r} is not a state dict (got {type(sd).__name__})")
        sd = {k.removeprefix("model."): v for k, v in sd.items()}
        idx = sorted({int(k.split(".")[0]) for k in sd if k.split(".")[0].isdigit()})
        layers = []
        for j, i in enumerate(idx):
            w, b = sd.get(f"{i}.weight"), sd.get(f"{i}.bias")
            if w is None or b is None or w.ndim != 2:
                raise CheckpointError(
                    f"{str(self.path)!r}: expected Linear layers '{i}.weight'/'{i}.bias'; keys are {sorted(sd)}"
                )
            layers.append((w.float(), b.float()))
        if not layers or layers[-1][0].shape[0] != 1:
            raise CheckpointError(f"{str(self.path)!r}: not an MLP with one output; keys are {sorted(sd)}")
        from nagkit.space.encoding import ofa_predictor_encoding

        dim = ofa_predictor_encoding(space, space.smallest()).shape[0]
        if layers[0][0].shape[1] != dim:
            raise CheckpointError(
                f"predictor {str(self.path)!r} takes {layers[0][0].shape[1]} inputs; space {space.name!r} "
                f"encodes to {dim}", hint="use the predictor trained for this space",
            )
        self._layers = layers
        self._sha = file_sha256(self.path)

    def _evaluate(self, archs: Sequence[Arch]) -> np.ndarray:
        return self._mlp(ofa_batch_encoding(self.space, archs))

    def _mlp(self, x: np.ndarray) -> np.ndarray:
        import torch

        t = torch.from_numpy(x)
        with torch.no_grad():
            for j, (w, b) in enumerate(self._layers):
                t = torch.nn.functional.linear(t, w, b)
                if j < len(self._layers) - 1:
                    t = torch.relu(t)
        return t.reshape(-1).double().numpy()

    def evaluate_decisions(self, dec) -> np.ndarray:
        """The predictor on decision rows, its encoding built in batch (no ``Arch`` objects)."""
        if len(dec) == 0:
            return np.zeros(0, dtype=np.float64)
        sp, slots = self.space, self.space.n_block_slots
        r_bucket = (np.asarray(sp.resolutions) - 112) // 16
        if r_bucket.min() < 0 or r_bucket.max() >= 8:
            return self.evaluate(dec.to_archs(sp))  # raises naming the resolution
        n = len(dec)
        act = dec.active(sp).reshape(-1)
        x = np.zeros((n, slots * 6 + 8), dtype=np.float32)
        rows = np.repeat(np.arange(n), slots)
        s = np.tile(np.arange(slots), n)
        x[rows[act], (s * 3 + dec.k.reshape(-1))[act]] = 1
        x[rows[act], (slots * 3 + s * 3 + dec.e.reshape(-1))[act]] = 1
        x[np.arange(n), slots * 6 + r_bucket[dec.r]] = 1
        return self._checked(self._mlp(x), lambda i: dec.select([i]).to_archs(sp)[0])

    def provenance(self) -> dict[str, Any]:
        return {"name": self.name, "spec": self.spec, "path": str(self.path), "sha256": self._sha,
                "layers": [list(w.shape) for w, _ in self._layers]}


def ofa_batch_encoding(space: SearchSpace, archs: Sequence[Arch]) -> np.ndarray:
    """Vectorised :func:`nagkit.space.encoding.ofa_predictor_encoding` for many archs."""
    ks_list, e_list = (3, 5, 7), (3, 4, 6)
    if tuple(space.ks_list) != ks_list or tuple(space.expand_list) != e_list:
        from nagkit.space.encoding import ofa_predictor_encoding

        ofa_predictor_encoding(space, archs[0])  # raises the shared ArchError
    n, md, slots = len(archs), space.max_depth, space.n_block_slots
    out = np.zeros((n, slots * 6 + 8), dtype=np.float32)
    kpos = {k: i for i, k in enumerate(ks_list)}
    epos = {e: i for i, e in enumerate(e_list)}
    for a_i, arch in enumerate(archs):
        space.validate(arch)
        row = out[a_i]
        for si, st in enumerate(arch.stages):
            for bi, (k, e) in enumerate(st):
                s = si * md + bi
                row[s * 3 + kpos[k]] = 1
                row[slots * 3 + s * 3 + epos[e]] = 1
        ri = (arch.r - 112) // 16
        if not 0 <= ri < 8:
            raise BadInputError(f"resolution {arch.r} is outside the OFA predictor's range 112..239")
        row[slots * 6 + ri] = 1
    return out


class CallableAccuracySource(BaseAccuracySource):
    """Wraps a callable ``archs -> accuracies`` (e.g. a supernet evaluator) as a source."""

    def __init__(self, space: SearchSpace, spec: str, fn: Callable[[Sequence[Arch]], Any], *,
                 name: str, provenance: Mapping[str, Any] | None = None, expensive: bool = False,
                 cached: Callable[[Arch], float | None] | None = None):
        super().__init__(space, spec)
        self.name = name
        self._fn = fn
        self._prov = dict(provenance or {})
        self.expensive = expensive  # seconds per query (callers may skip uncached queries)
        self._cached = cached

    def cached(self, arch: Arch) -> float | None:
        """The value the callable's cache holds for ``arch`` (no query, not counted), or None."""
        return self._cached(arch) if self._cached is not None else None

    def _evaluate(self, archs: Sequence[Arch]) -> np.ndarray:
        return np.asarray(self._fn(archs), dtype=np.float64)

    def provenance(self) -> dict[str, Any]:
        return {"name": self.name, "spec": self.spec, **self._prov}


# -- schemes -------------------------------------------------------------------------------
# A scheme opener: (space, spec, path, options) -> AccuracySource.
Opener = Callable[[SearchSpace, str, Path, Mapping[str, Any]], AccuracySource]
ACCURACY_SCHEMES: Registry[Opener] = Registry(
    "accuracy scheme", hint="write the workspace's `accuracy` as SCHEME:PATH, e.g. ofa-predictor:acc_predictor.pth"
)


@ACCURACY_SCHEMES.register("ofa-predictor")
def _open_ofa_predictor(space, spec, path, options):
    if options:
        raise BadInputError(f"accuracy scheme 'ofa-predictor' takes no options; got {sorted(options)}")
    return OfaPredictorSource(space, spec, path)


@ACCURACY_SCHEMES.register("supernet")
def _open_supernet(space, spec, path, options):
    """Inherited weights + BN recalibration + validation accuracy, implemented by
    ``nagkit.data.supernet_acc.make_evaluate_fn(ckpt: Path, space, options) -> callable``."""
    from nagkit.data.supernet_acc import make_evaluate_fn

    from nagkit.io import input_file

    input_file(path, "supernet checkpoint", error=CheckpointError,
               hint="train one with `nagkit supernet train` or fix the workspace's `accuracy`")
    fn = make_evaluate_fn(Path(path), space, dict(options))
    prov = {"path": str(path), "sha256": file_sha256(path), "options": dict(options), **fn.provenance()}
    return CallableAccuracySource(space, spec, fn, name="supernet", provenance=prov, expensive=True,
                                  cached=fn.cached)


@ACCURACY_SCHEMES.register("synthetic")
def _open_synthetic(space, spec, path, options):
    """Labelled synthetic accuracy (:func:`nagkit.data.synthetic.synthetic_accuracy`): no
    weights, no hardware; for tests and demos."""
    from nagkit.data.synthetic import synthetic_accuracy

    noise = float(dict(options).get("noise", 0.01))

    def fn(archs):
        return [synthetic_accuracy(space, a, noise) for a in archs]

    return CallableAccuracySource(space, spec, fn, name="synthetic", provenance={"kind": "synthetic", "noise": noise})


def split_spec(spec: str) -> tuple[str, str]:
    if not isinstance(spec, str) or ":" not in spec:
        raise BadInputError(
            f"accuracy source spec {spec!r} must be SCHEME:PATH; schemes: {', '.join(ACCURACY_SCHEMES.names())}",
            hint="e.g. accuracy = \"ofa-predictor:ofa/acc_predictor.pth\"",
        )
    scheme, _, rest = spec.partition(":")
    return scheme, rest


def open_accuracy_source(spec: str, space: SearchSpace, *, resolve: Callable[[str], Path] | None = None,
                         options: Mapping[str, Any] | None = None) -> AccuracySource:
    """Open ``SCHEME:PATH``. ``resolve`` maps the PATH text to a file (workspace-relative)."""
    scheme, rest = split_spec(spec)
    opener = ACCURACY_SCHEMES.get(scheme)
    path = resolve(rest) if resolve is not None else Path(rest)
    src = opener(space, spec, path, dict(options or {}))
    if not isinstance(src, AccuracySource):
        raise ArtifactError(f"accuracy scheme {scheme!r} did not return an AccuracySource")
    return src
