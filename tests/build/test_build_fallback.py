"""`nagkit build` end to end on the CPU, and the fallback to the next candidate when the
device measures one over budget: re-aimed by the measured/predicted ratio when that is possible,
else the next of the first ranking.

The builds use the default workspace's small fmnist networks (its supernet weights passed as
--weights, so nothing is recalibrated, and --accuracy never): every model is really exported and
really run on this CPU, but the latency the device reports comes from the test double, so the
outcome does not depend on how fast this CPU is against the table. The bundles are ONNX, run by
ONNX Runtime: the fallback does not depend on the format, and an ONNX export takes a second where
a TFLite conversion takes ten (the TFLite builds are tested in test_build_manifest.py,
test_build_budget_rules.py, the demo, the wheel and the README's API example)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from nagkit.devices.base import LatencyStats, MeasureConfig
from nagkit.resources import WORKSPACES

WEIGHTS = WORKSPACES / "fmnist" / "supernet" / "supernet.pt"
# A low budget: the generator's candidates are small networks, quick to convert and to run. The
# fastest network of the space on the table is 0.16 ms, so a re-aim by 2x stays above it.
BUDGET = 0.8
_QUICK = MeasureConfig(warmup_runs=2, warmup_s=0.01, min_runs=5, min_time_s=0.03, max_time_s=0.3, max_runs=300)


class TableTimesDevice:
    """TEST DOUBLE (named as such): the real CPU device (ONNX Runtime, 1 thread) runs each model (a
    short run, whatever the build asks: its timing is not used); the median it reports is
    ``factors[i]`` x the workspace's table prediction for the arch the model file carries (i: the
    model's turn; the last factor repeats), plus ``extra_ms[i]``."""

    def __init__(self, factors=(1.0,), extra_ms=(0.0,), workspace: str = "fmnist"):
        from nagkit.app.workspace import load_workspace
        from nagkit.devices.registry import get_device

        self.real = get_device("cpu:runtime=onnxruntime")
        self.spec, self.kind, self.model_format = "cpu(test-double:table-times)", "cpu", self.real.model_format
        self.factors, self.extra_ms, self.ws = list(factors), list(extra_ms), load_workspace(workspace)
        self.calls = 0

    def info(self):
        return self.real.info()

    def runtime_info(self):
        return self.real.runtime_info()

    def measure(self, model, input_shape, cfg=None) -> LatencyStats:
        from nagkit.runtimes.metadata import read_metadata

        st = self.real.measure(model, input_shape, _QUICK)  # a short real run: the median is replaced below
        i = min(self.calls, len(self.factors) - 1)
        extra = self.extra_ms[min(self.calls, len(self.extra_ms) - 1)]
        self.calls += 1
        arch = self.ws.space.parse_arch(read_metadata(model)["arch"])
        ms = self.factors[i] * float(self.ws.latency_table.predict(self.ws.space, arch)) + extra
        return replace(st, median_ms=ms, mean_ms=ms)

    def close(self):
        self.real.close()


def _build(budget: float, dev, out, max_tries: int = 3):
    from nagkit.app.build import BuildOptions, build

    try:
        return build(budget, workspace="fmnist", device=dev,
                     options=BuildOptions(formats="onnx", out=out, weights=str(WEIGHTS), accuracy="never",
                                          max_tries=max_tries))
    finally:
        dev.close()


@pytest.mark.slow
def test_over_budget_candidate_is_replaced_by_the_next(tmp_path):
    """A first measurement far over the budget (an outlier: re-aiming would go below the
    fastest network) is followed by the next candidate of the same ranking."""
    from nagkit.export.bundle import read_bundle

    budget = BUDGET
    dev = TableTimesDevice(extra_ms=(1000.0, 0.0))
    res = _build(budget, dev, tmp_path / "b")
    assert dev.calls == 2 and res.re_aims == []
    assert [a.accepted for a in res.attempts] == [False, True]
    assert "> budget" in res.attempts[0].note
    assert res.arch == res.attempts[1].arch != res.attempts[0].arch
    assert res.measured["median_ms"] <= budget
    with read_bundle(tmp_path / "b") as b:
        m = b.manifest
        assert m["arch"]["canonical"] == res.arch
        assert m["latency"]["measured"]["median_ms"] <= budget
        assert m["weights"]["sha256"] == res.weights and m["build"]["re_aims"] == []
        assert set(b.models) == {"onnx"}
    assert (tmp_path / "b.zip").is_file()


@pytest.mark.slow
def test_all_candidates_over_budget_fails_and_leaves_nothing(tmp_path):
    from nagkit.errors import CheckFailedError

    dev = TableTimesDevice(extra_ms=(1000.0,))
    with pytest.raises(CheckFailedError, match="none of the 1 candidates tried") as e:
        _build(BUDGET, dev, tmp_path / "b", max_tries=1)
    assert "nagkit profile --device" in e.value.hint
    assert sorted(p.name for p in tmp_path.iterdir()) == []


@pytest.mark.slow
def test_a_device_slower_than_its_table_gets_a_re_aimed_candidate(tmp_path):
    from nagkit.app.build import AIM_MARGIN
    from nagkit.export.bundle import read_bundle

    budget, factor = BUDGET, 2.0  # the first candidate (predicted above half the budget) measures over it
    dev = TableTimesDevice(factors=(factor,))
    res = _build(budget, dev, tmp_path / "b")
    assert [a.accepted for a in res.attempts] == [False, True]
    first = res.attempts[0]
    assert first.predicted_ms <= budget < first.measured_ms == pytest.approx(factor * first.predicted_ms)
    (aim,) = res.re_aims
    assert aim["ratio"] == pytest.approx(factor) and aim["aim_ms"] == pytest.approx(budget / factor * AIM_MARGIN)
    assert res.predicted_ms <= aim["aim_ms"] and res.measured["median_ms"] <= budget
    with read_bundle(tmp_path / "b") as b:
        m = b.manifest
        assert m["arch"]["canonical"] == res.arch
        assert m["build"]["re_aims"] == res.re_aims
        assert m["build"]["generated_for_ms"] == pytest.approx(aim["aim_ms"])
        assert any(n.startswith("re-aimed: this device measured 2.00x") for n in m["notes"])
