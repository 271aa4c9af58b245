"""`nagkit profile --time-budget`: parsing, the minimum refused before any work, the plan that
skips work for time (and says so), resume with a larger budget. The clock is a fake one that the
fake device advances, so every deadline is checked without waiting."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nagkit.devices.base import LatencyStats
from nagkit.latency.blocks import unique_layers
from nagkit.latency.budget import (TimeBudget, block_priority, budget_lines, by_priority, parse_time_budget,
                                   with_rates)
from nagkit.latency.table import LatencyTable
from tests.cli.helpers import assert_refused, run_cli_inproc
from tests.latency.conftest import make_tiny_space
from tests.latency.test_profile import _FakeDevice, journal_records


class Clock:
    """Seconds that pass only when a measurement says so."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def budget_of(seconds, clock: Clock, block_s: float = 1.0, net_s: float = 1.0) -> TimeBudget:
    """A budget whose priors are the fake device's own rates (no conversion: a torch device)."""
    return with_rates(TimeBudget(seconds, clock=clock), convert_block_s=0.0, measure_block_s=block_s,
                      convert_net_s=0.0, measure_net_s=net_s)


@pytest.fixture
def fake(monkeypatch):
    """(clock, calls): every block measurement takes 1 s of the fake clock; each block's passes
    run 1.0, 1.1, 1.2 ... ms (never confirmed within 3%), so every pass and extra pass is wanted."""
    import nagkit.latency.profiler as profiler

    clock = Clock()
    calls: dict[str, int] = {}

    def scripted(device, cache, key, layer, cfg):  # a test double for one block's timing
        i = calls[key] = calls.get(key, 0) + 1
        clock.t += 1.0
        ms = 1.0 + 0.1 * (i - 1)
        return LatencyStats.from_samples([ms * 0.99, ms, ms * 1.01])

    monkeypatch.setattr(profiler, "_measure_block", scripted)
    return clock, calls


# -- parsing ------------------------------------------------------------------------------------
@pytest.mark.parametrize("text,seconds", [("10m", 600), ("90s", 90), ("1h", 3600), ("1h30m", 5400), ("600", 600),
                                          ("90.5", 90.5), ("1h30m15s", 5415), (" 3M ", 180), (45, 45)])
def test_budgets_parse_as_seconds(text, seconds):
    assert parse_time_budget(text) == seconds


@pytest.mark.parametrize("text,why", [("abc", "is not a duration"), ("1h30", "is not a duration"),
                                      ("10x", "is not a duration"), ("", "is not a duration"),
                                      ("0", "more than zero"), ("0m", "more than zero"), ("-5m", "more than zero"),
                                      ("inf", "is not a duration"), (float("nan"), "not a finite"),
                                      ("8000000", "over the limit"), (True, "is not a duration")])
def test_bad_budgets_are_refused_in_one_line_naming_the_forms(text, why):
    from nagkit.errors import BadInputError

    with pytest.raises(BadInputError, match=why) as ei:
        parse_time_budget(text)
    msg = str(ei.value)
    assert "\n" not in msg and "10m" in msg and "1h30m" in msg and "e.g. --time-budget 10m" in msg


@pytest.mark.parametrize("value", ["abc", "0", "-5m", "inf", "1e3"])
def test_the_cli_refuses_a_bad_budget_before_anything(tmp_path, capsys, value):
    out = tmp_path / "out"
    out.mkdir()
    r = run_cli_inproc(["profile", "--device", "cpu:runtime=onnxruntime", "--out", str(out / "t.json"),
                        "--cache-dir", str(out / "cache"), "--time-budget", value], capsys)
    assert_refused(r, ["--time-budget", repr(value), "e.g. --time-budget 10m"], out)
    assert "Traceback" not in r.err


def test_the_api_refuses_a_bad_budget_before_the_device_is_opened(tmp_path, monkeypatch):
    import nagkit
    import nagkit.app.profile as app_profile
    from nagkit.errors import BadInputError

    opened = []
    monkeypatch.setattr(app_profile, "open_device", lambda *a, **k: opened.append(1))
    with pytest.raises(BadInputError, match="--time-budget '0' must be more than zero"):
        nagkit.profile("cpu", out=tmp_path / "t.json", time_budget="0")
    assert not opened and list(tmp_path.iterdir()) == []


# -- the minimum --------------------------------------------------------------------------------
def test_a_budget_below_the_minimum_is_refused_before_any_conversion(tmp_path):
    from nagkit.errors import BadInputError
    from nagkit.latency.profiler import profile

    space = make_tiny_space(resolutions=(32,))
    n = len(unique_layers(space, [32]))
    dev = _FakeDevice()
    clock = Clock()
    # one pass over the blocks at 1 s each is the minimum; a budget of half of it is refused
    with pytest.raises(BadInputError, match="below this profile's minimum of about") as ei:
        profile(dev, space, [32], tmp_path / "t.json", cache_dir=tmp_path / "cache", progress=False,
                budget=budget_of(n / 2, clock))
    assert f"block pass 1 {n} s" in ei.value.message and "--time-budget" in ei.value.hint
    assert dev.calls == 0 and list(tmp_path.iterdir()) == []  # no journal, no lock, no cache, no table
    # with a calibration the minimum networks count too, and are named
    from nagkit.latency.budget import NetworkPlan

    with pytest.raises(BadInputError, match="calibration networks \\(minimum\\) 10 s"):
        profile(dev, space, [32], tmp_path / "t.json", cache_dir=tmp_path / "cache", progress=False,
                budget=budget_of(n + 5, clock), networks=NetworkPlan(80, 10, 3, 1.0, lambda k: k))
    assert list(tmp_path.iterdir()) == []


def test_the_cli_names_the_minimum_and_writes_nothing(tmp_path, capsys):
    space = make_tiny_space(resolutions=(32,))
    sp = tmp_path / "space.json"
    sp.write_text(json.dumps(space.to_dict()))
    out = tmp_path / "out"
    out.mkdir()
    r = run_cli_inproc(["profile", "--device", "cpu:runtime=onnxruntime,threads=1", "--space", str(sp),
                        "--out", str(out / "t.json"), "--cache-dir", str(out / "cache"), "--time-budget", "2s",
                        "--no-progress"], capsys)
    assert_refused(r, ["--time-budget 2 s is below this profile's minimum of about", "or more"], out)


# -- the plan keeps to the budget ---------------------------------------------------------------
def test_a_short_budget_skips_passes_biggest_error_first_and_says_so(tmp_path, fake, capsys):
    from nagkit.latency.profiler import journal_path, profile

    clock, calls = fake
    space = make_tiny_space(resolutions=(32,))
    n = len(unique_layers(space, [32]))
    budget_s = 1.5 * n + 10  # pass 1 (n s) and about half of pass 2, with the margin and the finish
    out = tmp_path / "t.json"
    res = profile(_FakeDevice(), space, [32], out, cache_dir=tmp_path / "cache", progress=False,
                  budget=budget_of(budget_s, clock))
    assert clock.t <= budget_s
    recs = journal_records(journal_path(out))[1:]
    second = [r["key"] for r in recs if r["pass"] == 2]
    assert all(calls.get(k, 0) >= 1 for k in unique_layers(space, [32]))  # pass 1 is whole
    assert 0 < len(second) < n and not [r for r in recs if r["pass"] > 2]
    # the blocks of pass 2 are those that weigh most in a typical network (all have the same gap here)
    from nagkit.latency.budget import block_weights

    w = block_weights(space, [32])
    assert min(w.get(k, 0) for k in second) >= max(w.get(k, 0) for k in unique_layers(space, [32]) if k not in second)
    tb = LatencyTable.load(out).provenance["time_budget"]
    assert tb["time_budget_s"] == budget_s and tb["elapsed_s"] <= budget_s and not tb["over_budget"]
    phases = {p["phase"]: p for p in tb["phases"]}
    assert phases["block pass 1"]["done"] == n and phases["block pass 1"]["required"]
    assert phases["block pass 2"]["status"] == "stopped for time" and phases["block pass 2"]["done"] == len(second)
    assert phases["block pass 3+"]["status"] == "skipped for time" and phases["block pass 3+"]["done"] == 0
    skipped = {s["phase"]: s["items"] for s in tb["skipped_for_time"]}
    assert skipped["block pass 2"] == n - len(second) and skipped["block pass 3+"] == n
    assert "--resume --time-budget" in tb["more_time"] and res.to_dict()["time_budget"] == tb
    assert any("left out for time: block pass 2" in ln for ln in budget_lines(tb))
    shown = run_cli_inproc(["lut", "show", str(out)], capsys)  # `lut show` says it too
    assert shown.code == 0 and f"profile    time budget {budget_s:.0f} s" in shown.out and "more time  " in shown.out


def test_resume_with_a_larger_budget_adds_the_passes_left_out(tmp_path, fake):
    from nagkit.latency.profiler import journal_path, profile

    clock, calls = fake
    space = make_tiny_space(resolutions=(32,))
    n = len(unique_layers(space, [32]))
    out = tmp_path / "t.json"
    profile(_FakeDevice(), space, [32], out, cache_dir=tmp_path / "cache", progress=False,
            budget=budget_of(1.2 * n + 10, clock), extra_passes=0)
    before = len(journal_records(journal_path(out))) - 1
    assert n <= before < 2 * n
    clock.t = 0.0
    again = profile(_FakeDevice(), space, [32], out, cache_dir=tmp_path / "cache", progress=False, resume=True,
                    budget=budget_of(3 * n + 30, clock), extra_passes=0)
    recs = journal_records(journal_path(out))[1:]
    assert len(recs) == 3 * n  # every block now has its 3 passes; none measured twice
    assert len({(r["key"], r["pass"]) for r in recs}) == 3 * n
    tb = again.table.provenance["time_budget"]
    phases = {p["phase"]: p for p in tb["phases"]}
    assert phases["block pass 1"]["planned"] == 0 and phases["block pass 2"]["planned"] == 2 * n - before
    assert tb["skipped_for_time"] == [] and "nothing planned was left out" in tb["more_time"]
    assert again.resumed and not again.measured
    assert again.table.provenance["block_passes"]["passes"] == 3


def test_the_next_plan_starts_from_the_rates_the_last_profile_observed(tmp_path, fake):
    from nagkit.latency.budget import RATES_FILE
    from nagkit.latency.profiler import profile

    clock, _ = fake
    space = make_tiny_space(resolutions=(32,))
    cache = tmp_path / "cache"
    first = profile(_FakeDevice(), space, [32], tmp_path / "a.json", cache_dir=cache, progress=False,
                    budget=TimeBudget(600, clock=clock), passes=1)
    assert first.table.provenance["time_budget"]["at_start"]["rates"]["source"] == "prior"
    kept = json.loads((cache / RATES_FILE).read_text())
    (entry,) = kept.values()
    assert 1.0 < entry["measure_block_s"] < 1.1  # 1 s observed a block, the prior 1.1 s worth two
    second = profile(_FakeDevice(), space, [32], tmp_path / "b.json", cache_dir=cache, progress=False,
                     budget=TimeBudget(600, clock=clock), passes=1)
    start = second.table.provenance["time_budget"]["at_start"]["rates"]
    assert start["source"].startswith("observed by the profile of") and start["measure_block_s"] == entry["measure_block_s"]
    (cache / RATES_FILE).write_text("{not json")  # a damaged record: the priors, and no failure
    third = profile(_FakeDevice(), space, [32], tmp_path / "c.json", cache_dir=cache, progress=False,
                    budget=TimeBudget(600, clock=clock), passes=1)
    assert third.table.provenance["time_budget"]["at_start"]["rates"]["source"] == "prior"


def test_without_a_budget_every_pass_runs_as_before(tmp_path, fake):
    from nagkit.latency.profiler import profile

    clock, calls = fake
    space = make_tiny_space(resolutions=(32,))
    res = profile(_FakeDevice(), space, [32], tmp_path / "t.json", cache_dir=tmp_path / "cache", progress=False,
                  budget=TimeBudget(None, clock=clock))
    assert set(calls.values()) == {7}  # 3 passes and 4 extra (never confirmed)
    tb = res.table.provenance["time_budget"]
    assert tb["time_budget_s"] is None and tb["skipped_for_time"] == []


# -- the calibration keeps to it too ------------------------------------------------------------
class _NetDevice(_FakeDevice):
    def __init__(self, clock: Clock, net_s: float = 1.0):
        super().__init__()
        self.clock, self.net_s, self.nets = clock, net_s, 0

    def measure(self, model, shape, cfg=None):  # a test double for a whole network's timing
        self.clock.t += self.net_s
        self.nets += 1
        ms = 5.0 + 0.37 * (self.nets % 7)
        return LatencyStats.from_samples([ms, ms, ms])


def _space_file(tmp_path):
    space = make_tiny_space(resolutions=(32,))
    sp = tmp_path / "space.json"
    sp.write_text(json.dumps(space.to_dict()))
    return space, sp


@pytest.mark.filterwarnings("ignore:An input array is constant")  # the fake networks' calibration is flat
def test_a_calibration_measures_as_many_networks_as_the_budget_leaves(tmp_path, fake):
    from nagkit.app.profile import ProfileOptions, run_profile

    clock, _ = fake
    space, sp = _space_file(tmp_path)
    n = len(unique_layers(space, [32]))
    # the blocks' 3 passes (3n s), then room for about 15 networks in 3 passes, not 80
    budget_s = 3 * n + 45 + 30
    budget = budget_of(budget_s, clock)
    result, table, cal = run_profile(_NetDevice(clock), ProfileOptions(
        space=str(sp), out=tmp_path / "t.json", cache_dir=tmp_path / "cache", progress=False, calibrate="default"),
        budget=budget)
    assert clock.t <= budget_s and cal is not None
    assert 10 <= cal.plan.n < 30
    tb = LatencyTable.load(tmp_path / "t.json").provenance["time_budget"]
    phases = {p["phase"]: p for p in tb["phases"]}
    assert phases["calibration networks (minimum)"]["done"] == 10
    assert phases["networks to 30"]["status"] == "stopped for time"
    assert phases["networks beyond 30"]["status"] == "skipped for time"
    assert phases["network pass 1"]["done"] == cal.plan.n
    assert tb["fidelity"]["within_5pct"] is not None and tb["fidelity"]["within_10pct"] is not None
    assert tb["noise_verdict"]["networks"] and tb["noise_verdict"]["blocks"]
    # a resume keeps the networks' journalled measurements: the time it asks for is only what was skipped
    assert "networks" in tb["more_time"] and "measured again" not in tb["more_time"]
    assert tb["resume_with"].startswith("--resume --time-budget ") and tb["more_time"].endswith(tb["resume_with"])
    assert table.provenance["time_budget"] == tb
    # `lut validate` prints what the profile said it reached, beside what it measures now
    from nagkit.latency.validate import random_archs, report_text, validate
    from tests.latency.test_fidelity import ScriptedDevice

    val = random_archs(space, 5, seed=5, resolutions=[32])
    script = {str(a): [float(p)] for a, p in zip(val, table.predict_many(space, val))}
    rep = validate(table, ScriptedDevice(script), space, 5, seed=5, resolutions=[32], progress=False, passes=1,
                   anchors=0)
    line = next(ln for ln in report_text(rep).splitlines() if ln.startswith("profiled   "))
    assert f"time budget {budget_s // 60:.0f}m" in line and "within ±5%" in line and rep["profile_budget"] == tb


def test_a_calibration_is_left_out_when_the_blocks_took_its_time(tmp_path, fake, caplog, monkeypatch):
    """The priors said 1 s a block; the blocks took 1.5 s: no room for even the minimum networks,
    so the table is written raw, within the budget, and says why."""
    import nagkit.latency.profiler as profiler
    from nagkit.app.profile import ProfileOptions, run_profile

    clock, _ = fake
    orig = profiler._measure_block

    def slow(*a):
        clock.t += 0.5
        return orig(*a)

    monkeypatch.setattr(profiler, "_measure_block", slow)
    space, sp = _space_file(tmp_path)
    n = len(unique_layers(space, [32]))
    budget_s = n + 23  # above the minimum at the priors (pass 1, 10 networks, the finish, the margin)
    with caplog.at_level("WARNING"):
        result, table, cal = run_profile(_NetDevice(clock), ProfileOptions(
            space=str(sp), out=tmp_path / "t.json", cache_dir=tmp_path / "cache", progress=False,
            calibrate=10, block_passes=1), budget=budget_of(budget_s, clock))
    assert clock.t <= budget_s
    assert cal is None and table.calibration is None
    tb = table.provenance["time_budget"]
    assert any("calibration left out for time" in x for x in tb["notes"])
    assert any("calibration left out" in m for m in caplog.messages)


# -- the ETA and the order of extra work --------------------------------------------------------
def test_progress_lines_carry_the_runs_eta_against_the_budget():
    from nagkit.progress import phase_progress, progress_note

    clock = Clock()
    b = budget_of(600, clock)
    b.add("block pass 1", "measure_block_s", 100)
    lines: list[str] = []
    with progress_note(b.note):
        update = phase_progress(write=lines.append)
        update("profile x", 0, 100)
        clock.t = 30
        b.done("block pass 1", 30, 60.0)  # slower than the prior: 2 s a block, observed
        update("profile x", 100, 100)
    assert "run 0 s of 10m00s" in lines[0]
    assert "run 30 s of 10m00s" in lines[1]
    left = b.eta_s()
    assert 70 * 1.5 < left - 4 < 70 * 2.1  # 70 blocks at the observed rate (blended with the prior), and the finish
    update = phase_progress(write=lines.append)
    update("other", 0, 1)  # outside the note: no budget text
    assert "of 10m00s" not in lines[-1]
    # conversions report each item as it finishes, so the ETA counts down during them too
    b.add("convert networks", "convert_net_s", 4)
    tick = b.ticker("convert networks")
    for _ in range(2):
        clock.t += 3.0
        tick()
    ph = b.phase("convert networks")
    assert ph.done == 2 and ph.spent_s == 6.0 and b.rate("convert_net_s") == pytest.approx((0.0 * 2 + 6.0) / 4)


def test_extra_passes_go_to_the_blocks_whose_uncertainty_moves_typical_networks_most():
    weights = {"a": 1.0, "b": 4.0, "c": 1.0, "d": 0.1}
    meds = {"a": [1.0, 1.02], "b": [1.0, 1.01], "c": [1.0, 1.30], "d": [10.0, 15.0]}
    pri = block_priority(weights, meds)
    # c: 1 × 1 ms × 30%; d: 0.1 × 10 ms × 50%; b: 4 × 1 ms × 1%; a: 1 × 1 ms × 2%
    assert by_priority(list(meds), pri) == ["d", "c", "b", "a"]
    one = block_priority(weights, {"a": [2.0], "b": [1.0]})  # measured once: the same gap, so by weight × ms
    assert by_priority(["a", "b"], one) == ["b", "a"]


def test_a_profile_calibrates_on_the_networks_converted_before_time_ran_short(tmp_path, fake, monkeypatch):
    """Network conversions four times slower than planned: the conversions stop, the calibration is
    fitted on those converted (at least the minimum), and the record says so."""
    import nagkit.latency.blocks as blocks
    from nagkit.app.profile import ProfileOptions, run_profile

    clock, _ = fake

    def convert(task):  # a test double: writes a stand-in file; a network takes 4 s of the fake clock
        clock.t += 4.0 if task[0] == "net" else 0.0
        from pathlib import Path

        Path(task[3]).write_bytes(b"model")
        return task[3]

    monkeypatch.setattr(blocks, "convert_task", convert)

    class OnnxDev(_NetDevice):
        model_format = "onnx"

    space, sp = _space_file(tmp_path)
    n = len(unique_layers(space, [32]))
    budget_s = 3 * n + 160
    b = with_rates(TimeBudget(budget_s, clock=clock), convert_block_s=0.0, measure_block_s=1.0, convert_net_s=1.0,
                   measure_net_s=1.0)
    result, table, cal = run_profile(OnnxDev(clock), ProfileOptions(
        space=str(sp), out=tmp_path / "t.json", cache_dir=tmp_path / "cache", progress=False, calibrate="default",
        jobs=1), budget=b)
    tb = table.provenance["time_budget"]
    phases = {p["phase"]: p for p in tb["phases"]}
    conv = phases["convert networks"]
    assert conv["status"] == "stopped for time" and 10 <= conv["done"] < conv["planned"]
    assert cal is not None and cal.plan.n == conv["done"] and phases["network pass 1"]["done"] == conv["done"]
    assert any("stopped for time: calibrated on" in x for x in tb["notes"])
    assert clock.t <= budget_s + 4.0  # within the budget, give or take the conversion that found it out


def test_the_default_budget_is_ten_minutes_on_this_cpu_and_none_on_a_phone(tmp_path, fake):
    from nagkit.latency.profiler import profile

    clock, _ = fake
    space = make_tiny_space(resolutions=(32,))

    class Phone(_FakeDevice):  # measures on its own: what `adb:SERIAL` says of itself
        runs_on_host = False

        def prepare(self):
            return {"model": "phone"}

    here = profile(_FakeDevice(), space, [32], tmp_path / "a.json", cache_dir=tmp_path / "cache", progress=False,
                   budget=TimeBudget("default", clock=clock))
    phone = profile(Phone(), space, [32], tmp_path / "b.json", cache_dir=tmp_path / "cache", progress=False,
                    budget=TimeBudget("default", clock=clock))
    assert here.table.provenance["time_budget"]["time_budget_s"] == 600
    assert phone.table.provenance["time_budget"]["time_budget_s"] is None
    assert budget_lines(phone.table.provenance["time_budget"])[0].startswith("no time budget: took")


def test_each_device_declares_its_default_budget_and_a_gpu_has_none(tmp_path, fake):
    """Decisions 50: the default comes from the device (``default_time_budget_s``). A GPU runs on
    the host but declares none (before, running on the host gave it the CPU's 10 minutes, against
    decisions 40 and the README); a device that declares nothing keeps the old rule."""
    from nagkit.devices.adb.device import AdbDevice
    from nagkit.devices.base import default_time_budget
    from nagkit.devices.cpu import CpuDevice
    from nagkit.devices.cuda import CudaDevice
    from nagkit.latency.profiler import profile

    assert (CpuDevice.default_time_budget_s, CudaDevice.default_time_budget_s, AdbDevice.default_time_budget_s) \
        == (600.0, None, None)
    assert CudaDevice.runs_on_host and not AdbDevice.runs_on_host
    clock, _ = fake

    class Gpu(_FakeDevice):  # launched from the host, as `cuda` is
        runs_on_host = True
        default_time_budget_s = None

        def prepare(self):
            return {"model": "gpu"}

    class Patient(_FakeDevice):  # a plugin's device that declares its own
        default_time_budget_s = 1800.0

    assert default_time_budget(_FakeDevice(), True) == 600 and default_time_budget(_FakeDevice(), False) is None
    space = make_tiny_space(resolutions=(32,))
    for dev, want, name in ((Gpu(), None, "g"), (Patient(), 1800.0, "p")):
        res = profile(dev, space, [32], tmp_path / f"{name}.json", cache_dir=tmp_path / "cache", progress=False,
                      budget=TimeBudget("default", clock=clock))
        assert res.table.provenance["time_budget"]["time_budget_s"] == want


# -- the calibration's measurements are journalled: a resume keeps them ---------------------------
class _FailingNetDevice(_NetDevice):
    """Interrupted (an error, as a killed run is) after ``fail_after`` network measurements."""

    def __init__(self, clock: Clock, fail_after: int):
        super().__init__(clock)
        self.fail_after = fail_after

    def measure(self, model, shape, cfg=None):
        if self.nets >= self.fail_after:
            raise KeyboardInterrupt("killed")  # a test double's interruption
        return super().measure(model, shape, cfg)


def _net_records(out):
    from nagkit.latency.net_journal import network_journal_path

    return [r for r in journal_records(network_journal_path(out))[1:] if r["type"] == "network"]


@pytest.mark.filterwarnings("ignore:An input array is constant")  # the fake networks' calibration is flat
def test_a_resumed_profile_keeps_the_calibration_networks_it_had_measured(tmp_path, fake):
    from nagkit.app.profile import ProfileOptions, run_profile

    clock, _ = fake
    space, sp = _space_file(tmp_path)
    n = len(unique_layers(space, [32]))
    out = tmp_path / "t.json"
    opts = dict(space=str(sp), out=out, cache_dir=tmp_path / "cache", progress=False, calibrate="default")
    budget_s = 3 * n + 45 + 30  # the blocks' passes and about 15 networks (the test above)
    with pytest.raises(KeyboardInterrupt):  # killed in the calibration's second pass
        run_profile(_FailingNetDevice(clock, fail_after=26), ProfileOptions(**opts), budget=budget_of(budget_s, clock))
    first = _net_records(out)
    assert len(first) == 26 and {r["pass"] for r in first} == {1, 2}
    clock.t = 0.0
    dev = _NetDevice(clock)
    budget = budget_of(budget_s + 60, clock)  # resumed with a larger budget
    result, table, cal = run_profile(dev, ProfileOptions(**opts, resume=True), budget=budget)
    recs = _net_records(out)
    assert recs[:26] == first and len(recs) == 26 + dev.nets  # kept, and only the rest measured
    keys = [(r["arch"], r.get("pass"), r.get("extra")) for r in recs]
    assert len(set(keys)) == len(keys)  # no network's pass measured twice
    fitted = table.calibration.details["fit_archs"] if table.calibration else cal.candidate.details["fit_archs"]
    had = {r["arch"] for r in first}
    assert had <= set(fitted)  # the calibration of the resumed run is fitted on the networks paid for before
    tb = table.provenance["time_budget"]
    phases = {p["phase"]: p for p in tb["phases"]}
    assert phases["network pass 1"]["planned"] == cal.plan.n - len(had)  # the plan counts what was journalled
    assert clock.t <= budget_s + 60


def test_a_new_profile_starts_the_calibration_journal_anew(tmp_path):
    from nagkit.latency.journal import device_identity
    from nagkit.latency.net_journal import network_journal_path, open_network_journal
    from nagkit.latency.validate import random_archs

    space = make_tiny_space(resolutions=(32,))
    out = tmp_path / "t.json"
    ident = device_identity(_FakeDevice())
    j = open_network_journal(out, ident, space, resume=False)
    a = str(random_archs(space, 1, 1, [32])[0])
    j.append(a, LatencyStats(2.0, 2.0, 0.1, 1.9, 2.1, 1.9, 20), pass_no=1)
    with open(network_journal_path(out), "a") as f:
        f.write('{"type": "network", "arch": "torn')  # a crash mid-write
    again = open_network_journal(out, ident, space, resume=True)
    assert again.passes() == {a: 1} and network_journal_path(out).read_text().endswith("}\n")
    other = open_network_journal(out, {**ident, "threads": 4}, space, resume=True)  # another device's: anew
    assert other.passes() == {}
    assert open_network_journal(out, ident, space, resume=False).passes() == {}  # no --resume: anew


# -- a cold cache: a few conversions timed before the plan commits --------------------------------
@pytest.fixture
def converter(monkeypatch, tmp_path):
    """(seconds per conversion, calls, staging folders): block conversions in this process take
    ``seconds[0]`` of the fake clock (a test double writing a stand-in file); temporary folders go to
    ``tmp_path/tmp`` so that what is left there can be checked."""
    import tempfile

    import nagkit.latency.blocks as blocks

    seconds, calls = [0.5], []
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    return seconds, calls, tmp, blocks


class _OnnxDev(_FakeDevice):
    model_format = "onnx"  # converts its blocks (one at a time, in this process: an ONNX export is quick)


def _cold_profile(tmp_path, fake, converter, monkeypatch, budget_s):
    from nagkit.latency.profiler import profile

    clock, _ = fake
    seconds, calls, _, blocks = converter

    def convert(task):  # a test double for one conversion
        clock.t += seconds[0]
        calls.append(task[3])
        Path(task[3]).write_bytes(b"model")
        return task[3]

    monkeypatch.setattr(blocks, "convert_task", convert)
    space = make_tiny_space(resolutions=(32,))
    b = with_rates(TimeBudget(budget_s, clock=clock), convert_block_s=3.0, measure_block_s=1.0, convert_net_s=0.0,
                   measure_net_s=1.0)
    return profile(_OnnxDev(), space, [32], tmp_path / "out" / "t.json", cache_dir=tmp_path / "out" / "cache",
                   progress=False, passes=1, budget=b)


def test_a_cold_cache_times_a_few_conversions_and_plans_with_this_machines_rate(tmp_path, fake, converter,
                                                                                monkeypatch):
    space = make_tiny_space(resolutions=(32,))
    n = len(unique_layers(space, [32]))
    prior_min = (n * 3.0 + n * 1.0 + 4) / 0.97  # refused at the priors ...
    budget_s = (n * 0.5 * 1.25 + n * 1.0 + 4) / 0.97 + 5  # ... accepted at the rate timed here, with 25% to spare
    assert budget_s < prior_min
    res = _cold_profile(tmp_path, fake, converter, monkeypatch, budget_s)
    clock, _ = fake
    seconds, calls, tmp, _ = converter
    assert len(calls) == n and len({Path(c).name for c in calls}) == n  # every block converted once: none twice
    assert sorted(p.name for p in Path(res.cache["dir"]).iterdir()) == sorted(Path(c).name for c in calls)
    assert res.cache["misses"] == n
    tb = res.table.provenance["time_budget"]
    probe = tb["at_start"]["probe"]
    assert probe["blocks"] == 3 and probe["jobs"] == 1 and probe["steady_s"] == 0.5
    assert probe["planned_convert_block_s"] == 0.625 and "timed here" in tb["at_start"]["rates"]["source"]
    conv = {p["phase"]: p for p in tb["phases"]}["convert blocks"]
    assert conv["planned"] == n and conv["done"] == n and conv["status"] == "done"
    assert clock.t <= budget_s and not tb["over_budget"]
    assert list(tmp.iterdir()) == []  # the probe's folder is gone


def test_a_budget_too_small_at_the_timed_rate_is_refused_naming_it_and_nothing_is_written(tmp_path, fake, converter,
                                                                                          monkeypatch):
    from nagkit.errors import BadInputError

    seconds, calls, tmp, _ = converter
    seconds[0] = 2.9  # this machine converts about as slowly as the priors say
    space = make_tiny_space(resolutions=(32,))
    n = len(unique_layers(space, [32]))
    budget_s = (n * 1.0 + 4) / 0.97 + 10  # enough were conversions free: worth timing them
    with pytest.raises(BadInputError, match="below this profile's minimum of about") as ei:
        _cold_profile(tmp_path, fake, converter, monkeypatch, budget_s)
    assert "block conversion timed here (3 blocks: 2.90 s each" in ei.value.message
    assert len(calls) == 3 and not (tmp_path / "out").exists() and list(tmp.iterdir()) == []
    calls.clear()
    with pytest.raises(BadInputError, match="below this profile's minimum"):  # hopeless even with free conversions
        _cold_profile(tmp_path, fake, converter, monkeypatch, n * 0.5)
    assert calls == [] and not (tmp_path / "out").exists()


def test_the_timed_rate_leaves_out_each_processs_start_up():
    from nagkit.latency.budget_probe import SAFETY, _rate

    # 2 processes, 8 s to start, 2.4 s a conversion each: pairs finish at 10.4, 12.8, 15.2 s
    steady, startup, rate = _rate(0.0, [10.4, 10.4, 12.8, 12.8, 15.2, 15.2], 2, 80)
    assert steady == pytest.approx(1.2) and startup == pytest.approx(8.0)
    assert rate == pytest.approx(SAFETY * 1.2 + 8.0 / 80)  # the rest's processes start again
    steady, startup, rate = _rate(0.0, [9.0, 10.2, 11.4], 1, 50)  # one, in this process: started once
    assert steady == pytest.approx(1.2) and startup == pytest.approx(7.8) and rate == pytest.approx(SAFETY * 1.2)


# -- `lut validate --time-budget` (decisions 47) ------------------------------------------------
def _val_budget(seconds, clock, convert_s=0.0):
    return with_rates(TimeBudget(seconds, clock=clock), convert_block_s=0.0, measure_block_s=1.0,
                      convert_net_s=convert_s, measure_net_s=1.0)


def test_validate_keeps_to_its_time_budget_dropping_later_passes_first(lat_space, lat_table, tmp_path):
    """20 networks, 3 passes at 1 s a measurement: 60 s and more asked, 30 s given. Every network
    is measured once (required), the second pass as far as the time allows, the third not at all;
    the report and its text say so."""
    from nagkit.latency.validate import report_text, validate

    clock = Clock()
    dev = _NetDevice(clock)
    rep = validate(lat_table, dev, lat_space, 20, seed=4, resolutions=[32], progress=False, passes=3, anchors=0,
                   cache_dir=tmp_path / "cache", budget=_val_budget(30, clock))
    tb = rep["time_budget"]
    phases = {p["phase"]: p for p in tb["phases"]}
    assert phases["network pass 1"]["done"] == 20 and rep["samples"] == rep["samples_asked"] == 20
    assert 0 < phases["network passes 2+"]["done"] < 40 and phases["network passes 2+"]["status"] == "stopped for time"
    assert clock.t <= 30 and tb["time_budget_s"] == 30 and not tb["over_budget"]
    assert tb["more_time"].startswith("about ") and "--time-budget" in tb["more_time"] and "--resume" not in tb["more_time"]
    text = report_text(rep)
    assert "time       time budget 30 s: used" in text and "left out for time: network passes 2+" in text
    # without a budget every pass runs, and the estimate is still said first
    clock2 = Clock()
    said = []
    b = _val_budget(None, clock2)
    b.say = said.append
    full = validate(lat_table, _NetDevice(clock2), lat_space, 20, seed=4, resolutions=[32], progress=False, passes=3,
                    anchors=0, cache_dir=tmp_path / "cache", budget=b)
    assert {p["phase"]: p for p in full["time_budget"]["phases"]}["network passes 2+"]["done"] == 40
    assert said and said[0].startswith("no time budget, estimated ") and full["time_budget"]["more_time"] is None


def test_validate_refuses_a_budget_below_its_minimum_before_any_measurement(lat_space, lat_table, tmp_path):
    from nagkit.errors import BadInputError
    from nagkit.latency.validate import validate

    clock = Clock()
    dev = _NetDevice(clock)
    with pytest.raises(BadInputError) as e:  # 20 networks measured once: 20 s at least
        validate(lat_table, dev, lat_space, 20, seed=4, resolutions=[32], progress=False, passes=3, anchors=0,
                 cache_dir=tmp_path / "cache", budget=_val_budget(10, clock))
    assert "below this validation's minimum of about" in str(e.value) and "fewer --samples" in e.value.hint
    assert dev.nets == 0 and not (tmp_path / "cache").exists()


def test_validate_on_the_networks_converted_when_conversions_run_slow(lat_space, lat_table, tmp_path, monkeypatch):
    """Conversions planned at 1 s take 4 s: they stop where those converted still get their pass,
    and the report validates on those, saying how many of how many."""
    import nagkit.latency.blocks as blocks
    from nagkit.latency.validate import report_text, validate

    clock = Clock()

    def convert(task):  # a test double: a stand-in file; a network takes 4 s of the fake clock
        clock.t += 4.0
        Path(task[3]).write_bytes(b"model")
        return task[3]

    monkeypatch.setattr(blocks, "convert_task", convert)

    class OnnxDev(_NetDevice):
        model_format = "onnx"

    rep = validate(lat_table, OnnxDev(clock), lat_space, 20, seed=4, resolutions=[32], progress=False, passes=2,
                   anchors=0, cache_dir=tmp_path / "cache", budget=_val_budget(60, clock, convert_s=1.0), jobs=1)
    tb = rep["time_budget"]
    phases = {p["phase"]: p for p in tb["phases"]}
    assert phases["convert networks"]["status"] == "stopped for time"
    assert 0 < rep["samples"] == phases["convert networks"]["done"] < 20 == rep["samples_asked"]
    assert len(rep["archs"]) == rep["samples"] and phases["network pass 1"]["done"] == rep["samples"]
    assert clock.t <= 60 + 4.0  # give or take the conversion that found it out
    assert any("stopped for time" in x for x in tb["notes"])
    assert f"{rep['samples']} of 20 networks validated" in report_text(rep)


@pytest.mark.parametrize("value", ["0", "abc", "-5m"])
def test_lut_validate_refuses_a_bad_time_budget_in_one_line(tmp_path, value, lat_table, capsys):
    p = tmp_path / "t.json"
    lat_table.save(p)
    out = tmp_path / "empty"
    out.mkdir()
    res = run_cli_inproc(["lut", "validate", "--lut", str(p), "--device", "cpu-onnx-1t", "--time-budget", value,
                          "--cache-dir", str(out)], capsys)
    assert_refused(res, ["--time-budget"], out)
