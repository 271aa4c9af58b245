"""Parity checks: an exported model, run in its runtime, against the PyTorch module.

The check passes when ``max|exported - PyTorch| <= rtol * max(1, max|PyTorch|)`` with
``rtol = 1e-4`` (fp32). A float16-weight file is checked the same way against
:func:`float16_reference` (the module with its weights rounded as the file stores them). Inputs are seeded (``torch.Generator``, standard normal, which is
about the range of mean/std-normalised images) or given by the caller. A failure raises
:class:`ParityError` (a :class:`~nagkit.errors.CheckFailedError`, exit 1) that reports the max
difference, the tolerance and the input seed.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from nagkit.errors import BadInputError, CheckFailedError
from nagkit.runtimes.base import LoadedModel
from nagkit.runtimes.models import load_model

DEFAULT_RTOL = 1e-4


@dataclass(frozen=True)
class ParityResult:
    format: str
    runtime: str
    path: str
    max_abs_diff: float
    max_abs_ref: float
    tolerance: float
    rtol: float
    seed: int | None  # None: the caller gave the inputs
    n_inputs: int
    input_shape: tuple[int, ...]
    passed: bool

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["input_shape"] = list(self.input_shape)
        return d

    def describe_inputs(self) -> str:
        src = f"seeded inputs (seed {self.seed})" if self.seed is not None else "given inputs"
        return f"{src}, {self.n_inputs} x {tuple(self.input_shape[1:])}"


class ParityError(CheckFailedError):
    """An exported model disagrees with PyTorch beyond the tolerance."""

    def __init__(self, message: str, result: ParityResult, *, hint: str | None = None):
        super().__init__(message, hint=hint)
        self.result = result


def tolerance_for(ref: np.ndarray, rtol: float = DEFAULT_RTOL) -> float:
    """``rtol * max(1, max|ref|)``."""
    m = float(np.max(np.abs(ref))) if ref.size else 0.0
    return rtol * max(1.0, m)


def seeded_inputs(shape: Sequence[int], seed: int) -> np.ndarray:
    """A float32 standard-normal array of ``shape`` from ``torch.Generator().manual_seed(seed)``."""
    import torch

    g = torch.Generator().manual_seed(int(seed))
    return torch.randn(tuple(int(s) for s in shape), generator=g, dtype=torch.float32).numpy()


def torch_outputs(module, x: np.ndarray) -> np.ndarray:
    """Run ``module`` (eval mode, no grad, fp32, CPU) on ``x``."""
    import torch

    module = module.eval()
    try:
        device = next(module.parameters()).device
    except StopIteration:
        device = torch.device("cpu")
    with torch.no_grad():
        y = module(torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)).to(device))
    return y.detach().float().cpu().numpy()


def float16_reference(module):
    """What a float16-weight file computes (decisions 27), in PyTorch: a CPU copy of ``module``
    (eval) with every BatchNorm folded into the convolution before it, as the converter folds,
    and every convolution and linear weight rounded to float16 (round to nearest even) and back;
    biases and arithmetic stay float32. An fp16 export is checked against it at the fp32
    tolerance, so the check still catches a wrong graph, while the float16 rounding itself is
    reported apart (the file against the fp32 ``module``). A BatchNorm that does not follow a
    convolution cannot be folded the converter's way: an error, never a silent approximation."""
    import copy

    import torch

    from nagkit.runtimes.fold import NotFoldableError, fold_batchnorms, has_batchnorm

    ref = copy.deepcopy(module).cpu().float().eval()
    try:
        ref = fold_batchnorms(ref) if has_batchnorm(ref) else ref
    except NotFoldableError as e:
        raise CheckFailedError(f"cannot build the float16 reference: {e}", hint="export fp32 (--export tflite)") from e
    left = [n for n, m in ref.named_modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    if left:
        raise CheckFailedError(f"cannot build the float16 reference: BatchNorm {left[0]!r} does not follow a "
                               f"convolution ({len(left)} such)", hint="export fp32 (--export tflite)")
    with torch.no_grad():
        for m in ref.modules():
            if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear)):
                m.weight.copy_(m.weight.half().float())
    return ref


def compare(out: np.ndarray, ref: np.ndarray, rtol: float = DEFAULT_RTOL) -> tuple[float, float, float, bool]:
    """``(max|out - ref|, max|ref|, tolerance, passed)``. NaN/inf anywhere fails."""
    out = np.asarray(out, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    if out.shape != ref.shape:
        raise CheckFailedError(
            f"exported model output shape {tuple(out.shape)} differs from PyTorch's {tuple(ref.shape)}"
        )
    tol = tolerance_for(ref, rtol)
    max_ref = float(np.max(np.abs(ref))) if ref.size else 0.0
    if not (np.all(np.isfinite(out)) and np.all(np.isfinite(ref))):
        return math.inf, max_ref, tol, False
    diff = float(np.max(np.abs(out - ref))) if ref.size else 0.0
    return diff, max_ref, tol, diff <= tol


def check_parity(
    module,
    model: LoadedModel | str | os.PathLike,
    *,
    inputs: np.ndarray | None = None,
    reference: np.ndarray | None = None,
    seed: int = 0,
    n_inputs: int | None = None,
    rtol: float = DEFAULT_RTOL,
    threads: int | None = None,
    raise_on_fail: bool = True,
) -> ParityResult:
    """Compare an exported model with ``module`` on seeded or given inputs.

    ``inputs``: an (N, C, H, W) array; by default ``n_inputs`` (default: the model's batch)
    seeded inputs of the model's input shape. ``reference``: expected outputs instead of
    running ``module`` (``module`` may then be None), e.g. a golden file's outputs.
    """
    m = model if isinstance(model, LoadedModel) else load_model(model, threads=threads)
    if inputs is None:
        if any(v is None for v in m.input_shape):
            raise BadInputError(f"model {str(m.path)!r} has a dynamic input shape; pass inputs")
        shape = tuple(int(v) for v in m.input_shape)  # type: ignore[arg-type]
        n = n_inputs or shape[0]
        x = seeded_inputs((n, *shape[1:]), seed)
        used_seed: int | None = int(seed)
    else:
        x = np.ascontiguousarray(inputs, dtype=np.float32)
        used_seed = None
    if reference is None:
        if module is None:
            raise BadInputError("check_parity needs a PyTorch module or reference outputs")
        reference = torch_outputs(module, x)
    out = m.run(x)
    diff, max_ref, tol, passed = compare(out, reference, rtol)
    result = ParityResult(
        format=m.format, runtime=m.runtime, path=str(m.path), max_abs_diff=diff, max_abs_ref=max_ref,
        tolerance=tol, rtol=rtol, seed=used_seed, n_inputs=int(x.shape[0]),
        input_shape=tuple(int(v) for v in x.shape), passed=passed,
    )
    if not passed and raise_on_fail:
        raise ParityError(
            f"parity check failed: {m.format} model {str(m.path)!r} run with {m.runtime} differs "
            f"from PyTorch by max|diff| = {diff:.3g} > tolerance {tol:.3g} "
            f"(= {rtol:g} * max(1, max|PyTorch| = {max_ref:.3g})) on {result.describe_inputs()}",
            result,
            hint="rerun with another --seed to see whether it is input-specific, and try the other "
            "--format; the converter changed the numerics of this model",
        )
    return result
