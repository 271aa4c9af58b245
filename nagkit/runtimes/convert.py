"""Convert a PyTorch module to ONNX (torch.onnx) or TFLite (litert-torch): the one converter
used by export, the latency profiler's blocks and validation networks.

Both take an ``nn.Module`` (put in eval mode) and an example input with the exact shape the
exported model will have (NCHW, as in PyTorch); both write atomically. The converters' chatter
(Python-level prints and progress lines) is captured and logged at DEBUG level, and quoted in
the error when a conversion fails; anything native code writes to file descriptor 1 is sent to
stderr, so stdout stays clean for results. litert-torch is imported only here, on demand, so
CUDA-only code never needs it. :func:`convert_module` converts with a seeded example input of a
given shape.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import sys
import tempfile
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from nagkit.errors import NagkitError
from nagkit.io import current_umask
from nagkit.runtimes.fold import folded_for_conversion
from nagkit.runtimes.metadata import set_onnx_metadata, set_tflite_io
from nagkit.runtimes.quiet import native_stderr_captured

log = logging.getLogger(__name__)

ONNX_OPSET = 17
IO_NAMES = ("image", "logits")  # the input and output tensors of every exported whole network, both formats
#: How TFLite files are made beyond the converter's versions: BatchNorm folded in PyTorch first
#: (:mod:`nagkit.runtimes.fold`; the same graph, the same constants but for the last bit of a few
#: weights of untrained BatchNorms, other tensor names). Part of the network cache's key, so a
#: cached network stays byte for byte what an export writes.
TFLITE_RECIPE = "batchnorm-folded"
#: What a model's weights and activations are: a table, a block cache and a bundle each have one.
PRECISIONS = ("fp32", "int8", "fp16")
#: The precisions each format is converted at: float16 weights are a TFLite form (weights stored
#: float16, DEQUANTIZE to float32 at load; decisions 27), not built for ONNX here.
FORMAT_PRECISIONS = {"tflite": ("fp32", "int8", "fp16"), "onnx": ("fp32", "int8")}
#: The representative inputs :func:`convert_module` quantizes a latency model with (seeded normal):
#: they set the activation ranges, which change no operator, so not the latency either.
LATENCY_CALIBRATION_INPUTS = 4


class ConversionError(NagkitError):
    """A converter failed on a model (exit 3)."""


_FD_LOCK = threading.Lock()
_FD_STATE = {"depth": 0, "saved": -1}


@contextlib.contextmanager
def _native_stdout_to_stderr() -> Iterator[None]:
    """Point file descriptor 1 at stderr for the duration (native libraries print there).

    Nested and concurrent uses (threads converting at once) share one redirection: the first
    to enter saves fd 1, the last to leave restores it.
    """
    with _FD_LOCK:
        if _FD_STATE["depth"] == 0:
            try:
                sys.stdout.flush()
            except Exception:  # pragma: no cover - a closed or odd stdout
                pass
            try:
                _FD_STATE["saved"] = os.dup(1)
                os.dup2(2, 1)
            except OSError:  # pragma: no cover - no fd 1 or 2
                _FD_STATE["saved"] = -1
        _FD_STATE["depth"] += 1
    try:
        yield
    finally:
        with _FD_LOCK:
            _FD_STATE["depth"] -= 1
            if _FD_STATE["depth"] == 0 and _FD_STATE["saved"] >= 0:
                try:
                    sys.stdout.flush()
                except Exception:  # pragma: no cover
                    pass
                os.dup2(_FD_STATE["saved"], 1)
                os.close(_FD_STATE["saved"])
                _FD_STATE["saved"] = -1


@contextlib.contextmanager
def _captured(what: str) -> Iterator[io.StringIO]:
    """Capture a converter's output: Python-level stdout/stderr and native descriptors 1 and 2
    (:mod:`nagkit.runtimes.quiet`; shown with ``-v``); log it at DEBUG level."""
    buf = io.StringIO()
    try:
        with native_stderr_captured(buf), _native_stdout_to_stderr(), contextlib.redirect_stdout(buf), \
                contextlib.redirect_stderr(buf):
            yield buf
    finally:
        text = buf.getvalue().strip()
        if text and log.isEnabledFor(logging.DEBUG):
            log.debug("%s output:\n%s", what, text)


def _tail(text: str, n: int = 1500) -> str:
    text = text.strip()
    if not text:
        return ""
    return "\n--- converter output (tail) ---\n" + (text if len(text) <= n else "..." + text[-n:])


def _brief(e: BaseException, n: int = 400) -> str:
    """``Type: first line of the message`` (converter errors can quote whole graphs)."""
    lines = [ln for ln in str(e).splitlines() if ln.strip()]
    first = lines[0].strip() if lines else ""
    if len(first) > n:
        first = first[:n] + "..."
    more = " [...]" if len(lines) > 1 else ""
    return f"{type(e).__name__}: {first}{more}"


def _tmp_beside(path: Path, suffix: str) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix, dir=path.parent)
    os.close(fd)
    os.chmod(tmp, 0o666 & ~current_umask())  # mkstemp makes 0600; a model file is as readable as any
    return tmp


class _Conversion:
    """One conversion's temporary files beside its target (the first becomes the target) and
    the converter output captured while it ran."""

    def __init__(self, path: Path, suffixes: tuple[str, ...]):
        self.tmps = [_tmp_beside(path, s) for s in suffixes]
        self.tmp = self.tmps[0]
        self.output = ""

    @contextlib.contextmanager
    def captured(self, what: str) -> Iterator[io.StringIO]:
        with _captured(what) as buf:
            try:
                yield buf
            finally:
                self.output += buf.getvalue()


@contextlib.contextmanager
def _converting(module, example, path: Path, suffixes: tuple[str, ...], failed: str, hint: str
                ) -> Iterator[_Conversion]:
    """Write ``path`` through temporary files: on success the first replaces ``path``; an error
    other than nagkit's own becomes a :class:`ConversionError` ("``failed`` of <module> (input
    <shape>) failed: ...", with the converter's output tail); the temporaries are removed."""
    job = _Conversion(path, suffixes)
    try:
        yield job
        os.replace(job.tmp, path)
    except NagkitError:
        raise
    except Exception as e:
        raise ConversionError(f"{failed} of {type(module).__name__} (input {tuple(example.shape)}) failed: "
                              f"{_brief(e)}{_tail(job.output)}", hint=hint) from e
    finally:
        for f in job.tmps:
            if os.path.exists(f):
                os.unlink(f)


def _save_onnx(tmp: str, metadata: Mapping[str, Any] | None, full_check: bool) -> None:
    """Write ``metadata`` into the ONNX file ``tmp`` (if any) and run onnx.checker on it."""
    import onnx

    model = onnx.load(tmp)
    if metadata is not None:
        set_onnx_metadata(model, metadata)
        onnx.save(model, tmp)
    onnx.checker.check_model(model, full_check=full_check)


def to_onnx(module, example, path: str | os.PathLike, opset: int = ONNX_OPSET, *,
            names: tuple[str, str] = ("input", "output"), metadata: Mapping[str, Any] | None = None) -> Path:
    """Export with torch.onnx (TorchScript exporter, fixed input shape) and run onnx.checker.

    ``names``: the input and output tensor names; ``metadata``: JSON written into the model's
    metadata_props (:mod:`nagkit.runtimes.metadata`)."""
    import torch

    if opset < 17:
        raise ConversionError(f"ONNX opset {opset} is too old; nagkit exports opset >= 17")
    path = Path(path)
    module = module.eval()
    with _converting(module, example, path, (".onnx",), "ONNX export",
                     "try --format tflite, or rerun with NAGKIT_DEBUG=1 for the traceback") as job:
        with job.captured("torch.onnx"), torch.no_grad():
            torch.onnx.export(module, (example,), job.tmp, dynamo=False, opset_version=opset,
                              input_names=[names[0]], output_names=[names[1]])
        _save_onnx(job.tmp, metadata, full_check=True)
    return path


def to_tflite(module, example, path: str | os.PathLike, *, names: tuple[str, str] | None = None,
              metadata: Mapping[str, Any] | None = None) -> Path:
    """Convert with litert-torch (fp32, input layout NCHW as in PyTorch).

    ``names``: the input and output names, in the signature (``serving_default``) and on the
    tensors; ``metadata``: JSON written into the flatbuffer (:mod:`nagkit.runtimes.metadata`)."""
    # TensorFlow's native INFO lines on stderr are noise for users; -vv (DEBUG) keeps them.
    if not log.isEnabledFor(logging.DEBUG):
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    try:
        with native_stderr_captured():  # absl, oneDNN and torch's pytree warning at import (-v shows them)
            import litert_torch
    except ImportError as e:  # pragma: no cover - depends on the install
        raise ConversionError(
            "TFLite export needs litert-torch, which is not installed here",
            hint="pip install litert-torch (make setup installs it), or use --format onnx",
        ) from e
    path = Path(path)
    module = module.eval()
    with _converting(module, example, path, (".tflite",), "TFLite conversion",
                     "try --format onnx, or rerun with NAGKIT_DEBUG=1 for the traceback") as job:
        with job.captured("litert-torch"):
            folded = folded_for_conversion(module)  # the same file's graph and weights, faster (decisions 34)
            if names is None:
                edge = litert_torch.convert(folded, (example,))
            else:  # a keyword input and a dict output name the signature's tensors
                edge = litert_torch.convert(_named(folded, names[1]), sample_kwargs={names[0]: example})
            edge.export(job.tmp)
        _finish_tflite(job.tmp, names, metadata)
    return path


def _finish_tflite(tmp: str, names: tuple[str, str] | None, metadata: Mapping[str, Any] | None) -> None:
    """Refuse an empty file; name the tensors and write ``metadata`` (if given)."""
    if os.path.getsize(tmp) == 0:
        raise RuntimeError("litert-torch wrote an empty file")
    if names is not None or metadata is not None:
        set_tflite_io(tmp, names, metadata)


def to_tflite_int8(module, example, calibration, path: str | os.PathLike, *, names: tuple[str, str] | None = None,
                   metadata: Mapping[str, Any] | None = None) -> Path:
    """Static post-training full-integer quantization with litert-torch's PT2E quantizer.

    Weights int8 per output channel (symmetric), activations int8 per tensor (affine, ranges
    from a histogram observer), the input and output tensors int8 too (their scale and zero
    point are in the file: :class:`~nagkit.runtimes.litert.LiteRTModel` quantizes and
    dequantizes). ``calibration``: the representative inputs (N x C x H x W float32, already
    preprocessed), run one at a time through the observed model; ``example``: one input of the
    exported shape. Decisions 23 says what stays float."""
    import numpy as np
    import torch

    if calibration is None or len(calibration) == 0:
        from nagkit.errors import BadInputError

        raise BadInputError("int8 quantization needs representative images (calibration data); none were given")
    if not log.isEnabledFor(logging.DEBUG):
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    path = Path(path)
    with _converting(module, example, path, (".tflite",), "int8 TFLite conversion",
                     "export fp32 (--export tflite), or rerun with NAGKIT_DEBUG=1 for the traceback") as job:
        with job.captured("litert-torch (PT2E int8)"):
            import litert_torch
            from litert_torch.quantize.pt2e_quantizer import PT2EQuantizer, get_symmetric_quantization_config
            from litert_torch.quantize.quant_config import QuantConfig
            from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

            quantizer = PT2EQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True))
            name = (names or IO_NAMES)[0]
            wrapped = _named(module.eval(), (names or IO_NAMES)[1])
            observed = prepare_pt2e(torch.export.export(wrapped, (), {name: example}).module(), quantizer)
            with torch.no_grad():
                for x in np.asarray(calibration, dtype=np.float32):
                    observed(**{name: torch.from_numpy(x[None]).contiguous()})
            quantized = convert_pt2e(observed, fold_quantize=False)
            edge = litert_torch.convert(quantized, sample_kwargs={name: example},
                                        quant_config=QuantConfig(pt2e_quantizer=quantizer))
            edge.export(job.tmp)
        _finish_tflite(job.tmp, names, metadata)
    return path


def to_tflite_fp16(module, example, path: str | os.PathLike, *, names: tuple[str, str] | None = None,
                   metadata: Mapping[str, Any] | None = None) -> Path:
    """Float16 weights (decisions 27): litert-torch's conversion with its float16 recipe
    (ai-edge-quantizer's float casting, weight-only). Every convolution, depthwise convolution
    and fully-connected weight is stored float16 behind a DEQUANTIZE op, which a runtime turns
    into float32 at load (or feeds a float16 GPU/NPU as is); biases, activations, the input and
    the output stay float32. The file is half the fp32 size and computes what PyTorch computes
    with the BatchNorm-folded weights rounded to float16
    (:func:`nagkit.export.parity.float16_reference`)."""
    if not log.isEnabledFor(logging.DEBUG):
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    path = Path(path)
    module = module.eval()
    with _converting(module, example, path, (".tflite",), "float16 TFLite conversion",
                     "export fp32 (--export tflite), or rerun with NAGKIT_DEBUG=1 for the traceback") as job:
        with job.captured("litert-torch (float16 weights)"):
            import litert_torch
            from litert_torch.generative.quantize.quant_recipes import full_fp16_recipe

            name, output = names or IO_NAMES
            edge = litert_torch.convert(_named(folded_for_conversion(module), output), sample_kwargs={name: example},
                                        quant_config=full_fp16_recipe())
            edge.export(job.tmp)
        _finish_tflite(job.tmp, names, metadata)
    return path


def to_onnx_int8(module, example, calibration, path: str | os.PathLike, *, names: tuple[str, str] = ("input", "output"),
                 metadata: Mapping[str, Any] | None = None) -> Path:
    """Static post-training quantization with ``onnxruntime.quantization.quantize_static``: the
    fp32 export (:func:`to_onnx`) in QDQ form, weights int8 symmetric per output channel,
    activations int8 per tensor (MinMax ranges over ``calibration``, fed one image at a time).
    Input and output stay float32 (QuantizeLinear/DequantizeLinear inside the graph)."""
    import numpy as np
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    path = Path(path)

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.images = iter(np.asarray(calibration, dtype=np.float32))

        def get_next(self):
            x = next(self.images, None)
            return None if x is None else {names[0]: x[None]}

    with _converting(module, example, path, (".onnx", ".fp32.onnx"), "int8 ONNX quantization",
                     "export fp32 (--export onnx), or rerun with NAGKIT_DEBUG=1 for the traceback") as job:
        tmp, fp32 = job.tmps
        to_onnx(module, example, fp32, names=names)
        with job.captured("onnxruntime.quantization"):
            quantize_static(fp32, tmp, Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                            activation_type=QuantType.QInt8, weight_type=QuantType.QInt8)
        _save_onnx(tmp, metadata, full_check=False)
    return path


def _named(module, output: str):
    """``module`` taking one keyword input and returning ``{output: module(x)}`` (litert-torch
    names a signature's tensors after the keywords and the output dict's keys)."""
    import torch

    class Named(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.module = module

        def forward(self, **inputs):
            (x,) = inputs.values()
            return {output: self.module(x)}

    return Named().eval()


def check_precision_name(precision: str, fmt: str | None = None) -> str:
    """``precision`` if nagkit knows it (and converts ``fmt`` at it), else a clear error (exit 2):
    :class:`~nagkit.registry.UnknownNameError` for a name it does not know."""
    from nagkit.errors import BadInputError, UnknownNameError

    if precision not in PRECISIONS:
        raise UnknownNameError("precision", precision, PRECISIONS,
                               hint="fp32 is the default; int8 is full-integer, fp16 float16 weights "
                                    "(e.g. --precision int8)")
    if fmt is not None and precision not in FORMAT_PRECISIONS.get(fmt, ("fp32",)):
        valid = FORMAT_PRECISIONS.get(fmt, ("fp32",))
        raise BadInputError(f"precision {precision!r} is not built for {fmt} models; {fmt} precisions: "
                            f"{', '.join(valid)} (float16 weights are a TFLite form here: decisions 27)",
                            hint="use a tflite device or export (tflite-fp16), or another precision")
    return precision


def convert_module(module, input_shape: tuple[int, ...], fmt: str, path: str | os.PathLike, *,
                   names: tuple[str, str] | None = None, precision: str = "fp32") -> Path:
    """Convert ``module`` to ``fmt`` (``tflite`` or ``onnx``) at ``path``, with a seeded
    standard-normal example input of ``input_shape`` (NCHW); ``names``: the input and output
    tensor names (:data:`IO_NAMES` for whole networks, as exported; None: the converter's).
    ``precision="int8"``: quantized as an int8 bundle is (:func:`to_tflite_int8`,
    :func:`to_onnx_int8`), with :data:`LATENCY_CALIBRATION_INPUTS` seeded normal inputs as the
    representative data: a model for timing, whose graph is the bundle's (only the scales differ).
    ``precision="fp16"`` (tflite only): float16 weights, as an fp16 bundle is (:func:`to_tflite_fp16`)."""
    import torch

    from nagkit.errors import BadInputError

    if fmt not in ("tflite", "onnx"):
        raise BadInputError(f"cannot convert to {fmt!r}; valid: tflite, onnx")
    check_precision_name(precision, fmt)
    gen = torch.Generator().manual_seed(0)
    example = torch.randn(*input_shape, generator=gen)
    if precision == "int8":
        cal = torch.randn(LATENCY_CALIBRATION_INPUTS, *input_shape[1:], generator=gen).numpy()
        if fmt == "tflite":
            return to_tflite_int8(module, example, cal, Path(path), names=names)
        return to_onnx_int8(module, example, cal, Path(path), **({"names": names} if names else {}))
    if precision == "fp16":
        return to_tflite_fp16(module, example, Path(path), names=names)
    if fmt == "tflite":
        return to_tflite(module, example, Path(path), names=names)
    return to_onnx(module, example, Path(path), **({"names": names} if names else {}))
