"""Reading a workspace's ``nagkit.toml``: parse it and check every value's type before anything
is built from it (issue 13 D5: a wrong type is one line naming the key and the value, and nothing
is written). Split out of :mod:`nagkit.app.workspace`."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from nagkit.errors import BadInputError, short_repr
from nagkit.space.space import SearchSpace

_ARTIFACT_KEYS = ("dataset", "evaluator", "generator", "archive", "queries")
_DATASET_KEYS = ("n", "seed")


def _default_artifact(kind: str) -> str:
    return {"dataset": "dataset.jsonl", "evaluator": "evaluator.pt", "generator": "generator.pt",
            "archive": "archive.jsonl", "queries": "queries.jsonl"}[kind]


def _read_toml(path: Path) -> dict[str, Any]:
    """The parsed ``nagkit.toml``; a file that is not UTF-8 or not TOML is one line naming it."""
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadInputError(f"workspace config {str(path)!r} is not UTF-8 text (byte {e.start} is "
                            f"{e.object[e.start:e.start + 1]!r})", hint="save it as UTF-8") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise BadInputError(f"workspace config {str(path)!r} is not valid TOML: {e}") from None
    except ValueError:  # tomllib's int() of a number of over 4,300 digits
        raise BadInputError(f"workspace config {str(path)!r} holds a number too long to be real") from None
    except RecursionError:
        raise BadInputError(f"workspace config {str(path)!r} nests too deeply to be a workspace") from None


_TABLE_KEYS = ("artifacts", "accuracy_options", "budgets", "dataset", "surrogate", "evaluator", "generator",
               "frontier", "inference")
_DATASET_N_MAX = 100_000_000


def _check_types(cfg: dict[str, Any], where: str) -> None:
    """Every value of the wrong type is one line naming the key and the value (issue 13 D5)."""
    for key in _TABLE_KEYS:
        if key in cfg and not isinstance(cfg[key], dict):
            raise BadInputError(f"{where}: {key!r} must be a table ([{key}] with key = value lines), "
                                f"got {short_repr(cfg[key])}", hint=f"fix `{key}` in {where}")
    for key in ("name", "description", "supernet"):
        if key in cfg and not isinstance(cfg[key], str):
            raise BadInputError(f"{where}: {key!r} must be a string, got {short_repr(cfg[key])}",
                                hint=f"fix `{key}` in {where}")
    for k, v in cfg.get("artifacts", {}).items():
        if not isinstance(v, str) or not v:
            raise BadInputError(f"{where} [artifacts]: {k!r} must be a non-empty file name, got {short_repr(v)}",
                                hint=f"e.g. {k} = {_default_artifact(k)!r}" if k in _ARTIFACT_KEYS else None)
    for k, v in cfg.get("dataset", {}).items():
        lo = 1 if k == "n" else 0
        hi = _DATASET_N_MAX if k == "n" else 2**63 - 1
        if k in _DATASET_KEYS and not (isinstance(v, int) and not isinstance(v, bool) and lo <= v <= hi):
            raise BadInputError(f"{where} [dataset]: {k!r} must be an integer in {lo}..{hi}, got {short_repr(v)}",
                                hint=f"fix [dataset] {k} in {where}")


def _inline_space(spec: dict[str, Any], where: str) -> SearchSpace:
    """A workspace's own [space] table, checked field by field before it is built."""
    from nagkit.space.spec_check import spec_field_problem

    if "name" not in spec:
        raise BadInputError(f"{where} [space] has no name", hint=f'add name = "my-space" to [space] in {where}')
    if (problem := spec_field_problem(spec)) is not None:
        raise BadInputError(f"{where} [space]: {problem}", hint=f"fix [space] in {where}")
    return SearchSpace.from_dict(spec)
