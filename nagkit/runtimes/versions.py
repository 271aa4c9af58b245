"""Which runtimes and converters are installed, and their versions (without importing them).

One definition for the device listing (``nagkit devices``), the CPU worker's hello, model
descriptions, bundle manifests and the block cache's key.
"""

from __future__ import annotations

from typing import Any

# runtime -> (import name, distribution) candidates, preferred first
RUNTIME_PACKAGES: dict[str, tuple[tuple[str, str], ...]] = {
    "litert": (("ai_edge_litert", "ai-edge-litert"), ("tflite_runtime", "tflite-runtime")),
    "onnxruntime": (("onnxruntime", "onnxruntime"),),
    "torch": (("torch", "torch"),),
}
CONVERTERS = ("torch", "onnx", "litert-torch")
FORMAT_CONVERTERS = {"tflite": ("litert-torch",), "onnx": ("onnx",), "torch": ()}


def package_version(dist: str) -> str | None:
    """The installed version of a distribution, or None."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return None


def runtime_status() -> dict[str, dict[str, Any]]:
    """Every CPU runtime: ``{"available", "package", "version"}`` (the package to install when
    it is missing)."""
    import importlib.util

    out: dict[str, dict[str, Any]] = {}
    for name, candidates in RUNTIME_PACKAGES.items():
        row: dict[str, Any] = {"available": False, "package": candidates[0][1], "version": None}
        for module, dist in candidates:
            if importlib.util.find_spec(module) is not None:
                row = {"available": True, "package": dist, "version": package_version(dist)}
                break
        out[name] = row
    return out


def runtime_version(runtime: str) -> str | None:
    """Installed version of ``litert``, ``onnxruntime`` or ``torch`` (None if not installed)."""
    return runtime_status()[runtime]["version"]


def runtime_versions() -> dict[str, str | None]:
    """The versions of the two runtimes exported models run in (as bundles record them)."""
    status = runtime_status()
    return {"litert": status["litert"]["version"], "onnxruntime": status["onnxruntime"]["version"]}


def converter_versions() -> dict[str, str | None]:
    """Versions of torch, onnx and litert-torch (None where one is not installed)."""
    return {dist: package_version(dist) for dist in CONVERTERS}


def format_versions(fmt: str) -> dict[str, str]:
    """The tools that produce ``fmt`` files (``tflite``, ``onnx``, ``torch``): torch without its
    local build tag, the converter (``"missing"`` when absent) and, for ONNX, the opset. Cached
    conversions are keyed by these."""
    from nagkit.runtimes.convert import ONNX_OPSET

    v = converter_versions()
    out = {"torch": (v["torch"] or "missing").split("+")[0]}
    out.update({d: v[d] or "missing" for d in FORMAT_CONVERTERS[fmt]})
    if fmt == "onnx":
        out["opset"] = str(ONNX_OPSET)
    return out
