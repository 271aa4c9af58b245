"""Progress is readable when stderr is no terminal (a CI log, a pipe): plain lines with the
count, the percentage and the elapsed time, the first and the last step of each phase always,
and no bar drawing (no carriage returns or terminal escapes)."""

from __future__ import annotations

import re

from nagkit.progress import phase_progress, progress_bar

PLAIN = re.compile(r"^[\w .:/()-]+: \d+/\d+ \(\d+%\), \d+ s(, eta \d+ s)?$")


def test_progress_bar_writes_plain_lines_when_stderr_is_no_terminal(capsys):
    with progress_bar(True, 3, 0, "blocks", "convert") as advance:
        for key in ("a", "b", "c"):
            advance(key)
    err = capsys.readouterr().err
    assert "\r" not in err and "\x1b" not in err
    lines = err.splitlines()
    assert lines[0].startswith("convert blocks: 0/3 (0%), ") and lines[-1].startswith("convert blocks: 3/3 (100%), ")
    assert all(PLAIN.match(ln) for ln in lines), lines


def test_progress_bar_resumes_from_done_and_stays_silent_when_disabled(capsys):
    with progress_bar(True, 10, 8, "cpu", "profile") as advance:
        advance("x")
        advance("y")
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("profile cpu: 8/10 (80%)") and lines[-1].startswith("profile cpu: 10/10 (100%)")
    with progress_bar(False, 3, 0, "cpu") as advance:
        advance("x")
    assert capsys.readouterr().err == ""


def test_phase_progress_writes_each_phases_first_and_last_step_and_thins_the_rest():
    out: list[str] = []
    update = phase_progress(every_s=1e9, write=out.append)  # no interval passes: only first and last
    for phase, total in (("evaluator", 150), ("generator imitation", 600)):
        for done in range(1, total + 1):
            update(phase, done, total)
    assert [ln.split(",")[0] for ln in out] == ["evaluator: 1/150 (1%)", "evaluator: 150/150 (100%)",
                                                 "generator imitation: 1/600 (0%)",
                                                 "generator imitation: 600/600 (100%)"]
    assert all(PLAIN.match(ln) for ln in out), out
    every = []
    update = phase_progress(every_s=0.0, write=every.append)  # every step
    for done in range(4):
        update("frontier search", done, 3)
    assert len(every) == 4 and every[0].startswith("frontier search: 0/3 (0%)")
