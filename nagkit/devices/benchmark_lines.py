"""``benchmark_model`` output, line by line: the patterns of each line it prints and the
matchers that read one line each, in time linear in the line (issue 13 D1).

No repeated group sits inside a repeated group; ``key=value`` pairs are split on whitespace
and each token matched on its own; digits are ASCII only (``re.ASCII``: ``'²'`` or ``'٢'`` are
not numbers); an integer too long to be real is a parse miss, not ``int()``'s ``ValueError``.
Used by :mod:`nagkit.devices.benchmark_model`.
"""

from __future__ import annotations

import re

from nagkit.devices.benchmark_tables import NUM as _NUM
from nagkit.devices.benchmark_tables import NUM_RE as _NUM_RE
from nagkit.devices.benchmark_tables import ParseMiss as _Miss
from nagkit.errors import short_repr

_A = re.ASCII  # \d and \w mean ASCII digits and word characters only
_UINT_RE = re.compile(r"\d{1,18}", _A)  # a count or size; longer is not real output
_KV_TOKEN = re.compile(rf"(\w+)=({_NUM})", _A)  # one whitespace-free `key=value` token (fullmatch)
_LOGCAT = re.compile(
    r"^(?:\d\d-\d\d\s+\d\d:\d\d:\d\d\.\d+\s+\d+\s+\d+\s+[VDIWEF]\s+tflite\s*:\s?"  # threadtime
    r"|[VDIWEF]/tflite\s*\(\s*\d+\):\s?)", _A  # brief
)
_LEVEL = re.compile(r"^(INFO|VERBOSE|WARNING|ERROR|DEBUG|FATAL):\s?")
_PARAM_NAME = re.compile(r"[A-Za-z#][^:\[\]]*")
_RUNNING = re.compile(r"^Running benchmark for\b")
_OLD_SUMMARY_HEAD = "Average inference timings in us:"
_NEW_SUMMARY_HEAD = "Inference timings in us:"
_SUMMARY_NAME = re.compile(r"[A-Za-z][A-Za-z ()]*")
_PROF_TIMINGS_HEAD = "Timings (microseconds):"
_INIT_SESSION = re.compile(rf"^Initialized session in ({_NUM})\s*ms\.?$", _A)
_MODEL_SIZE = re.compile(rf"^The input model file size \(MB\):\s*({_NUM})$", _A)
_LOADED = re.compile(r"^Loaded model (.+)$")
_MEM_DELTA = re.compile(
    rf"^Memory footprint delta from the start of the tool \(MB\):\s*init=({_NUM})\s+overall=({_NUM})", _A)
_MEM_PEAK = re.compile(rf"^Peak memory footprint \(MB\):\s*init=({_NUM})\s+overall=({_NUM})", _A)
_MEM_PERIODIC = re.compile(rf"^Overall peak memory footprint \(MB\) via periodic monitoring:\s*({_NUM})", _A)
_MEM_END = re.compile(rf"^[-+]\s*(VmRSS|RssAnnon|RssFile \+ RssShmem)\s*:\s*({_NUM})\s*MB$", _A)
_MEM_END_KEYS = {"VmRSS": "end_vm_rss_mb", "RssAnnon": "end_rss_anon_mb", "RssFile + RssShmem": "end_rss_file_shmem_mb"}
_SECTION = re.compile(r"^(Profiling Info for .+|Operator-wise Profiling Info for .+):$")
_NODES_EXECUTED = re.compile(r"^Number of nodes executed:\s*(\d+)$", _A)
_DELEGATE_CREATED_HEAD = "Created TensorFlow Lite "
_DELEGATE_REPLACED = re.compile(
    r"^Replacing (\d+) out of (\d+) node\(s\) with delegate \((\w+)\) node, yielding (\d+) partitions", _A
)
_DELEGATE_APPLIED = re.compile(
    r"^(?:Explicitly applied (\w+) delegate, and the model graph will be (completely|partially) executed"
    r"|Though (\w+) delegate is explicitly applied, the model graph will not be executed)", _A
)
# Lines that mean the run failed, whatever else was printed.
_FATAL = re.compile(
    r"Benchmarking failed|Failed to allocate tensors|Segmentation fault|Fatal signal|Aborted"
    r"|Permission denied|inaccessible or not found|: not found$|No such file or directory"
    r"|Could not open '|Failed to mmap model|Failed to (?:build|create|apply|initialize)",
    re.IGNORECASE,
)


def _clean(line: str) -> tuple[str, str]:
    """(level, text): strip logcat and ``INFO:``-style prefixes; table rows keep their tabs."""
    line = line.rstrip("\r\n")
    line = _LOGCAT.sub("", line, count=1)
    m = _LEVEL.match(line)
    if m:
        return m.group(1), line[m.end():].rstrip()
    if line.startswith("\t"):
        return "", line.rstrip(" ")
    return "", line.strip()


# --------------------------------------------------------------------------- line matchers
# Plain string operations where a regex would backtrack on a long hostile line.


def _uint(text: str, what: str) -> int:
    """An ASCII unsigned integer of at most 18 digits; anything else is a parse miss."""
    if not _UINT_RE.fullmatch(text):
        raise _Miss(f"{what} {short_repr(text)} is not a plausible count (at most 18 ASCII digits)")
    return int(text)


def _count_line(text: str) -> tuple[str, list[tuple[str, str]]] | None:
    """``count=N key=value ...`` as (N, [(key, value)]): split on whitespace, each token
    matched on its own. None when the line is not a whole count line (e.g. cut off mid-key)."""
    tokens = text.split()
    if not tokens or not tokens[0].startswith("count="):
        return None
    pairs = []
    for tok in tokens[1:]:
        m = _KV_TOKEN.fullmatch(tok)
        if m is None:
            return None
        pairs.append((m.group(1), m.group(2)))
    return tokens[0][len("count="):], pairs


def _summary_body(text: str) -> tuple[str, str] | None:
    """(style, body) of a timing summary line."""
    if text.startswith(_OLD_SUMMARY_HEAD):
        return "old", text[len(_OLD_SUMMARY_HEAD):]
    if text.startswith(_NEW_SUMMARY_HEAD):
        return "new", text[len(_NEW_SUMMARY_HEAD):]
    return None


def _table_title(text: str) -> str | None:
    """The title of ``==== Title ====`` (``=`` runs, whitespace, title, whitespace, ``=`` runs)."""
    inner = text.lstrip("=")
    if len(inner) == len(text) or not inner[:1].isspace():
        return None
    body = inner.rstrip("=")
    if len(body) == len(inner) or not body[-1:].isspace():
        return None
    return body.strip() or None


def _param(text: str) -> tuple[str, str] | None:
    """``Name: [value]`` as (name, value)."""
    name, sep, rest = text.partition(":")
    name, rest = name.rstrip(), rest.strip()
    if not sep or not _PARAM_NAME.fullmatch(name) or len(rest) < 2 or rest[0] != "[" or rest[-1] != "]":
        return None
    return name, rest[1:-1]


def _delegate_created(text: str) -> tuple[str | None, str] | None:
    """``Created TensorFlow Lite [NAME ]delegate for TARGET.`` as (NAME or None, TARGET)."""
    if not text.startswith(_DELEGATE_CREATED_HEAD) or not text.endswith("."):
        return None
    rest = text[len(_DELEGATE_CREATED_HEAD):-1]
    if rest.startswith("delegate for ") and len(rest) > len("delegate for "):
        return None, rest[len("delegate for "):]
    i = rest.find(" delegate for ", 1)
    if i < 1 or i + len(" delegate for ") >= len(rest):
        return None
    return rest[:i], rest[i + len(" delegate for "):]


def _summary_items(body: str) -> dict[str, float]:
    """``Name: value, Name (avg): value, ...``; items that are not a name and a number are skipped."""
    items = {}
    for part in body.split(","):
        name, sep, val = part.partition(":")
        name, val = name.strip(), val.strip()
        if sep and _SUMMARY_NAME.fullmatch(name) and _NUM_RE.fullmatch(val):
            items[name] = float(val)
    if not items:
        raise _Miss(f"timing summary line without values: {short_repr(body.strip())}")
    return items


def _clip(text: str, n: int = 200) -> str:
    return text if len(text) <= n else text[:n] + "..."
