"""Thread counts: the default, the environment of a timing process, and scoped torch threads.

Imports nothing heavy (no numpy), so the CPU worker can use it before any runtime loads.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

DEFAULT_THREADS = 1  # the cpu device's default, and what parity checks run with
MAX_THREADS = 256  # more is a typo or hostile: threads=100000 stalls a worker for minutes (issue 13 D12)

THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "TF_NUM_INTRAOP_THREADS",
               "TF_NUM_INTEROP_THREADS", "NUMEXPR_NUM_THREADS", "VECLIB_MAXIMUM_THREADS")


def thread_env(threads: int) -> dict[str, str]:
    """Environment variables that fix the size of every thread pool a runtime might open."""
    env = {k: str(threads) for k in THREAD_VARS}
    env["TF_NUM_INTEROP_THREADS"] = "1"
    return env


@contextlib.contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """Run the block with ``n`` intra-op torch threads (None: leave them), then restore the
    previous count, so a caller's process keeps its setting."""
    import torch

    if not n:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(int(n))
    try:
        yield
    finally:
        torch.set_num_threads(before)
