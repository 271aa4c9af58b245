"""Shared fixtures. Markers (slow, gpu, adb, shared_data) are registered in pyproject.toml; gpu
tests are skipped in one place here when no CUDA device is present, and tests marked
``shared_data`` (tests/shared_data.py) when the data outside the repository is missing: skipped
with the path and the setting that provides it, or failed under ``NAGKIT_REQUIRE_SHARED=1`` (CI)."""

from __future__ import annotations

import os
import random
from pathlib import Path

import numpy as np
import pytest

from tests import shared_data
from tests.shared_data import BENCHMARK_MODEL, GOLDEN, NOTE10, SHARED  # noqa: F401 - tests import them from here

ROOT = Path(__file__).resolve().parents[1]


def pytest_configure(config):
    """On an xdist worker (`make test` runs two), torch, OpenMP and the processes a test starts
    use one intra-op thread: two workers of two threads each on the 2-core CI machine would
    oversubscribe it (OpenMP's spinning threads then slow every test). For the same reason a
    profile converts with one process unless a test asks for more (``NAGKIT_JOBS=1``: in the
    test's own process, which has torch and litert-torch imported, instead of two new workers
    that import them again)."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "NAGKIT_JOBS"):
            os.environ[var] = "1"
        import sys

        if "torch" in sys.modules:
            sys.modules["torch"].set_num_threads(1)
    # xdist's loadfile hands out files in the order of COSTLIEST_FIRST (below), not its own order
    # by test count, which put the costly files of few tests last and left one worker alone at the end
    if getattr(config.option, "loadscopereorder", None):
        config.option.loadscopereorder = False


#: The suite's costliest files by CPU time (benchmarks/suite/results), run first so that the two
#: workers of `make test` end together on the many cheap files; the rest keep pytest's order. A
#: file missing here only runs later; the order decides no outcome (tests never depend on it).
COSTLIEST_FIRST = (
    "tests/build/test_build_int8.py", "tests/runtimes/test_fold.py", "tests/test_wheel.py", "tests/test_no_shared.py",
    "tests/latency/test_profile_literal.py", "tests/test_api.py", "tests/latency/test_precision.py",
    "tests/latency/test_profile_adb.py", "tests/app/test_finetune.py", "tests/build/test_build_limits.py",
    "tests/build/test_build_manifest.py", "tests/data/test_supernet_acc.py", "tests/latency/test_profile.py",
    "tests/supernet/test_train.py", "tests/latency/test_ships.py", "tests/space/test_resources.py",
    "tests/cli/test_export_cli.py", "tests/build/test_build_precision.py", "tests/export/test_export_fp16.py",
    "tests/test_workspace.py", "tests/build/test_build_budget_rules.py",
)


def _costliest_first(items: list) -> None:
    rank = {f: i for i, f in enumerate(COSTLIEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))  # stable: the rest keep their order


def pytest_collection_modifyitems(config, items):
    _costliest_first(items)
    try:
        import torch

        has_cuda = torch.cuda.is_available()
    except Exception:  # pragma: no cover
        has_cuda = False
    skip_gpu = pytest.mark.skip(reason="needs a CUDA GPU (run on the lent GPU machine)")
    for item in items:
        if "gpu" in item.keywords and not has_cuda:
            item.add_marker(skip_gpu)
        absent = _absent_shared(item)
        if absent and not shared_data.required():
            item.add_marker(pytest.mark.skip(reason=shared_data.reason(absent)))


def _absent_shared(item) -> list[str]:
    paths = tuple(p for m in item.iter_markers(shared_data.MARKER) for p in m.args)
    return shared_data.missing(paths)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """Under NAGKIT_REQUIRE_SHARED=1 (.ci/run) a test whose shared data is missing fails (an
    error in its set-up, before any fixture reads the data) instead of skipping."""
    if shared_data.required() and (absent := _absent_shared(item)):
        pytest.fail(f"{shared_data.REQUIRE_ENV}=1 and this test " + shared_data.reason(absent), pytrace=False)


def pytest_terminal_summary(terminalreporter):
    """Name every test skipped for missing shared data, and how to provide it."""
    skipped = [r for r in terminalreporter.stats.get("skipped", [])
               if isinstance(r.longrepr, tuple) and shared_data.SKIP_PREFIX in str(r.longrepr[2])]
    if not skipped:
        return
    terminalreporter.section(f"{len(skipped)} tests skipped: shared data missing")
    by_reason: dict[str, list[str]] = {}
    for r in skipped:
        by_reason.setdefault(r.longrepr[2].removeprefix("Skipped: "), []).append(r.nodeid)
    for why, ids in sorted(by_reason.items()):
        terminalreporter.line(why)
        for nodeid in sorted(ids):
            terminalreporter.line(f"  {nodeid}")


@pytest.fixture(autouse=True)
def _restore_rng_state():
    """Tests may seed global RNGs; restore them so test order never matters."""
    import torch

    py, npst, th = random.getstate(), np.random.get_state(), torch.get_rng_state()
    yield
    random.setstate(py)
    np.random.set_state(npst)
    torch.set_rng_state(th)


@pytest.fixture(autouse=True)
def _user_home(tmp_path_factory, monkeypatch):
    """Each test's user workspaces ($NAGKIT_HOME) in a folder of its own, never ~/.local/share."""
    monkeypatch.setenv("NAGKIT_HOME", str(tmp_path_factory.mktemp("nagkit-home")))


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


@pytest.fixture(scope="session")
def tiny_export(tmp_path_factory):
    """(space, arch, net, ExportResult): a seeded random-init StaticNet at 32x32, ONNX + TFLite
    (export, runtimes and bundle tests share it; converted once per session).

    Exported with extra given parity inputs, so both the seeded and the given-input checks ran, and
    with the model metadata bundles carry (tensors named image/logits).
    """
    from nagkit.export.exporter import export_model
    from nagkit.export.manifest import model_metadata
    from nagkit.export.parity import seeded_inputs
    from nagkit.space import SearchSpace
    from nagkit.supernet import StaticNet

    # Two stages (ReLU without SE, h-swish with SE), 1-2 blocks each: every layer kind of
    # MobileNetV3, but few ops, so litert-torch converts it quickly.
    sp = SearchSpace(name="tiny-export", width_mult=0.5, base_stage_width=(16, 16, 24, 40, 240, 320),
                     stage_strides=(2, 2), stage_acts=("relu", "h_swish"), stage_se=(False, True),
                     depth_list=(1, 2), resolutions=(32,), n_classes=10, dropout=0.0,
                     labels=tuple(f"class{i}" for i in range(10)))
    arch = sp.parse_arch("r32-k5e4-k3e6.k7e3")
    net = StaticNet.from_arch(sp, arch, seed=0)
    extra = seeded_inputs((3, 3, 32, 32), seed=99)
    res = export_model(net, (1, 3, 32, 32), "both", tmp_path_factory.mktemp("tiny-export") / "out", seed=4,
                       parity_inputs=extra, metadata=model_metadata(sp, arch, (1, 3, 32, 32)))
    return sp, arch, net, res
