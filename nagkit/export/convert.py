"""Convert a PyTorch module to ONNX (torch.onnx) or TFLite (litert-torch).

Both take an ``nn.Module`` in eval mode and an example input; both write atomically.
litert-torch is imported only here, on demand, so CUDA-only code never needs it.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import tempfile
from pathlib import Path

from nagkit.errors import NagkitError

log = logging.getLogger(__name__)

ONNX_OPSET = 17


class ConversionError(NagkitError):
    """A converter failed on a model."""


@contextlib.contextmanager
def _quiet():
    """Converters print a lot to stdout; results must stay clean, so send it to stderr."""
    import sys

    with contextlib.redirect_stdout(sys.stderr):
        yield


def to_onnx(module, example, path: str | os.PathLike, opset: int = ONNX_OPSET) -> Path:
    import onnx
    import torch

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    module = module.eval()
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".onnx", dir=path.parent)
    os.close(fd)
    try:
        with _quiet(), torch.no_grad():
            kwargs = dict(opset_version=opset, input_names=["input"], output_names=["output"])
            try:
                torch.onnx.export(module, (example,), tmp, dynamo=False, **kwargs)
            except TypeError:  # older torch without the dynamo flag
                torch.onnx.export(module, (example,), tmp, **kwargs)
        model = onnx.load(tmp)
        onnx.checker.check_model(model, full_check=True)
        os.replace(tmp, path)
    except NagkitError:
        raise
    except Exception as e:
        raise ConversionError(f"ONNX export of {type(module).__name__} failed: {e}") from e
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def to_tflite(module, example, path: str | os.PathLike) -> Path:
    try:
        import litert_torch
    except ImportError as e:  # pragma: no cover - depends on the install
        raise ConversionError(
            "TFLite export needs litert-torch, which is not installed here",
            hint="pip install litert-torch (make setup installs it)",
        ) from e
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    module = module.eval()
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tflite", dir=path.parent)
    os.close(fd)
    try:
        with _quiet(), contextlib.redirect_stderr(io.StringIO()) as err:
            edge = litert_torch.convert(module, (example,))
            edge.export(tmp)
        os.replace(tmp, path)
    except Exception as e:
        raise ConversionError(f"TFLite conversion of {type(module).__name__} failed: {e}") from e
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path
