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


def test_no_message_or_hint_in_the_package_names_a_machine_path():
    """Messages and hints say what to do anywhere, not on the machine nagkit was written on."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "nagkit"
    bad = []
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                if any(m in node.value for m in ("/work/", "/home/", "/root/", "/Users/")):
                    bad.append(f"{path.relative_to(root.parent)}:{node.lineno}: {node.value[:80]!r}")
    assert not bad, "\n".join(bad)
