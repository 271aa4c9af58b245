"""Parse the output of TensorFlow Lite / LiteRT's ``benchmark_model`` tool.

Header-driven: every number is taken from the line whose header says what it is, never from
a position or a loose regex over the whole text. Handles every output style seen in the wild
(samples in ``shared/data/benchmark_model/``):

* the oldest summary ``Average inference timings in us: Warmup: W, Init: I, no stats: V``
  and its later form ``..., Inference: V``;
* the new summary ``Inference timings in us: Init: I, First inference: F, Warmup (avg): W,
  Inference (avg): V``;
* ``count=`` lines with or without ``first/min/max/avg/std`` and ``p5/median/p95``, in plain
  or scientific notation (``avg=2.95034e+06``);
* ``INFO:``/``VERBOSE:``/``ERROR:`` prefixes and Android logcat prefixes (``I tflite  : ``);
* memory lines (footprint delta, peak footprint, periodic peak, end-of-run VmRSS/RSS);
* op-profiling sections (Run Order, Top by Computation Time, Summary by node type) parsed
  into rows;
* delegate lines (created, nodes replaced, fully/partially/not executed).

A run counts only if its timing summary line is present. Error output (a failed delegate, a
missing model, a crash) or a run cut off before its summary raises
:class:`~nagkit.errors.ProfileParseError` quoting the output; nothing here returns 0 ms.

Hostile output (a phone that drops mid-print, garbage on the line) must not hang nagkit: every
pattern runs in time linear in its line (no repeated group inside a repeated group; ``key=value``
pairs are split on whitespace and each token matched on its own), digits are ASCII only
(``re.ASCII``: ``'²'`` or ``'٢'`` are not numbers), and an integer too long to be real raises
:class:`~nagkit.errors.ProfileParseError` instead of ``int()``'s ``ValueError``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from nagkit.devices.benchmark_lines import (
    _DELEGATE_APPLIED, _DELEGATE_REPLACED, _FATAL, _INIT_SESSION, _LOADED, _MEM_DELTA, _MEM_END,
    _MEM_END_KEYS, _MEM_PEAK, _MEM_PERIODIC, _MODEL_SIZE, _NODES_EXECUTED, _PROF_TIMINGS_HEAD, _RUNNING,
    _SECTION, _UINT_RE, _clean, _clip, _count_line, _delegate_created, _param, _summary_body, _summary_items,
    _table_title, _uint,
)
from nagkit.devices.benchmark_tables import ParseMiss as _Miss
from nagkit.devices.benchmark_tables import ProfileSection, ProfileTable, TableBuilder
from nagkit.errors import ProfileParseError, short_repr

__all__ = [
    "RunStats",
    "ProfileTable",
    "ProfileSection",
    "BenchmarkResult",
    "parse_benchmark_output",
    "parse_benchmark_runs",
    "to_latency_stats",
    "median_basis",
]

_STAT_KEYS = {"first", "curr", "min", "max", "avg", "std", "p5", "median", "p95"}
_REL_TOL = 1e-3  # summary vs. count-line agreement (6 significant digits are printed)


@dataclass(frozen=True)
class RunStats:
    """One ``count=`` line, in microseconds. Fields the tool did not print are ``None``."""

    count: int
    first_us: float | None = None
    curr_us: float | None = None
    min_us: float | None = None
    max_us: float | None = None
    avg_us: float | None = None
    std_us: float | None = None
    p5_us: float | None = None
    p50_us: float | None = None
    p95_us: float | None = None

    @classmethod
    def from_pairs(cls, count: int, pairs: list[tuple[str, str]], line: str) -> RunStats:
        vals: dict[str, float] = {}
        for key, val in pairs:
            if key not in _STAT_KEYS:
                raise _Miss(f"unknown statistic {short_repr(key)} in line {short_repr(line)}")
            vals[key] = float(val)
        return cls(
            count=count,
            first_us=vals.get("first"),
            curr_us=vals.get("curr"),
            min_us=vals.get("min"),
            max_us=vals.get("max"),
            avg_us=vals.get("avg"),
            std_us=vals.get("std"),
            p5_us=vals.get("p5"),
            p50_us=vals.get("median"),
            p95_us=vals.get("p95"),
        )

    @property
    def mean_us(self) -> float | None:
        """``avg``; for a single run the tool prints only ``curr``, which is then the mean."""
        if self.avg_us is not None:
            return self.avg_us
        return self.curr_us if self.count == 1 else None


@dataclass(frozen=True)
class BenchmarkResult:
    """Everything one ``benchmark_model`` run printed. Times in microseconds, memory in MB."""

    init_us: float | None
    first_inference_us: float | None
    warmup_avg_us: float | None
    inference_avg_us: float
    warmup: RunStats | None
    inference: RunStats | None
    summary_style: str  # "old" (Average inference timings) or "new" (Inference timings)
    memory: dict[str, float] = field(default_factory=dict)
    model_size_mb: float | None = None
    model_path: str | None = None
    params: dict[str, str] = field(default_factory=dict)
    delegates: tuple[dict[str, Any], ...] = ()
    profiling: tuple[ProfileSection, ...] = ()
    warnings: tuple[str, ...] = ()

    @property
    def num_threads(self) -> int | None:
        for key in ("Num threads", "#threads used for CPU inference"):
            val = self.params.get(key, "")
            if _UINT_RE.fullmatch(val.removeprefix("-")):
                return int(val)
        return None

    def section(self, prefix: str) -> ProfileSection:
        for s in self.profiling:
            if s.name.startswith(prefix):
                return s
        raise KeyError(f"no profiling section starting {prefix!r}; sections: {[s.name for s in self.profiling]}")


def _is_benchmark_line(text: str) -> bool:
    return bool(_count_line(text) is not None or _summary_body(text) is not None or _RUNNING.match(text)
                or _table_title(text) is not None)


def _count_stats(text: str, parsed: tuple[str, list[tuple[str, str]]]) -> RunStats:
    count, pairs = parsed
    return RunStats.from_pairs(_uint(count, "count"), pairs, text)


def _split_runs(lines: list[tuple[str, str]]) -> list[list[tuple[str, str]]]:
    """Split at ``STARTING!``. Text before the first one is its own run only if it holds
    benchmark output (an excerpt that starts mid-run); otherwise it is the command echo or a
    shell error and stays with the following run."""
    runs: list[list[tuple[str, str]]] = [[]]
    for lv, text in lines:
        if text == "STARTING!" and runs[-1]:
            runs.append([])
        runs[-1].append((lv, text))
    if len(runs) > 1 and not any(_is_benchmark_line(t) for _, t in runs[0]):
        runs[1] = runs[0] + runs[1]
        runs.pop(0)
    return runs


# --------------------------------------------------------------------------- one run


def _close_to(a: float, b: float) -> bool:
    return abs(a - b) <= _REL_TOL * max(abs(a), abs(b), 1.0)


@dataclass
class _RunScan:
    """What one run's lines say, gathered line by line (:meth:`feed`), then checked and turned
    into a :class:`BenchmarkResult` (:meth:`result`)."""

    params: dict[str, str] = field(default_factory=dict)
    phases: list[RunStats | None] = field(default_factory=list)
    pending_phase: bool = False
    summary: dict[str, float] | None = None
    style: str = ""
    memory: dict[str, float] = field(default_factory=dict)
    init_ms: float | None = None
    model_size: float | None = None
    model_path: str | None = None
    delegates: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    fatal: list[str] = field(default_factory=list)
    sections: list[dict[str, Any]] = field(default_factory=list)
    table: TableBuilder | None = None

    def close_table(self) -> None:
        if self.table is not None:
            if not self.sections:
                self.sections.append({"name": "Operator-wise Profiling Info", "tables": []})
            self.sections[-1]["tables"].append(self.table.build())
            self.table = None

    def feed(self, level: str, text: str) -> None:
        """One cleaned line: a table row, a timing line, or one of :meth:`_info`'s lines."""
        if self.table is not None:
            if self.table.accepts(text):
                self.table.feed(text)
                return
            self.close_table()
        text = text.strip()
        if not text:
            return
        sections = self.sections
        if level == "ERROR" or _FATAL.search(text):
            (self.fatal if _FATAL.search(text) else self.warnings).append(text)
        elif (title := _table_title(text)) is not None:
            self.table = TableBuilder(title)
        elif (m := _SECTION.match(text)):
            sections.append({"name": m.group(1), "tables": []})
        elif (m := _NODES_EXECUTED.match(text)):
            _cur(sections)["nodes_executed"] = _uint(m.group(1), "number of nodes executed")
        elif text.endswith("nodes observed") and text.split()[0].isascii() and text.split()[0].isdigit():
            _cur(sections)["nodes_observed"] = _uint(text.split()[0], "number of nodes observed")
        elif text.startswith(_PROF_TIMINGS_HEAD) and (c := _count_line(text[len(_PROF_TIMINGS_HEAD):])):
            _cur(sections)["timings"] = _count_stats(text, c)
        elif text.startswith("Memory (bytes): count="):
            pass  # the op profiler's memory counter; always count=0 in practice
        elif _RUNNING.match(text):
            if self.pending_phase:
                self.phases.append(None)  # a phase header without a count line
            self.pending_phase = True
        elif (c := _count_line(text)) is not None:
            if not self.pending_phase:
                raise _Miss(f"a count= line without a 'Running benchmark' header before it: {short_repr(text)}")
            self.phases.append(_count_stats(text, c))
            self.pending_phase = False
        elif (sb := _summary_body(text)) is not None:
            if self.summary is not None:
                raise _Miss("two timing summary lines in one run")
            self.style, body = sb
            self.summary = _summary_items(body)
        elif not self._info(text) and ("error" in text.lower() or level == "WARNING"):
            self.warnings.append(text)

    def _info(self, text: str) -> bool:
        """Memory, session, model, delegate and parameter lines; False for any other line."""
        memory = self.memory
        if (m := _MEM_DELTA.match(text)):
            memory["footprint_delta_init_mb"], memory["footprint_delta_overall_mb"] = map(float, m.groups())
        elif (m := _MEM_PEAK.match(text)):
            memory["peak_init_mb"], memory["peak_overall_mb"] = map(float, m.groups())
        elif (m := _MEM_PERIODIC.match(text)):
            memory["peak_periodic_mb"] = float(m.group(1))
        elif (m := _MEM_END.match(text)):  # after "Memory status at the end of exeution:" (sic)
            memory[_MEM_END_KEYS[m.group(1)]] = float(m.group(2))
        elif (m := _INIT_SESSION.match(text)):
            self.init_ms = float(m.group(1))
        elif (m := _MODEL_SIZE.match(text)):
            self.model_size = float(m.group(1))
        elif (m := _LOADED.match(text)):
            self.model_path = m.group(1).strip()
        elif (dc := _delegate_created(text)) is not None:
            self.delegates.append({"event": "created", "delegate": (dc[0] or dc[1]).strip(), "for": dc[1]})
        elif (m := _DELEGATE_REPLACED.match(text)):
            n, total, name, parts = m.groups()
            self.delegates.append({"event": "replaced", "delegate": name, "nodes": _uint(n, "delegated nodes"),
                                   "total_nodes": _uint(total, "total nodes"),
                                   "partitions": _uint(parts, "partitions")})
        elif (m := _DELEGATE_APPLIED.match(text)):
            name = m.group(1) or m.group(3)
            self.delegates.append({"event": "applied", "delegate": name, "executes": m.group(2) or "none"})
        elif (pm := _param(text)) is not None:
            self.params[pm[0].strip()] = pm[1]
        else:
            return False
        return True

    def _checked(self) -> tuple[dict[str, float], RunStats | None, RunStats | None]:
        """(summary, warmup, inference) once the run is known to be complete and consistent."""
        if self.fatal:
            raise _Miss(f"benchmark_model failed: {_clip(self.fatal[0])}",
                        hint="check the model path, the delegate flags and that the binary runs on the device")
        summary = self.summary
        if summary is None:
            errs = [w for w in self.warnings if "error" in w.lower()]
            why = f"; it reported: {_clip(errs[0])}" if errs else ""
            raise _Miss(f"no timing summary ('Inference timings in us' line) in benchmark_model output{why}"
                        " (the run failed or the output was cut off)")
        phases = self.phases + ([None] if self.pending_phase else [])
        if len(phases) > 2:
            raise _Miss(f"{len(phases)} 'Running benchmark' phases in one run, expected warmup + inference")
        warmup = phases[0] if len(phases) == 2 else None
        inference = phases[-1] if phases else None
        if phases and inference is None:
            raise _Miss("the inference phase printed no count= line")
        return summary, warmup, inference

    def result(self) -> BenchmarkResult:
        summary, warmup, inference = self._checked()
        # Map the summary keys (old: Warmup/Init/no stats|Inference; new: Init/First inference/...)
        inf_key = next((k for k in ("Inference (avg)", "Inference", "no stats") if k in summary), None)
        if inf_key is None:
            raise _Miss(f"timing summary has no inference average (keys: {short_repr(sorted(summary), 200)})")
        inf_avg = summary[inf_key]
        warm_avg = summary.get("Warmup (avg)", summary.get("Warmup"))
        if inference is not None and inference.mean_us is not None and not _close_to(inference.mean_us, inf_avg):
            raise _Miss(f"inference average {inference.mean_us} in the count= line disagrees with {inf_avg} in the "
                        "summary")
        if warmup is not None and warm_avg is not None and warmup.mean_us is not None and not _close_to(
                warmup.mean_us, warm_avg):
            raise _Miss(f"warmup average {warmup.mean_us} in the count= line disagrees with {warm_avg} in the summary")
        if not (math.isfinite(inf_avg) and inf_avg > 0):
            raise _Miss(f"non-positive inference average {inf_avg} us")
        return BenchmarkResult(
            init_us=summary.get("Init", self.init_ms * 1000.0 if self.init_ms is not None else None),
            first_inference_us=summary.get("First inference", _first_us(warmup)),
            warmup_avg_us=warm_avg, inference_avg_us=inf_avg, warmup=warmup, inference=inference,
            summary_style=self.style, memory=self.memory, model_size_mb=self.model_size, model_path=self.model_path,
            params=self.params, delegates=tuple(self.delegates),
            profiling=tuple(
                ProfileSection(s["name"], tuple(s["tables"]), s.get("nodes_executed"), s.get("nodes_observed"),
                               s.get("timings"))
                for s in self.sections
            ),
            warnings=tuple(self.warnings),
        )


def _parse_run(lines: list[tuple[str, str]]) -> BenchmarkResult:
    scan = _RunScan()
    for level, text in lines:
        scan.feed(level, text)
    scan.close_table()
    return scan.result()


def _cur(sections: list[dict[str, Any]]) -> dict[str, Any]:
    if not sections:
        sections.append({"name": "Operator-wise Profiling Info", "tables": []})
    return sections[-1]


# --------------------------------------------------------------------------- public API


def parse_benchmark_runs(text: str, *, skip_incomplete: bool = False) -> list[BenchmarkResult]:
    """Every run in ``text`` (one per ``STARTING!``). A run that failed or was cut off
    raises, unless ``skip_incomplete`` (then it is left out; at least one run must parse)."""
    if not text or not text.strip():
        raise ProfileParseError("empty benchmark_model output", text or "",
                                hint="run the command by hand with `adb shell` to see what it prints")
    lines = [_clean(ln) for ln in text.splitlines()]
    results: list[BenchmarkResult] = []
    misses: list[_Miss] = []
    runs = _split_runs(lines)
    for i, run in enumerate(runs):
        try:
            results.append(_parse_run(run))
        except _Miss as e:
            where = f"run {i + 1} of {len(runs)}: " if len(runs) > 1 else ""
            if not skip_incomplete:
                raise ProfileParseError(where + e.message, text, hint=e.hint) from None
            misses.append(e)
    if not results:
        raise ProfileParseError(misses[0].message, text, hint=misses[0].hint)
    return results


def parse_benchmark_output(text: str) -> BenchmarkResult:
    """The one run in a ``benchmark_model`` output; raises :class:`ProfileParseError`
    (quoting the output) on an error, a missing summary or more than one run."""
    runs = parse_benchmark_runs(text)
    if len(runs) != 1:
        raise ProfileParseError(f"benchmark_model output holds {len(runs)} runs, expected one "
                                "(use parse_benchmark_runs for several)", text)
    return runs[0]


def median_basis(result: BenchmarkResult) -> str:
    """``"p50"`` when the tool printed ``median=``, else ``"avg"``: what
    :func:`to_latency_stats` reports as the median."""
    inf = result.inference
    return "p50" if inf is not None and inf.p50_us is not None else "avg"


_Z90 = 1.2815515655446004  # standard normal 90% quantile
_Z95 = 1.6448536269514722
_IQR_PER_STD = 1.3489795003921634


def to_latency_stats(result: BenchmarkResult, target_rel_iqr: float = 0.05):
    """:class:`~nagkit.devices.base.LatencyStats` (ms) from the inference phase.

    ``benchmark_model`` prints summary statistics, not samples, so:

    * median = ``median=`` (p50) when printed, else the average (see :func:`median_basis`);
    * p10/p90 are estimated: from p5/p50/p95 scaled to the normal 10/90% quantiles when those
      are printed, else avg -/+ 1.2816 std; both clipped to [min, max] (when min is not printed:
      median - 3 std, but at least median / 1000);
    * ``noisy`` compares the normal-equivalent IQR (1.349 std) with ``target_rel_iqr``;
    * ``samples_ms`` is empty.

    Raises :class:`ProfileParseError` when the output has only a summary average (no
    per-run ``count=`` line for the inference phase), and when the statistics cannot be real:
    no runs (``count=0``), a non-finite or non-positive median or mean, a negative or
    non-finite std, min > max, or p5 > p95 (a table must never receive such a record).
    """
    from nagkit.devices.base import LatencyStats

    inf = result.inference
    if inf is None or inf.mean_us is None:
        raise ProfileParseError(
            "benchmark_model printed only an average inference time, no per-run statistics (count= line); "
            "cannot give median/std/n", hint="use a benchmark_model build that prints 'count=... avg=... std=...'")
    _check_run_stats(inf)
    mean = inf.mean_us
    std = inf.std_us if inf.std_us is not None else (0.0 if inf.count == 1 else None)
    if std is None:
        raise ProfileParseError(f"inference count= line without std (count={inf.count})")
    med = inf.p50_us if inf.p50_us is not None else mean
    # without a printed min, med - 3 std may be <= 0 for a heavy tail; a latency is > 0
    one = next((v for v in (inf.curr_us, med) if v is not None), med) if inf.count == 1 else None  # the one run
    lo = inf.min_us if inf.min_us is not None else (one if one is not None else max(med - 3 * std, med / 1000))
    hi = inf.max_us if inf.max_us is not None else (one if one is not None else med + 3 * std)
    if inf.p5_us is not None and inf.p95_us is not None and inf.p50_us is not None:
        p10 = med - (med - inf.p5_us) * _Z90 / _Z95
        p90 = med + (inf.p95_us - med) * _Z90 / _Z95
    else:
        p10, p90 = mean - _Z90 * std, mean + _Z90 * std
    p10, p90 = min(max(p10, lo), hi), min(max(p90, lo), hi)
    if med <= 0:
        raise ProfileParseError(f"non-positive median inference time {med} us")
    if not (math.isfinite(p10) and math.isfinite(p90) and 0 < p10 <= p90):
        raise ProfileParseError(f"inconsistent inference statistics: p10 {p10:.6g} us, p90 {p90:.6g} us "
                                f"(from min/max/p5/p95 of the count= line)", hint=_STATS_HINT)
    return LatencyStats(
        median_ms=med / 1000.0,
        mean_ms=mean / 1000.0,
        std_ms=std / 1000.0,
        p10_ms=p10 / 1000.0,
        p90_ms=p90 / 1000.0,
        min_ms=lo / 1000.0,
        n=inf.count,
        samples_ms=(),
        noisy=bool(_IQR_PER_STD * std / med > target_rel_iqr),
    )


_STATS_HINT = "the device printed impossible statistics; rerun the measurement (and check the benchmark binary)"


def _check_run_stats(inf: RunStats) -> None:
    """Refuse statistics no real run produces (a garbled or hostile ``count=`` line)."""
    problems = []
    if inf.count < 1:
        problems.append(f"count={inf.count} (no runs)")
    for name in ("first_us", "curr_us", "min_us", "max_us", "avg_us", "p5_us", "p50_us", "p95_us"):
        v = getattr(inf, name)
        if v is not None and not (math.isfinite(v) and v > 0):
            problems.append(f"{name.removesuffix('_us').replace('p50', 'median')}={v:.6g}")
    if inf.std_us is not None and not (math.isfinite(inf.std_us) and inf.std_us >= 0):
        problems.append(f"std={inf.std_us:.6g}")
    if not problems:
        for a, b in (("min_us", "max_us"), ("p5_us", "p50_us"), ("p50_us", "p95_us"), ("p5_us", "p95_us")):
            va, vb = getattr(inf, a), getattr(inf, b)
            if va is not None and vb is not None and va > vb:
                problems.append(f"{a[:-3].replace('p50', 'median')} {va:.6g} > {b[:-3].replace('p50', 'median')} {vb:.6g}")
                break
    if problems:
        raise ProfileParseError("impossible inference statistics in the count= line: " + ", ".join(problems)
                                + " (latencies must be finite and > 0, std >= 0, at least one run)", hint=_STATS_HINT)


def _first_us(warmup: RunStats | None) -> float | None:
    if warmup is None:
        return None
    if warmup.first_us is not None:
        return warmup.first_us
    return warmup.curr_us if warmup.count == 1 else None
