"""The did-you-mean helper every error message uses, and the exit-code table."""

from __future__ import annotations

from nagkit.errors import (EXIT_BAD_INPUT, EXIT_CHECK_FAILED, CheckFailedError, UnknownNameError, close_matches,
                           did_you_mean, exit_code_for)


def test_did_you_mean_phrases_the_close_options():
    assert did_you_mean("thread", ["threads", "cores", "runtime"]) == "did you mean 'threads'?"
    assert did_you_mean("cpux", ["cpu", "cuda", "cpu2"], n=2, cutoff=0.5) == "did you mean 'cpu' or 'cpu2'?"
    assert did_you_mean("zzz", ["cpu", "cuda"]) == ""
    assert close_matches("evolutoin", ["evolution", "random"]) == ["evolution"]


def test_unknown_name_error_uses_the_helper():
    e = UnknownNameError("space", "ofa-mbv3-w1.1", ["ofa-mbv3-w1.0", "ofa-mbv3-w1.2", "fmnist-mbv3-w0.5"])
    assert e.close_matches == close_matches("ofa-mbv3-w1.1", e.options, n=3, cutoff=0.5)
    assert "; did you mean 'ofa-mbv3-w1.2' or 'ofa-mbv3-w1.0'" in e.message and "Valid spaces:" in e.message
    assert exit_code_for(e) == EXIT_BAD_INPUT and exit_code_for(CheckFailedError("x")) == EXIT_CHECK_FAILED
