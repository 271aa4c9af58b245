"""The benchmark_model parser against every real sample in shared/data/benchmark_model/ and
against the documented output shapes that have no sample (built from their formats)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from nagkit.devices.benchmark_model import (
    median_basis,
    parse_benchmark_output,
    parse_benchmark_runs,
    to_latency_stats,
)
from nagkit.errors import ProfileParseError
from nagkit.latency.table import stats_problem
from tests.fuzzing import benchmark_outputs, check_benchmark, fuzz_examples, no_hang, run_campaign
from tests.shared_data import BENCHMARK_MODEL as DATA
from tests.shared_data import needs_shared

samples = needs_shared(DATA)  # the tests reading the real outputs (the fuzz tests start from them too)


def sample(prefix: str) -> str:
    files = sorted(DATA.glob(f"{prefix}_*.txt"))
    assert files, f"sample {prefix} not found under {DATA}"
    return files[0].read_text()


@samples
def test_every_sample_is_covered_by_a_test():
    names = {p.name[:2] for p in DATA.glob("*.txt")}
    assert names == {"01", "02", "03", "04", "05", "08", "09", "10", "11", "12", "13"}


@samples
def test_01_oldest_style_no_stats():
    r = parse_benchmark_output(sample("01"))
    assert r.summary_style == "old"
    assert (r.init_us, r.warmup_avg_us, r.inference_avg_us) == (4452, 146161, 137722)
    assert r.warmup.count == 1 and r.warmup.curr_us == 146161 and r.warmup.avg_us is None
    inf = r.inference
    assert (inf.count, inf.first_us, inf.curr_us, inf.min_us, inf.max_us, inf.avg_us, inf.std_us) == (
        50, 137789, 137254, 137079, 143416, 137722, 896)
    assert inf.p50_us is None and r.num_threads == 1
    assert r.params["Graph"] == "mobilenet_v1_1.0_224_quant.tflite"
    s = to_latency_stats(r)
    assert median_basis(r) == "avg"
    assert s.median_ms == pytest.approx(137.722) and s.mean_ms == pytest.approx(137.722)
    assert s.std_ms == pytest.approx(0.896) and s.min_ms == pytest.approx(137.079) and s.n == 50
    assert s.min_ms <= s.p10_ms <= s.median_ms <= s.p90_ms <= 143.416


@samples
def test_02_two_runs_second_cut_off():
    text = sample("02")
    with pytest.raises(ProfileParseError, match="run 2 of 2: no timing summary") as ei:
        parse_benchmark_output(text)
    assert "max=3760" in str(ei.value)  # quotes the output
    (run,) = parse_benchmark_runs(text, skip_incomplete=True)
    assert (run.init_us, run.warmup_avg_us, run.inference_avg_us) == (9933, 76605.9, 66767.6)
    assert run.warmup.count == 7 and run.warmup.first_us == 127425 and run.warmup.std_us == 20944
    inf = run.inference
    assert (inf.count, inf.min_us, inf.max_us, inf.avg_us, inf.std_us) == (15, 66699, 66838, 66767.6, 39)
    assert to_latency_stats(run).median_ms == pytest.approx(66.7676)


@samples
def test_03_old_style_with_op_profiling_tables():
    r = parse_benchmark_output(sample("03"))
    assert (r.init_us, r.warmup_avg_us, r.inference_avg_us) == (18764, 395037, 394183)
    assert r.warmup.count == 2 and r.inference.count == 50 and r.inference.max_us == 417669
    assert r.num_threads == 2 and r.params["Enable op profiling"] == "1"
    (sec,) = r.profiling
    run_order = sec.table("Run Order")
    assert len(run_order.rows) == 31
    assert run_order.columns == ("node_type", "start", "first", "avg_ms", "pct", "cdf_pct", "mem_kb",
                                 "times_called", "name")
    first = run_order.rows[0]
    assert first["node_type"] == "CONV_2D" and first["avg_ms"] == 22.697 and first["pct"] == 5.760
    assert first["name"] == "[MobilenetV1/MobilenetV1/Conv2d_0/Relu6]" and first["times_called"] == 1
    assert len(sec.table("Top by Computation Time").rows) == 10
    by_type = {row["node_type"]: row for row in sec.table("Summary by node type").rows}
    assert by_type["CONV_2D"]["count"] == 15 and by_type["CONV_2D"]["avg_ms"] == 322.055
    assert sec.nodes_executed == 31 and sec.nodes_observed == 31
    assert sec.timings.count == 50 and sec.timings.avg_us == 394059
    # the profiler's Timings line must not be mistaken for the inference stats
    assert r.inference.avg_us == 394183


@samples
def test_04_old_profiler_summary_only():
    r = parse_benchmark_output(sample("04"))
    assert (r.init_us, r.warmup_avg_us, r.inference_avg_us) == (38467, 83235, 79760.9)
    assert r.inference is None and r.warmup is None
    (sec,) = r.profiling
    assert len(sec.table("Run Order").rows) == 31 and sec.timings.avg_us == 79732
    with pytest.raises(ProfileParseError, match="only an average"):
        to_latency_stats(r)


@samples
def test_05_new_style_peak_memory_two_profiling_sections():
    r = parse_benchmark_output(sample("05"))
    assert r.summary_style == "new"
    assert (r.init_us, r.first_inference_us, r.warmup_avg_us, r.inference_avg_us) == (445, 13470, 12306.2, 12280.5)
    assert r.warmup.count == 41 and r.inference.count == 82 and r.inference.std_us == 40
    assert r.memory == {"peak_init_mb": 4.51562, "peak_overall_mb": 11.5195}
    assert r.model_size_mb == 4.27635 and r.num_threads == 4
    init = r.section("Profiling Info for Benchmark Initialization")
    assert init.table("Run Order").rows[0]["name"] == "AllocateTensors/0" and init.timings.curr_us == 210
    runs = r.section("Operator-wise Profiling Info for Regular Benchmark Runs")
    assert len(runs.table("Run Order").rows) == 31 and runs.timings.count == 82
    assert runs.table("Run Order").rows[30]["name"] == "[MobilenetV1/Predictions/Reshape_1]:30"
    s = to_latency_stats(r)
    assert s.median_ms == pytest.approx(12.2805) and s.n == 82 and not s.noisy


@samples
def test_08_sci_notation_memdelta():
    r = parse_benchmark_output(sample("08"))
    assert r.inference_avg_us == 2.95034e06 and r.inference.avg_us == 2950340.0
    assert r.warmup_avg_us == 3.51239e06 and r.first_inference_us == 3512391 and r.init_us == 17187
    assert r.warmup.count == 1 and r.warmup.curr_us == 3512391
    assert r.memory == {"footprint_delta_init_mb": 4.21094, "footprint_delta_overall_mb": 46.0859}
    runs = r.section("Operator-wise")
    assert runs.timings.avg_us == 2.9499e06
    squeeze = [row for row in runs.table("Summary by node type").rows if row["node_type"] == "SQUEEZE"]
    assert squeeze[0]["avg_ms"] == 0.016
    s = to_latency_stats(r)
    assert s.median_ms == pytest.approx(2950.34) and s.std_ms == pytest.approx(109.798)
    assert s.noisy  # 1.349 * 109.8 / 2950 > 5%


@samples
def test_09_info_prefix_no_percentiles():
    r = parse_benchmark_output(sample("09"))
    assert (r.init_us, r.first_inference_us, r.warmup_avg_us, r.inference_avg_us) == (530, 124020, 117225, 116066)
    assert r.inference.count == 50 and r.inference.min_us == 111222 and r.inference.p50_us is None
    assert r.memory == {"footprint_delta_init_mb": 3.75, "footprint_delta_overall_mb": 12.1914}
    assert median_basis(r) == "avg" and to_latency_stats(r).median_ms == pytest.approx(116.066)


@samples
def test_10_percentiles_on_main_run():
    r = parse_benchmark_output(sample("10"))
    inf = r.inference
    assert (inf.p5_us, inf.p50_us, inf.p95_us, inf.avg_us) == (1238753, 1239807, 1247415, 1.24027e06)
    assert r.warmup.count == 1 and r.warmup.p50_us == 1357602
    assert r.init_us == 5579 and r.warmup_avg_us == 1.3576e06
    assert r.params["Use xnnpack"] == "0"
    s = to_latency_stats(r)
    assert median_basis(r) == "p50" and s.median_ms == pytest.approx(1239.807)
    assert s.mean_ms == pytest.approx(1240.27) and s.min_ms == pytest.approx(1238.588)
    assert 1238.753 < s.p10_ms < s.median_ms < s.p90_ms < 1247.415


@samples
def test_11_xnnpack_delegate_android():
    r = parse_benchmark_output(sample("11"))
    assert (r.init_us, r.inference_avg_us) == (102320, 699438)
    assert r.inference.p50_us == 576856 and r.inference.max_us == 2270688
    assert {"event": "created", "delegate": "XNNPACK", "for": "CPU"} in r.delegates
    (rep,) = [d for d in r.delegates if d["event"] == "replaced"]
    assert rep == {"event": "replaced", "delegate": "TfLiteXNNPackDelegate", "nodes": 49, "total_nodes": 49,
                   "partitions": 1}
    assert r.memory["footprint_delta_overall_mb"] == 99.2031
    s = to_latency_stats(r)
    assert s.median_ms == pytest.approx(576.856) and s.noisy


@samples
def test_12_two_delegates():
    r = parse_benchmark_output(sample("12"))
    assert (r.init_us, r.first_inference_us, r.warmup_avg_us, r.inference_avg_us) == (5664363, 328140, 319036, 309350)
    assert r.warmup.count == 2 and r.warmup.p50_us == 328140
    applied = {d["delegate"]: d["executes"] for d in r.delegates if d["event"] == "applied"}
    assert applied == {"GPU": "completely", "NNAPI": "none"}
    assert r.params["NNAPI accelerators available"] == "nnapi-reference" and r.num_threads == 2
    assert to_latency_stats(r).median_ms == pytest.approx(307.968)


@samples
def test_13_gpu_delegate_failure_raises_quoting_output():
    with pytest.raises(ProfileParseError, match="Failed to build program executable") as ei:
        parse_benchmark_output(sample("13"))
    assert "--use_gpu=true" in str(ei.value)


# ---- documented shapes without a sample --------------------------------------------------

NEW_OK = """INFO: STARTING!
INFO: Num threads: [1]
INFO: Initialized session in 1.5ms.
INFO: Running benchmark for at least 1 iterations and at least 0.5 seconds but terminate if exceeding 150 seconds.
INFO: count=10 first=2100 curr=2000 min=1990 max=2100 avg=2015.5 std=30

INFO: Running benchmark for at least 50 iterations and at least 1 seconds but terminate if exceeding 150 seconds.
INFO: count=60 first=2005 curr=2001 min=1980 max=2200 avg=2003.25 std=12 p5=1985 median=2000 p95=2030

INFO: Inference timings in us: Init: 1500, First inference: 2100, Warmup (avg): 2015.5, Inference (avg): 2003.25
INFO: Overall peak memory footprint (MB) via periodic monitoring: 13.75
"""


def test_periodic_peak_memory_line():
    r = parse_benchmark_output(NEW_OK)
    assert r.memory == {"peak_periodic_mb": 13.75}


def test_memory_status_at_end_of_execution():
    """LiteRT 2.15+ prints RSS at the end (with the tool's own typo 'exeution')."""
    text = NEW_OK + ("INFO: Memory status at the end of exeution:\nINFO: - VmRSS              : 25 MB\n"
                     "INFO: + RssAnnon           : 18 MB\nINFO: + RssFile + RssShmem : 7 MB\n")
    r = parse_benchmark_output(text)
    assert r.memory == {"peak_periodic_mb": 13.75, "end_vm_rss_mb": 25.0, "end_rss_anon_mb": 18.0,
                        "end_rss_file_shmem_mb": 7.0}
    assert to_latency_stats(r).median_ms == pytest.approx(2.0)


def test_logcat_prefixed_output():
    lines = [f"11-26 02:00:0{i % 10}.123  4242  4242 I tflite  : {ln[6:] if ln.startswith('INFO: ') else ln}"
             for i, ln in enumerate(NEW_OK.splitlines())]
    r = parse_benchmark_output("\n".join(lines))
    assert r.inference.count == 60 and r.inference_avg_us == 2003.25


def test_logcat_brief_prefix():
    lines = [f"I/tflite  ( 4242): {ln[6:] if ln.startswith('INFO: ') else ln}" for ln in NEW_OK.splitlines()]
    r = parse_benchmark_output("\n".join(lines))
    assert r.inference.p50_us == 2000 and r.init_us == 1500


@pytest.mark.parametrize(
    "text, match",
    [
        ("", "empty"),
        ("/system/bin/sh: /data/local/tmp/nagkit/benchmark_model: not found\n", "not found"),
        ("/system/bin/sh: /data/local/tmp/nagkit/benchmark_model: can't execute: Permission denied\n", "Permission"),
        (NEW_OK.split("INFO: Running")[0] + "Segmentation fault\n", "Segmentation fault"),
        ("INFO: STARTING!\nINFO: Loaded model m.tflite\nERROR: Failed to allocate tensors!\n"
         "ERROR: Benchmarking failed.\n", "Failed to allocate tensors"),
        ("INFO: STARTING!\nERROR: Could not open 'missing.tflite'.\nERROR: Failed to mmap model missing.tflite\n",
         "Could not open"),
        (NEW_OK.replace("Inference (avg): 2003.25", "Inference (avg): 0"), "disagrees"),
        (NEW_OK.split("INFO: Inference timings")[0], "no timing summary"),
        ("hello\nworld\n", "no timing summary"),
    ],
)
def test_error_outputs_raise(text, match):
    with pytest.raises(ProfileParseError, match=match):
        parse_benchmark_output(text)


def test_failure_after_a_summary_still_raises():
    with pytest.raises(ProfileParseError, match="Benchmarking failed"):
        parse_benchmark_output(NEW_OK + "ERROR: Benchmarking failed.\n")


def test_two_complete_runs_need_parse_runs():
    with pytest.raises(ProfileParseError, match="holds 2 runs"):
        parse_benchmark_output(NEW_OK + NEW_OK)
    assert [r.inference.count for r in parse_benchmark_runs(NEW_OK + NEW_OK)] == [60, 60]


@samples
@pytest.mark.parametrize("prefix", ["03", "05", "08"])
def test_retyped_tables_without_tabs_parse_the_same(prefix):
    """Samples copied by hand lose their tabs; the tables must still parse row for row."""
    exact = parse_benchmark_output(sample(prefix))
    retyped = parse_benchmark_output(sample(prefix).replace("\t", "  "))
    assert [[t.rows for t in s.tables] for s in retyped.profiling] == [[t.rows for t in s.tables]
                                                                        for s in exact.profiling]
    assert retyped.inference == exact.inference


# ---- hostile output (issue 13) -------------------------------------------------------------

RUNNING = "INFO: Running benchmark for at least 50 iterations and at least 1 seconds.\n"
SUMMARY = "INFO: Inference timings in us: Init: 1500, First inference: 2100, Inference (avg): 2003.25\n"
REAL_COUNT = "count=60 first=2005 curr=2001 min=1980 max=2200 avg=2003.25 std=12 p5=1985 median=2000 p95=2030"


@pytest.mark.parametrize("text", [
    "count=50" + " avg=12345678" * 12 + " p.5=1\n",  # the issue's repro with 12 pairs (8x per pair)
    RUNNING + "INFO: count=50" + " avg=12345678" * 12 + " p.5=1\n" + SUMMARY,
    RUNNING + "INFO: " + REAL_COUNT[:-len(" p95=2030")] + " p9\n",  # a phone that drops mid-print
    "Timings (microseconds): count=50" + " avg=12345678" * 12 + " x\n" + SUMMARY,
])
def test_d1_count_lines_do_not_backtrack(text):
    """D1: `_NUM` repeated inside the count= pattern backtracked exponentially (12 pairs: hours)."""
    with no_hang(30):
        try:
            parse_benchmark_output(text)
        except ProfileParseError:
            pass


@pytest.mark.parametrize("line", [
    "a" + " " * 100_000 + "x",                                      # the `Name: [value]` pattern
    "=" + " " * 100_000 + "x",                                      # table titles
    "Created TensorFlow Lite " + "x delegate for " * 20_000 + "y",  # delegate lines
    "ERROR: " + "Could not open '" * 50_000,                       # fatal lines
])
def test_d1_long_hostile_lines_take_linear_time(line):
    """D1: lazy patterns followed by optional spaces were quadratic in a long line (100 KB: minutes)."""
    with no_hang(30):
        try:
            parse_benchmark_output(RUNNING + "INFO: " + REAL_COUNT + "\n" + line + "\n" + SUMMARY)
        except ProfileParseError:
            pass
        with pytest.raises(ProfileParseError, match="without values"):
            parse_benchmark_output("INFO: Inference timings in us: " + "a" * 200_000 + "\n")


@pytest.mark.parametrize("text, match", [
    (RUNNING + "count=" + "1" * 5000 + " avg=2003.25 std=1\n" + SUMMARY, "not a plausible count"),
    (RUNNING + "count=²\n" + SUMMARY, "not a plausible count"),  # '²'.isdigit() but int('²') fails
    (RUNNING + "count=٦٠ avg=2003.25 std=1\n" + SUMMARY, "not a plausible count"),
    ("² nodes observed\n" + RUNNING + REAL_COUNT + "\n" + SUMMARY, None),
    ("Number of nodes executed: " + "9" * 5000 + "\n" + SUMMARY, "not a plausible count"),
    ("Replacing " + "9" * 5000 + " out of 2 node(s) with delegate (X) node, yielding 1 partitions\n" + SUMMARY,
     "not a plausible count"),
])
def test_d5_huge_and_non_ascii_integers_raise_parse_errors(text, match):
    """D5: a >4,300-digit integer or '²' escaped as a raw ValueError (exit 3 with a traceback hint)."""
    if match is None:
        assert parse_benchmark_output(text).inference.count == 60
    else:
        with pytest.raises(ProfileParseError, match=match) as ei:
            parse_benchmark_output(text)
        assert len(ei.value.message.splitlines()[0]) < 300


def test_d5_num_threads_ignores_non_ascii_digits():
    r = parse_benchmark_output("INFO: Num threads: [²]\n" + RUNNING + REAL_COUNT + "\n" + SUMMARY)
    assert r.num_threads is None
    r = parse_benchmark_output("INFO: Num threads: [" + "9" * 5000 + "]\n" + RUNNING + REAL_COUNT + "\n" + SUMMARY)
    assert r.num_threads is None


@pytest.mark.parametrize("count_line, match", [
    ("count=60 avg=2003.25 std=12 median=1e999", "median=inf"),
    ("count=0 avg=2003.25 std=12", r"count=0 \(no runs\)"),
    ("count=60 avg=2003.25 std=-12", "std=-12"),
    ("count=60 avg=2003.25 std=12 p5=3000 median=2000 p95=1000", "p5 3000 > median 2000"),
    ("count=60 min=2200 max=1980 avg=2003.25 std=12", "min 2200 > max 1980"),
    ("count=60 avg=2003.25 std=nan", None),  # not a number: the line is not a count line at all
])
def test_d6_impossible_statistics_are_refused(count_line, match):
    """D6: to_latency_stats returned a median of inf, n=0, a negative std or p10 > p90."""
    text = RUNNING + "INFO: " + count_line + "\n" + SUMMARY
    if match is None:
        with pytest.raises(ProfileParseError):
            to_latency_stats(parse_benchmark_output(text))
        return
    r = parse_benchmark_output(text)
    with pytest.raises(ProfileParseError, match=match):
        to_latency_stats(r)


def test_d6_heavy_tail_without_min_gives_positive_p10():
    r = parse_benchmark_output(RUNNING + "INFO: count=60 avg=2003.25 std=3000\n" + SUMMARY)
    s = to_latency_stats(r)
    assert 0 < s.p10_ms <= s.median_ms <= s.p90_ms


@pytest.mark.parametrize("line", ["count=1 avg=2003.25 std=0", "count=1 avg=2003.25", "count=1 avg=2003.25 std=0 min=2003.25",
                                  "count=1 avg=2003.25 std=0 curr=2003.25"])
def test_issue35_a_single_run_without_min_max_or_curr(line):
    """`to_latency_stats` raised TypeError on `count=1 avg=2003.25 std=0` (no curr/min/max)."""
    s = to_latency_stats(parse_benchmark_output(RUNNING + "INFO: " + line + "\n" + SUMMARY))
    assert s.n == 1 and s.std_ms == 0 and 0 < s.p10_ms <= s.median_ms <= s.p90_ms
    assert s.median_ms == pytest.approx(2.00325)
    assert stats_problem(s.to_dict()) is None


# ---- property tests (hypothesis; issue 13) ------------------------------------------------


@samples
@given(benchmark_outputs())
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_parser_returns_statistics_a_table_accepts_or_a_parse_error(text):
    check_benchmark(text)


@samples
@pytest.mark.slow
def test_parser_long_fuzz_run():
    """NAGKIT_FUZZ_EXAMPLES inputs (default 500; benchmarks/fuzz/run_fuzz.py runs 100,000)."""
    camp = run_campaign("benchmark_model", fuzz_examples(), seed=13)
    assert camp.failure_count == 0, camp.failures[:5]
    assert camp.inputs >= fuzz_examples() * 0.9
