"""The measurement loop's stopping rules, driven deterministically by a fake clock and a
scripted inference (test doubles: ``FakeClock`` and ``ScriptedInference``)."""

from __future__ import annotations

import itertools
import logging

import numpy as np
import pytest

from nagkit.devices.base import MeasureConfig
from nagkit.devices.measure import measure_callable, rel_iqr_sorted, run_loop, validate_config, wall_timed
from nagkit.errors import BadInputError, DeviceError


class FakeClock:
    """Test double for time.perf_counter: time moves only when ScriptedInference runs."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


class ScriptedInference:
    """Test double for "run one inference": each call takes the next scripted duration (ms),
    advancing the fake clock by exactly that much."""

    def __init__(self, clock: FakeClock, durations_ms) -> None:
        self.clock = clock
        self._it = iter(durations_ms)
        self.calls = 0

    def __call__(self) -> None:
        self.clock.t += next(self._it) / 1e3
        self.calls += 1


def _loop(durations, cfg):
    clock = FakeClock()
    model = ScriptedInference(clock, durations)
    res = run_loop(wall_timed(model, clock), cfg, clock=clock)
    return res, model


def test_warmup_by_count_when_count_takes_longer():
    cfg = MeasureConfig(warmup_runs=7, warmup_s=0.001, min_runs=3, min_time_s=0.0, max_runs=100, max_time_s=10)
    res, model = _loop(itertools.repeat(1.0), cfg)
    assert res.warmup_runs == 7
    assert model.calls == 7 + len(res.samples_ms)


def test_warmup_by_time_when_time_takes_longer():
    cfg = MeasureConfig(warmup_runs=1, warmup_s=0.0195, min_runs=3, min_time_s=0.0, max_runs=100, max_time_s=10)
    res, _ = _loop(itertools.repeat(1.0), cfg)
    assert res.warmup_runs == 20  # 20 runs of 1 ms reach 19.5 ms
    assert res.warmup_s == pytest.approx(0.020)


def test_warmup_stops_at_the_time_cap():
    cfg = MeasureConfig(warmup_runs=1000, warmup_s=0.0, min_runs=1, min_time_s=0.0, max_runs=10, max_time_s=0.0095)
    res, _ = _loop(itertools.repeat(1.0), cfg)
    assert res.warmup_runs == 10


def test_stable_timing_stops_once_min_time_is_reached():
    cfg = MeasureConfig(warmup_runs=2, warmup_s=0.0, min_runs=10, min_time_s=0.0495, max_runs=1000, max_time_s=10)
    res, _ = _loop(itertools.repeat(1.0), cfg)
    assert res.stop_reason == "converged"
    assert len(res.samples_ms) == 50  # 1 ms each: the 50th run crosses 49.5 ms


def test_stable_timing_stops_once_min_runs_is_reached():
    cfg = MeasureConfig(warmup_runs=0, warmup_s=0.0, min_runs=30, min_time_s=0.001, max_runs=1000, max_time_s=10)
    res, _ = _loop(itertools.repeat(1.0), cfg)
    assert res.converged and len(res.samples_ms) == 30


def test_noisy_timing_runs_to_max_runs_and_warns(caplog):
    cfg = MeasureConfig(warmup_runs=0, warmup_s=0.0, min_runs=5, min_time_s=0.0, max_runs=40, max_time_s=100)
    clock = FakeClock()
    model = ScriptedInference(clock, itertools.cycle([1.0, 2.0]))  # IQR/median ~ 0.67
    with caplog.at_level(logging.WARNING, logger="nagkit.devices.measure"):
        stats = measure_callable(model, cfg, clock=clock, label="jittery")
    assert stats.n == 40 and stats.noisy
    assert any("noisy latency for jittery" in r.getMessage() and "max_runs" in r.getMessage() for r in caplog.records)


def test_noisy_timing_stops_at_max_time():
    cfg = MeasureConfig(warmup_runs=0, warmup_s=0.0, min_runs=5, min_time_s=0.0, max_runs=10_000, max_time_s=0.0995)
    res, _ = _loop(itertools.cycle([1.0, 2.0]), cfg)
    assert res.stop_reason == "max_time"
    assert sum(res.samples_ms) == pytest.approx(100.0)  # 33 pairs (99 ms) + 1 ms: first sum >= 99.5 ms
    assert len(res.samples_ms) == 67
    assert not res.converged


def test_stops_exactly_when_the_spread_first_meets_the_target():
    # 30 jittery runs, then steady ones: the loop must stop at the first n where
    # n >= min_runs, time >= min_time and IQR/median < target (numpy as the oracle).
    rng = np.random.default_rng(0)
    durations = list(1.0 + rng.uniform(0, 0.5, 30)) + [1.0] * 500
    cfg = MeasureConfig(warmup_runs=0, warmup_s=0.0, min_runs=10, min_time_s=0.0, max_runs=1000, max_time_s=100,
                        target_rel_iqr=0.05)
    res, _ = _loop(durations, cfg)
    expected = None
    for n in range(1, len(durations) + 1):
        q25, q50, q75 = np.percentile(durations[:n], [25, 50, 75])
        if n >= cfg.min_runs and (q75 - q25) / q50 < cfg.target_rel_iqr:
            expected = n
            break
    assert expected is not None and expected > 30
    assert res.converged and len(res.samples_ms) == expected
    assert res.samples_ms == pytest.approx(durations[:expected])


def test_max_runs_with_a_tight_spread_is_not_noisy():
    # Tiny blocks hit max_runs before min_time; a tight spread is still a good result.
    cfg = MeasureConfig(warmup_runs=0, warmup_s=0.0, min_runs=5, min_time_s=1.0, max_runs=20, max_time_s=10)
    clock = FakeClock()
    stats = measure_callable(ScriptedInference(clock, itertools.repeat(0.01)), cfg, clock=clock)
    assert stats.n == 20 and not stats.noisy


def test_stats_come_from_the_samples():
    cfg = MeasureConfig(warmup_runs=0, warmup_s=0.0, min_runs=7, min_time_s=0.0, max_runs=7, max_time_s=10,
                        target_rel_iqr=10.0)
    series = [3.0, 1.0, 2.0, 5.0, 4.0, 2.0, 3.0]
    clock = FakeClock()
    stats = measure_callable(ScriptedInference(clock, series), cfg, clock=clock)
    assert stats.samples_ms == pytest.approx(series)
    assert stats.median_ms == pytest.approx(np.median(series))
    assert stats.p90_ms == pytest.approx(np.percentile(series, 90))
    assert stats.min_ms == pytest.approx(1.0) and stats.n == 7


def test_rel_iqr_matches_numpy():
    xs = sorted(np.random.default_rng(1).uniform(1, 2, 37).tolist())
    q25, q50, q75 = np.percentile(xs, [25, 50, 75])
    assert rel_iqr_sorted(xs) == pytest.approx((q75 - q25) / q50)


@pytest.mark.parametrize("bad", [float("nan"), -1.0, float("inf")])
def test_invalid_sample_raises_device_error(bad):
    cfg = MeasureConfig(warmup_runs=0, warmup_s=0.0, min_runs=3, min_time_s=0.0, max_runs=10, max_time_s=10)
    samples = iter([1.0, bad])
    with pytest.raises(DeviceError, match="invalid sample"):
        run_loop(lambda: next(samples), cfg, clock=FakeClock())


def test_inference_errors_propagate():
    def broken():
        raise RuntimeError("kernel failed")

    with pytest.raises(RuntimeError, match="kernel failed"):
        measure_callable(broken, MeasureConfig(), clock=FakeClock())


@pytest.mark.parametrize("kwargs, words", [
    (dict(min_runs=50, max_runs=10), ["max_runs=10", "min_runs=50"]),
    (dict(min_time_s=5.0, max_time_s=1.0), ["max_time_s=1.0", "min_time_s=5.0"]),
    (dict(warmup_runs=-1), ["warmup_runs=-1"]),
    (dict(target_rel_iqr=float("nan")), ["target_rel_iqr=nan"]),
])
def test_bad_config_is_refused_with_the_values(kwargs, words):
    with pytest.raises(BadInputError) as ei:
        validate_config(MeasureConfig(**kwargs))
    for w in words:
        assert w in ei.value.message
    assert ei.value.exit_code == 2
