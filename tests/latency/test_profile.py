"""nagkit profile on the CPU device: journal, kill -9 and resume, refusals."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from nagkit.latency.blocks import unique_layers
from nagkit.latency.table import LatencyTable
from tests.cli.helpers import run_cli
from tests.latency.conftest import make_tiny_space

FAST_MEASURE = "{warmup_runs: 2, warmup_s: 0.01, min_runs: 5, min_time_s: 0.03, max_time_s: 0.3, max_runs: 300}"
SLOW_MEASURE = "{warmup_runs: 2, warmup_s: 0.05, min_runs: 20, min_time_s: 0.2, max_time_s: 0.3, max_runs: 100000}"


@pytest.fixture
def setup(tmp_path):
    # one kernel and one expand ratio: 10 blocks of every kind (22 with both): a journal, a kill and a
    # resume do not depend on the count, and every block is measured in 3 to 7 passes of 0.2-0.3 s
    space = make_tiny_space(resolutions=(32,), ks_list=(3,), expand_list=(3,))
    sp = tmp_path / "space.json"
    sp.write_text(json.dumps(space.to_dict()))

    def device(name: str, measure: str, runtime: str = "onnxruntime") -> Path:
        p = tmp_path / f"{name}.yaml"
        p.write_text(f"device: cpu:runtime={runtime},threads=1\nmeasure: {measure}\n")
        return p

    return space, sp, device


def journal_records(path: Path) -> list[dict]:
    return [json.loads(l) for l in path.read_text().splitlines() if l.strip()]


@pytest.mark.slow
def test_kill_and_resume_loses_and_repeats_nothing(setup, tmp_path, cli_env):
    space, space_file, device = setup
    dev = device("slow", SLOW_MEASURE)
    out = tmp_path / "t.json"
    journal = tmp_path / "t.json.journal.jsonl"
    args = [sys.executable, "-m", "nagkit", "profile", "--device", str(dev), "--space", str(space_file),
            "--out", str(out), "--cache-dir", str(tmp_path / "cache"), "--no-progress"]
    proc = subprocess.Popen(args, env=cli_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if journal.exists() and len(journal.read_bytes().splitlines()) >= 5:  # header + 4 blocks
            break
        if proc.poll() is not None:
            pytest.fail(f"profile ended before it could be killed: {proc.stderr.read().decode()[-2000:]}")
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert not out.exists()
    before = journal.read_bytes()
    done_before = [r["key"] for r in journal_records(journal)[1:]] if before.endswith(b"\n") else None
    if done_before is None:  # killed mid-line: the torn line is dropped on resume
        done_before = [json.loads(l)["key"] for l in before.splitlines()[1:-1]]
    total = len(unique_layers(space))
    assert 4 <= len(done_before) < total

    res = run_cli(["profile", "--device", str(dev), "--space", str(space_file), "--out", str(out),
                   "--cache-dir", str(tmp_path / "cache"), "--resume", "--no-progress", "--json"], env=cli_env)
    assert res.code == 0, res.err
    summary = json.loads(res.out)
    assert summary["resumed"] == len(done_before)
    assert summary["measured"] == total - len(done_before)
    recs = journal_records(journal)[1:]
    # every block in 3 passes over the list (the default on this machine's CPU), maybe more for an
    # unconfirmed best; no (block, pass) measured twice or lost, the killed run's records kept
    pairs = [(r["key"], r["pass"]) for r in recs]
    assert len(pairs) == len(set(pairs)), "a block's pass was measured twice"
    by_key: dict[str, list[int]] = {}
    for k, p in pairs:
        by_key.setdefault(k, []).append(p)
    assert set(by_key) == set(unique_layers(space)) and len(by_key) == total, "a block was lost"
    assert all(3 <= len(ps) <= 7 and ps == list(range(1, len(ps) + 1)) for ps in by_key.values())
    assert [k for k, p in pairs if p == 1][: len(done_before)] == done_before
    table = LatencyTable.load(out)
    assert set(table.entries) == set(unique_layers(space))
    first = recs[0]["key"]
    meds = [r["stats"]["median_ms"] for r in recs if r["key"] == first]
    assert table.entries[first]["median_ms"] == min(meds)  # its best pass
    assert table.provenance["block_passes"]["statistic"] == "best pass median"
    assert table.provenance["resumed_from_journal"] == len(done_before)
    assert table.device["spec"] and table.runtime["name"] == "onnxruntime"
    assert table.predict(space, space.largest()) > 0


@pytest.mark.slow
def test_profile_refuses_foreign_or_existing_journal(setup, tmp_path, cli_env):
    from nagkit.devices.registry import get_device
    from nagkit.errors import BadInputError
    from nagkit.latency.profiler import journal_path, profile

    space, space_file, device = setup
    dev_file = device("fast", FAST_MEASURE)
    out = tmp_path / "t.json"
    cache = tmp_path / "cache"
    with get_device(str(dev_file)) as dev:
        first = profile(dev, space, [32], out, cache_dir=cache, progress=False)
        assert len(first.measured) == len(unique_layers(space)) and not first.resumed
        with pytest.raises(BadInputError, match="--resume"):
            profile(dev, space, [32], out, cache_dir=cache, progress=False)
        other_space = space.replace(n_classes=5)
        with pytest.raises(BadInputError, match="was made for space"):
            profile(dev, other_space, [32], out, resume=True, cache_dir=cache, progress=False)
        again = profile(dev, space, [32], out, resume=True, cache_dir=cache, progress=False)
        assert again.measured == [] and len(again.resumed) == len(first.measured)
        assert again.table.entries == first.table.entries
        # killed while writing the header: nothing was measured, so it starts over
        torn = tmp_path / "torn.json"
        journal_path(torn).write_text('{"type": "header", "form')
        fresh = profile(dev, space, [32], torn, resume=True, cache_dir=cache, progress=False)
        assert len(fresh.measured) == len(first.measured)
    with get_device("cpu:runtime=onnxruntime,threads=2") as other:
        with pytest.raises(BadInputError, match="was made for device"):
            profile(other, space, [32], out, resume=True, cache_dir=cache, progress=False)
    # the same refusal through the CLI: one line, exit 2, no traceback
    res = run_cli(["profile", "--device", str(dev_file), "--space", str(space_file), "--out", str(out),
                   "--cache-dir", str(cache), "--no-progress"], env=cli_env)
    assert res.code == 2 and "--resume" in res.err and "Traceback" not in res.err


GOOD_STATS = {"median_ms": 1.0, "mean_ms": 1.1, "std_ms": 0.1, "p10_ms": 0.9, "p90_ms": 1.2, "min_ms": 0.8, "n": 20,
              "noisy": False}


def test_corrupt_journal_line_is_refused(tmp_path, lat_space):
    from nagkit.errors import ArtifactError
    from nagkit.latency.profiler import Journal

    j = Journal.create(tmp_path / "j.jsonl", {"space": "x"})
    j.append("a", GOOD_STATS)
    j.append("b", GOOD_STATS)
    lines = j.path.read_text().splitlines()
    j.path.write_text(lines[0] + "\n" + lines[1][:10] + "\n" + lines[2] + "\n")
    with pytest.raises(ArtifactError, match="corrupt at line 2"):
        Journal.open(j.path)
    # a torn *last* line is a crash mid-write: dropped, and the file is cut back
    j.path.write_text(lines[0] + "\n" + lines[1] + "\n" + lines[2][:15])
    j2 = Journal.open(j.path)
    assert list(j2.blocks) == ["a"]
    j2.append("b", {**GOOD_STATS, "median_ms": 2.5})
    assert list(Journal.open(j.path).blocks) == ["a", "b"]


@pytest.mark.parametrize("header, record, words", [
    (None, b"5", "malformed record: 5"),                       # a record that is a number
    (None, b"[]", "malformed record: []"),
    (b"[]", None, "not a nagkit profile journal"),              # a header that is a list
    (b"5", None, "not a nagkit profile journal"),
    (None, b'{"type": "block", "key": "\xff\xfe"}', "corrupt at line 2"),     # not UTF-8
    (None, b"[" * 20_000 + b"]" * 20_000, "corrupt at line 2"),               # nested 20,000 deep
    (None, b'{"n": ' + b"9" * 5000 + b"}", "corrupt at line 2"),             # int() refuses 5,000 digits
])
def test_d5_a_malformed_journal_is_one_artifact_error(tmp_path, header, record, words):
    """Issue 13 D5: a journal record `5` or a header `[]` gave AttributeError (exit 3)."""
    from nagkit.errors import ArtifactError
    from nagkit.latency.profiler import Journal

    j = Journal.create(tmp_path / "j.jsonl", {"space": "x"})
    j.append("a", GOOD_STATS)
    lines = j.path.read_bytes().splitlines()
    if header is not None:
        lines[0] = header
    if record is not None:
        lines.insert(1, record)
    j.path.write_bytes(b"\n".join(lines) + b"\n")
    with pytest.raises(ArtifactError) as ei:
        Journal.open(j.path)
    assert words in ei.value.message and len(ei.value.message) < 500, ei.value.message[:300]


def test_a_second_profile_of_the_same_output_is_refused(tmp_path):
    from nagkit.errors import BadInputError
    from nagkit.latency.profiler import journal_lock, journal_path

    j = journal_path(tmp_path / "t.json")
    with journal_lock(j):
        with pytest.raises(BadInputError, match="another `nagkit profile` is writing"):
            with journal_lock(j):
                pass
    with journal_lock(j):  # released again
        pass


class _FakeDevice:
    """A torch-format device that times nothing: it returns given statistics (no conversion)."""

    spec, kind, model_format = "fake:1", "fake", "torch"

    def __init__(self, stats=None):
        self.calls = 0
        self.stats = stats

    def info(self):
        return {"spec": self.spec}

    def runtime_info(self):
        return {"name": "fake", "threads": 1}

    def measure(self, model, shape, cfg=None):
        from nagkit.devices.base import LatencyStats

        self.calls += 1
        return self.stats or LatencyStats(1.0, 1.1, 0.1, 0.9, 1.2, 0.8, 20)

    def close(self):
        pass


@pytest.mark.parametrize("bad", [
    {"median_ms": float("inf")},           # median=1e999 in a benchmark_model count line
    {"n": 0},                              # count=0
    {"std_ms": -0.5},
    {"p10_ms": 2.0, "p90_ms": 1.0},
    {"median_ms": "1.0"},
])
def test_d6_a_bad_journal_record_is_measured_again_on_resume(tmp_path, caplog, bad):
    """D6: one impossible record in the journal failed the table build on every --resume."""
    from nagkit.latency.profiler import journal_path, profile

    space = make_tiny_space(resolutions=(32,))
    out = tmp_path / "t.json"
    dev = _FakeDevice()
    first = profile(dev, space, [32], out, cache_dir=tmp_path / "cache", progress=False, passes=1)
    n = len(first.measured)
    jp = journal_path(out)
    lines = jp.read_text().splitlines()
    rec = json.loads(lines[3])
    rec["stats"].update(bad)
    lines[3] = json.dumps(rec)  # json writes inf as Infinity, as the old journal did
    jp.write_text("\n".join(lines) + "\n")
    out.unlink()
    with caplog.at_level("WARNING"):
        again = profile(dev, space, [32], out, resume=True, cache_dir=tmp_path / "cache", progress=False, passes=1)
    assert again.measured == [rec["key"]] and len(again.resumed) == n - 1
    assert dev.calls == n + 1
    assert any("line 4" in m and "measured again" in m for m in caplog.messages)
    assert LatencyTable.load(out).entries[rec["key"]]["median_ms"] == 1.0


def test_d6_impossible_statistics_are_never_journalled(tmp_path):
    from nagkit.devices.base import LatencyStats
    from nagkit.errors import DeviceError
    from nagkit.latency.profiler import journal_path, profile

    space = make_tiny_space(resolutions=(32,))
    dev = _FakeDevice(LatencyStats(float("inf"), 1.0, 0.1, 0.9, 1.2, 0.8, 20))
    with pytest.raises(DeviceError, match="impossible statistics .* median_ms=inf") as ei:
        profile(dev, space, [32], tmp_path / "t.json", cache_dir=tmp_path / "cache", progress=False)
    assert "--resume" in ei.value.hint
    assert len(journal_path(tmp_path / "t.json").read_text().splitlines()) == 1  # the header only


def test_d5_out_below_an_existing_file_is_refused_before_any_work(tmp_path):
    """Issue 13 D5: `--out notes.txt/t.json` gave FileExistsError (exit 3) from mkdir."""
    from nagkit.errors import BadInputError
    from nagkit.latency.profiler import profile

    (tmp_path / "notes.txt").write_text("x")
    dev = _FakeDevice()
    with pytest.raises(BadInputError, match="is a file, not a folder") as ei:
        profile(dev, make_tiny_space(resolutions=(32,)), [32], tmp_path / "notes.txt" / "t.json",
                cache_dir=tmp_path / "cache", progress=False)
    assert "notes.txt" in ei.value.message and dev.calls == 0


def test_blocks_are_measured_in_passes_and_the_table_keeps_each_best_pass(tmp_path, monkeypatch):
    """Every block once per pass over the list (3 by default on this machine's CPU); a block whose
    fastest pass no other confirms within 3% gets up to 4 more passes; the table records each
    block's fastest pass, confirmed or not (a fast state seen once is not traded for a slower pair:
    decisions 28). Resuming a finished journal measures nothing."""
    import nagkit.latency.profiler as profiler
    from nagkit.devices.base import LatencyStats

    space = make_tiny_space(resolutions=(32,))
    keys = list(unique_layers(space, [32]))
    a, b, c, d = keys[:4]
    script = {a: [1.0, 1.5, 1.0], b: [2.0, 1.0, 1.5, 1.02], c: [3.0, 2.0, 4.0, 5.0, 6.0], d: [1.0, 1.5, 1.5]}
    calls: dict[str, int] = {}

    def scripted(device, cache, key, layer, cfg):  # a test double for one block's timing
        i = calls[key] = calls.get(key, 0) + 1
        ms = script.get(key, [0.5])[min(i, len(script.get(key, [0.5]))) - 1]
        return LatencyStats.from_samples([ms * 0.99, ms, ms * 1.01])

    monkeypatch.setattr(profiler, "_measure_block", scripted)
    out = tmp_path / "t.json"
    res = profiler.profile(_FakeDevice(), space, [32], out, cache_dir=tmp_path / "cache", progress=False)
    assert calls[a] == 3 and calls[b] == 4 and calls[c] == 7 and calls[d] == 7
    assert all(calls[k] == 3 for k in keys[4:])
    t = LatencyTable.load(out)
    assert [t.entries[k]["median_ms"] for k in (a, b, c, d)] == [1.0, 1.0, 2.0, 1.0]  # d: not the pair at 1.5
    bp = t.provenance["block_passes"]
    assert bp["statistic"] == "best pass median" and bp["unconfirmed_blocks"] == [c, d] and bp["passes"] == 7
    assert bp["noise"]["best_of_sd_pct"] is not None and res.to_dict()["passes"]["unconfirmed_blocks"] == [c, d]
    # the journal holds every pass, numbered
    passes = [(r["key"], r["pass"]) for r in journal_records(profiler.journal_path(out))[1:]]
    assert sorted(p for k, p in passes if k == c) == [1, 2, 3, 4, 5, 6, 7]
    before = dict(calls)
    again = profiler.profile(_FakeDevice(), space, [32], out, cache_dir=tmp_path / "cache", progress=False,
                             resume=True)
    assert calls == before and again.measured == [] and LatencyTable.load(out).entries == t.entries
    # one pass, asked for: each block once, its one measurement recorded
    calls.clear()
    one = profiler.profile(_FakeDevice(), space, [32], tmp_path / "one.json", progress=False, passes=1,
                           cache_dir=tmp_path / "cache")
    assert set(calls.values()) == {1} and one.table.entries[b]["median_ms"] == 2.0
    assert one.table.provenance["block_passes"]["statistic"] == "median of one measurement"


def test_noisy_blocks_are_named_as_soon_as_they_are_measured(tmp_path, monkeypatch, caplog):
    """Blocks whose best passes vary by more than the limit get a warning when the block table is
    written (before any calibration), with the figure and the fix; quiet blocks get none."""
    import logging

    import nagkit.latency.profiler as profiler
    from nagkit.devices.base import LatencyStats

    space = make_tiny_space(resolutions=(32,))
    calls: dict[str, int] = {}
    spread = [1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6]  # every block's two fastest passes 10% apart: never confirmed

    def scripted(device, cache, key, layer, cfg):  # a test double for one block's timing
        i = calls[key] = calls.get(key, 0) + 1
        ms = spread[i - 1] if noisy else 1.0
        return LatencyStats.from_samples([ms * 0.99, ms, ms * 1.01])

    monkeypatch.setattr(profiler, "_measure_block", scripted)
    noisy = True
    with caplog.at_level(logging.WARNING, logger="nagkit.latency.profiler"):
        res = profiler.profile(_FakeDevice(), space, [32], tmp_path / "noisy.json", cache_dir=tmp_path / "cache",
                               progress=False)
    warned = [r.getMessage() for r in caplog.records if "too noisy for a ±5% table" in r.getMessage()]
    n = len(res.table.entries)
    assert len(warned) == 1 and "varies by 10.5%" in warned[0] and "limit 2.5%" in warned[0], warned
    assert f"{n} block(s) have no second pass within 3%" in warned[0] and "--force" in warned[0]
    assert (tmp_path / "noisy.json").exists()  # the table is still written, and says how it was measured
    caplog.clear()
    calls.clear()
    noisy = False
    with caplog.at_level(logging.WARNING, logger="nagkit.latency.profiler"):
        profiler.profile(_FakeDevice(), space, [32], tmp_path / "quiet.json", cache_dir=tmp_path / "cache",
                         progress=False)
    assert not [r for r in caplog.records if "too noisy" in r.getMessage()]


def test_a_calibrated_profile_spreads_block_passes_over_the_whole_profile(tmp_path, monkeypatch):
    """`profile --calibrate` on this machine's CPU: every block gets one more pass after the
    calibration networks' conversions and one after their passes (decisions 29), the table
    records each block's best over all its passes, and the calibration is fitted on that table.
    A block slow in every pass of the block part is recorded at the fast state a later pass saw."""
    import nagkit.latency.profiler as profiler
    from nagkit.app.profile import ProfileOptions, run_profile
    from nagkit.devices.base import LatencyStats
    from nagkit.latency.calibration import MIN_NETWORKS

    space = make_tiny_space(resolutions=(32,))
    sp = tmp_path / "space.json"
    sp.write_text(json.dumps(space.to_dict()))
    keys = list(unique_layers(space, [32]))
    slow = keys[0]
    events: list[tuple[str, str]] = []

    def scripted(device, cache, key, layer, cfg):  # a test double for one block's timing
        events.append(("block", key))
        n = sum(1 for e in events if e == ("block", key))
        ms = 1.5 if key == slow and n <= 3 else 1.0  # slow, and confirmed so, through the block part
        return LatencyStats.from_samples([ms * 0.99, ms, ms * 1.01])

    class Dev(_FakeDevice):
        def measure(self, model, shape, cfg=None):  # a test double for a whole network's timing
            events.append(("net", ""))
            ms = 5.0 + 0.1 * (len(events) % 7)
            return LatencyStats.from_samples([ms, ms, ms])

    monkeypatch.setattr(profiler, "_measure_block", scripted)
    out = tmp_path / "t.json"
    result, table, cal = run_profile(Dev(), ProfileOptions(space=str(sp), out=out, cache_dir=tmp_path / "cache",
                                                           progress=False, calibrate=MIN_NETWORKS))
    kinds = "".join("b" if k == "block" else "n" for k, _ in events)
    n, nb = len(keys), len(keys) * 3
    assert kinds.startswith("b" * nb + "b" * n + "n"), kinds  # 3 passes, then one more before any network
    assert kinds.endswith("n" + "b" * n) and kinds.count("n") >= MIN_NETWORKS * 3
    assert kinds.count("b") == nb + 2 * n  # every block confirmed: no extra passes
    saved = LatencyTable.load(out)
    assert saved.entries[slow]["median_ms"] == 1.0 and table.entries[slow]["median_ms"] == 1.0
    spread = saved.provenance["spread_block_passes"]
    assert [s["after"] for s in spread] == ["after the calibration networks' conversions",
                                            "after the calibration networks' passes"]
    assert all(s["blocks"] == n for s in spread)
    bp = saved.provenance["block_passes"]
    assert bp["passes"] == 5 and result.to_dict()["passes"]["passes"] == 5
    assert saved.provenance["passes_asked"] == 3  # the profile's own provenance is kept
    passes = sorted(r["pass"] for r in journal_records(profiler.journal_path(out))[1:] if r["key"] == slow)
    assert passes == [1, 2, 3, 4, 5]
    # the fit was made on the rebuilt table's block sums, not on the block part's
    rec = saved.calibration or cal.candidate
    raw = saved.predict_many(space, rec.details["fit_archs"], calibrated=False)
    assert np.allclose(rec.details["fit_raw_ms"], raw)
    assert saved.provenance["fidelity"] == cal.record
    # one block pass asked for: no spreading
    events.clear()
    run_profile(Dev(), ProfileOptions(space=str(sp), out=tmp_path / "one.json", cache_dir=tmp_path / "cache",
                                      progress=False, calibrate=MIN_NETWORKS, block_passes=1))
    assert "".join("b" if k == "block" else "n" for k, _ in events) == "b" * n + "n" * (len(events) - n)
    assert "spread_block_passes" not in LatencyTable.load(tmp_path / "one.json").provenance


@pytest.mark.parametrize("passes", [0, 21, 2.5, True])
def test_a_bad_pass_count_is_refused_before_the_device_is_contacted(tmp_path, passes, capsys):
    from nagkit.errors import BadInputError
    from nagkit.latency.profiler import profile

    dev = _FakeDevice()
    with pytest.raises(BadInputError, match="passes must be a whole number from 1 to 20"):
        profile(dev, make_tiny_space(resolutions=(32,)), [32], tmp_path / "t.json", passes=passes, progress=False)
    assert dev.calls == 0 and not (tmp_path / "t.json.journal.jsonl").exists()
