"""Docs that read true: docs/decisions.md stays a list of short decisions whose numbers other
files cite, and the README's `make demo` transcript quotes the command the demo runs."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DECISIONS = ROOT / "docs" / "decisions.md"
MAX_LINES = 60


def _decisions() -> dict[int, list[str]]:
    """{number: the entry's lines, from its heading to the line before the next heading}."""
    out: dict[int, list[str]] = {}
    current: list[str] | None = None
    for line in DECISIONS.read_text().splitlines():
        m = re.match(r"## (\d+)\. \S", line)
        if m:
            n = int(m.group(1))
            assert n not in out, f"decision {n} appears twice"
            current = out[n] = []
        if current is not None:
            current.append(line)
    for lines in out.values():
        while lines and not lines[-1].strip():
            lines.pop()
    return out


def test_no_decision_runs_past_60_lines_and_each_names_its_evidence():
    decisions = _decisions()
    assert list(decisions) == list(range(1, len(decisions) + 1)), "numbers are stable: 1..N, in order"
    long = {n: len(lines) for n, lines in decisions.items() if len(lines) > MAX_LINES}
    assert not long, f"decisions over {MAX_LINES} lines (move the investigation to benchmarks/*/README.md): {long}"
    for n, lines in decisions.items():
        text = "\n".join(lines)
        for part in (r"\*\*Context\.\*\*", r"\*\*Decision\b", r"\*\*Consequences\.\*\*", r"\*\*Evidence\.\*\*"):
            assert re.search(part, text), (n, part)


def _tracked_text_files() -> list[Path]:
    try:
        names = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True,
                               text=True, check=True).stdout.split("\n")
    except (OSError, subprocess.CalledProcessError):  # a copy without git: every file under the root
        names = [str(p.relative_to(ROOT)) for p in ROOT.rglob("*") if p.is_file() and ".git" not in p.parts]
    keep = (".py", ".md", ".toml", ".yaml", ".sh")
    return [ROOT / n for n in names if n.endswith(keep) and (ROOT / n).is_file()]


def test_every_cited_decision_exists():
    """Code and docs cite "decisions N" (or "decisions.md N"); every N must be a decision."""
    last = max(_decisions())
    cites = re.compile(r"decisions(?:\.md)?,? (\d+)((?:(?:, | and |–)\d+)*)")
    bad = []
    for path in _tracked_text_files():
        for m in cites.finditer(path.read_text(errors="replace")):
            for n in [m.group(1), *re.findall(r"\d+", m.group(2))]:
                if not 1 <= int(n) <= last:
                    bad.append(f"{path.relative_to(ROOT)}: {m.group(0)}")
    assert not bad, bad


def readme_demo_transcript() -> tuple[str, list[str]]:
    """(the command the README says `make demo` runs, the transcript's stdout lines)."""
    text = (ROOT / "README.md").read_text()
    block = re.search(r"```text\n\$ make demo[^\n]*\n(.*?)```", text, re.S)
    assert block, "README.md has no ```text block starting with `$ make demo`"
    head = re.search(r"```text\n\$ make demo\s+# = (nagkit build [^\n]+?), then test accuracy\n", text)
    assert head, "the README's `$ make demo` line should say `# = nagkit build ..., then test accuracy`"
    lines = [ln for ln in block.group(1).splitlines() if not ln.startswith(("demo: ", "build: "))]
    return head.group(1), lines


def test_readme_demo_command_is_the_demos_own():
    from nagkit.app.demo import default_budget, demo_command

    budget, grid = default_budget()
    command, lines = readme_demo_transcript()
    assert command == demo_command(budget)
    budget_line = next(ln for ln in lines if ln.startswith("budget "))
    assert budget_line.split() == ["budget", f"{budget:g}", "ms", "generator", "range", f"{grid.lo:.2f}..{grid.hi:.2f}",
                                   "ms"]


def test_makefile_demo_runs_the_demo_module():
    make = (ROOT / "Makefile").read_text()
    assert re.search(r"^demo: .*\n\t\$\(BIN\)/python -m nagkit\.cli\.demo$", make, re.M), make

