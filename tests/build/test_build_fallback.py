"""`nagkit build` end to end on the CPU, and the fallback to the next candidate when the
device measures the first one over budget: re-aimed by the measured/predicted ratio when that
is possible, else the next of the first ranking."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from nagkit.devices.base import LatencyStats


class OverBudgetFirstDevice:
    """TEST DOUBLE (named as such): the real CPU device (LiteRT, 1 thread), except that the
    first model it measures is reported ``extra_ms`` slower, forcing an over-budget result."""

    def __init__(self, extra_ms: float):
        from nagkit.devices.registry import get_device

        self.real = get_device("cpu")
        self.spec, self.kind, self.model_format = "cpu(test-double:first-over-budget)", "cpu", self.real.model_format
        self.extra_ms = extra_ms
        self.calls = 0

    def info(self):
        return self.real.info()

    def runtime_info(self):
        return self.real.runtime_info()

    def measure(self, model, input_shape, cfg=None) -> LatencyStats:
        st = self.real.measure(model, input_shape, cfg)
        self.calls += 1
        if self.calls == 1:
            return replace(st, median_ms=st.median_ms + self.extra_ms, mean_ms=st.mean_ms + self.extra_ms)
        return st

    def close(self):
        self.real.close()


@pytest.mark.slow
def test_over_budget_candidate_is_replaced_by_the_next(tmp_path):
    from nagkit.app.build import BuildOptions, build
    from nagkit.export.bundle import read_bundle

    budget = 20.0
    dev = OverBudgetFirstDevice(extra_ms=1000.0)
    try:
        res = build(budget, workspace="ofa-note10", device=dev,
                    options=BuildOptions(formats="tflite", out=tmp_path / "b", random_init=True, max_tries=3))
    finally:
        dev.close()
    assert dev.calls == 2
    assert [a.accepted for a in res.attempts] == [False, True]
    assert "> budget" in res.attempts[0].note
    assert res.arch == res.attempts[1].arch != res.attempts[0].arch
    assert res.measured["median_ms"] <= budget
    with read_bundle(tmp_path / "b") as b:
        m = b.manifest
        assert m["arch"]["canonical"] == res.arch
        assert m["latency"]["measured"]["median_ms"] <= budget
        assert m["weights"]["sha256"] == "random-init" and m["accuracy"] is None
        assert set(b.models) == {"tflite"}
    assert (tmp_path / "b.zip").is_file()


@pytest.mark.slow
def test_all_candidates_over_budget_fails_and_leaves_nothing(tmp_path):
    from nagkit.app.build import BuildOptions, build
    from nagkit.errors import CheckFailedError

    class AlwaysOver(OverBudgetFirstDevice):
        def measure(self, model, input_shape, cfg=None):
            st = self.real.measure(model, input_shape, cfg)
            self.calls += 1
            return replace(st, median_ms=st.median_ms + 1000.0)

    dev = AlwaysOver(0)
    try:
        with pytest.raises(CheckFailedError, match="none of the 1 candidates tried"):
            build(20.0, workspace="ofa-note10", device=dev,
                  options=BuildOptions(formats="tflite", out=tmp_path / "b", random_init=True, max_tries=1))
    finally:
        dev.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == []


class SlowerThanTheTable(OverBudgetFirstDevice):
    """TEST DOUBLE (named as such): a device ``factor`` times slower than the workspace's table
    says. Each model is really run by LiteRT on this CPU; the median reported is ``factor`` x the
    table's prediction for the arch the model file carries (so the test does not hang on noise)."""

    def __init__(self, factor: float, workspace: str):
        super().__init__(0.0)
        from nagkit.app.workspace import load_workspace

        self.factor, self.ws = factor, load_workspace(workspace)
        self.spec = "cpu(test-double:slower-than-table)"

    def measure(self, model, input_shape, cfg=None) -> LatencyStats:
        from nagkit.runtimes.metadata import read_metadata

        st = self.real.measure(model, input_shape, cfg)
        self.calls += 1
        arch = self.ws.space.parse_arch(read_metadata(model)["arch"])
        ms = self.factor * float(self.ws.latency_table.predict(self.ws.space, arch))
        return replace(st, median_ms=ms, mean_ms=ms)


@pytest.mark.slow
def test_a_device_slower_than_its_table_gets_a_re_aimed_candidate(tmp_path):
    from nagkit.app.build import AIM_MARGIN, BuildOptions, build
    from nagkit.export.bundle import read_bundle

    budget, factor = 20.0, 1.3
    dev = SlowerThanTheTable(factor, "ofa-note10")
    try:
        res = build(budget, workspace="ofa-note10", device=dev,
                    options=BuildOptions(formats="tflite", out=tmp_path / "b", random_init=True, max_tries=3))
    finally:
        dev.close()
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
        assert any(n.startswith("re-aimed: this device measured 1.30x") for n in m["notes"])
