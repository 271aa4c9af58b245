"""Shared fixtures. Markers (slow, gpu, adb) are registered in pyproject.toml; gpu tests are
skipped in one place here when no CUDA device is present."""

from __future__ import annotations

import os
import random
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = (ROOT / ".." / "shared").resolve()
GOLDEN = SHARED / "data" / "ofa-golden"
NOTE10 = SHARED / "data" / "ofa-note10"
BENCHMARK_MODEL = SHARED / "data" / "benchmark_model"


def pytest_collection_modifyitems(config, items):
    try:
        import torch

        has_cuda = torch.cuda.is_available()
    except Exception:  # pragma: no cover
        has_cuda = False
    skip_gpu = pytest.mark.skip(reason="needs a CUDA GPU (run on the lent GPU machine)")
    for item in items:
        if "gpu" in item.keywords and not has_cuda:
            item.add_marker(skip_gpu)


@pytest.fixture(autouse=True)
def _restore_rng_state():
    """Tests may seed global RNGs; restore them so test order never matters."""
    import torch

    py, npst, th = random.getstate(), np.random.get_state(), torch.get_rng_state()
    yield
    random.setstate(py)
    np.random.set_state(npst)
    torch.set_rng_state(th)


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    if not SHARED.is_dir():
        pytest.fail(f"../shared is missing next to the project root ({SHARED})")
    return SHARED


@pytest.fixture
def cli_env(tmp_path):
    """Environment for running `python -m nagkit` in a subprocess."""
    env = dict(os.environ)
    env.pop("NAGKIT_DEBUG", None)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["HOME"] = str(tmp_path / "home")
    (tmp_path / "home").mkdir(exist_ok=True)
    return env


@pytest.fixture
def tiny_space():
    """A small 3-channel space at 32x32 for fast tests."""
    from nagkit.space import SearchSpace

    return SearchSpace(
        name="tiny", width_mult=0.5, base_stage_width=(16, 16, 24, 40, 80, 112, 160, 240, 320),
        resolutions=(32, 40), n_classes=10, dropout=0.0,
    )


@pytest.fixture
def one_thread():
    """torch with 1 intra-op thread for the test (restored after): faster and steadier on the
    shared 2-core CI machine. Use with ``pytestmark = pytest.mark.usefixtures("one_thread")``."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
