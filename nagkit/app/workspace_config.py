"""Reading a workspace's ``nagkit.toml``: parse it and check every value's type before anything
is built from it (issue 13 D5: a wrong type is one line naming the key and the value, and nothing
is written). Split out of :mod:`nagkit.app.workspace`."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from nagkit.errors import SEED_MAX, BadInputError, short_repr
from nagkit.nag.config import DATASET_N_MAX
from nagkit.space.space import SearchSpace

_ARTIFACT_KEYS = ("dataset", "evaluator", "generator", "archive", "queries")
_DATASET_KEYS = ("n", "seed")


def _default_artifact(kind: str) -> str:
    return {"dataset": "dataset.jsonl", "evaluator": "evaluator.pt", "generator": "generator.pt",
            "archive": "archive.jsonl", "queries": "queries.jsonl"}[kind]


#: The largest nagkit.toml read (the shipped ones are under 4 KB); checked before parsing.
MAX_TOML_BYTES = 1 << 20


def _read_toml(path: Path) -> dict[str, Any]:
    """The parsed ``nagkit.toml`` (a regular file of at most :data:`MAX_TOML_BYTES`); a file that
    is not UTF-8 or not TOML is one line naming it."""
    from nagkit.io import read_input_file, shown_path

    raw = read_input_file(path, "workspace config", max_bytes=MAX_TOML_BYTES)
    name = f"workspace config {shown_path(path)}"
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadInputError(f"{name} is not UTF-8 text (byte {e.start} is "
                            f"{e.object[e.start:e.start + 1]!r})", hint="save it as UTF-8") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise BadInputError(f"{name} is not valid TOML: {e}") from None
    except ValueError:  # tomllib's int() of a number of over 4,300 digits
        raise BadInputError(f"{name} holds a number too long to be real") from None
    except RecursionError:
        raise BadInputError(f"{name} nests too deeply to be a workspace") from None


_TABLE_KEYS = ("artifacts", "accuracy_options", "budgets", "dataset", "surrogate", "evaluator", "generator",
               "frontier", "inference")
_DATASET_N_MAX = DATASET_N_MAX
_NAME_MAX = 255


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
    if len(cfg.get("name", "")) > _NAME_MAX:  # a name is echoed in messages: bounded (issue 35)
        raise BadInputError(f"{where}: 'name' is {len(cfg['name']):,} characters long; at most {_NAME_MAX}",
                            hint=f"fix `name` in {where}")
    for k, v in cfg.get("artifacts", {}).items():
        if not isinstance(v, str) or not v:
            raise BadInputError(f"{where} [artifacts]: {short_repr(k, 60)} must be a non-empty file name, got "
                                f"{short_repr(v)}",
                                hint=f"e.g. {k} = {_default_artifact(k)!r}" if k in _ARTIFACT_KEYS else None)
    for k, v in cfg.get("dataset", {}).items():
        lo = 1 if k == "n" else 0
        hi = _DATASET_N_MAX if k == "n" else SEED_MAX
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
