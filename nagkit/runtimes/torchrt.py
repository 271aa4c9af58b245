"""torch as a runtime: the TorchScript timing runner (scoped thread counts:
:func:`nagkit.runtimes.threads.torch_threads`)."""

from __future__ import annotations

from nagkit.runtimes.base import InputError, LoadError, random_input


class TorchRunner:
    """Times TorchScript files on the CPU. It owns its (worker) process, so it sets the
    process's thread counts once, before any work."""

    name, package, delegate = "torch", "torch", None

    def __init__(self, threads: int):
        import torch

        torch.set_num_threads(threads)
        try:
            torch.set_num_interop_threads(1)
        except RuntimeError:  # already set (cannot happen in a fresh worker, but harmless)
            pass
        self._torch = torch
        self.threads = threads

    def runtime_threads(self) -> int:
        """What torch itself reports, not just what was asked."""
        return self._torch.get_num_threads()

    def prepare(self, path: str, input_shape, rng):
        torch = self._torch
        if input_shape is None:
            raise InputError("torch models need input_shape")
        import warnings

        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", FutureWarning)
                model = torch.jit.load(path, map_location="cpu")
            model.eval()
        except Exception as e:
            raise LoadError(f"{type(e).__name__}: {e}") from e
        x = torch.from_numpy(random_input(rng, [int(d) for d in input_shape], "float32"))

        def once():
            with torch.inference_mode():
                model(x)

        return once, [list(x.shape)]
