"""Workspaces: a folder with ``nagkit.toml`` binding a space, a latency table, an accuracy
source, optional supernet weights, and the dataset/evaluator/generator artifacts.

Example (``examples/workspaces/ofa-note10/nagkit.toml``)::

    name = "ofa-note10"
    space = "ofa-mbv3-w1.2"                 # or an inline [space] table for a custom space
    latency_table = "latency_tables/note10.json"
    accuracy = "ofa-predictor:../shared/data/ofa-note10/acc_predictor.pth"
    seed = 0

    [artifacts]
    dataset = "dataset.jsonl"
    evaluator = "evaluator.pt"
    generator = "generator.pt"

    [budgets]       # K, optional min_ms/max_ms (default: the dataset's latency range)
    [dataset]       # n, seed
    [evaluator]     # see nagkit.nag.config.EvaluatorConfig
    [generator]     # see nagkit.nag.config.GeneratorConfig
    [inference]     # samples, max_rounds, rerank

Relative input paths are looked up in the workspace folder, then the repository root, then
the current folder (the repo sits next to ``../shared``). Artifacts are written in the
workspace folder. ``latency_table = "synthetic:"`` and ``accuracy = "synthetic:"`` select the
labelled synthetic models of :mod:`nagkit.data.synthetic` (tests, demos).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from nagkit.errors import ArtifactError, BadInputError, did_you_mean, reject_unknown_keys, short_repr
from nagkit.nag.config import (BudgetConfig, EvaluatorConfig, FrontierConfig, GeneratorConfig, InferenceConfig,
                               config_from_dict)
from nagkit.space.space import SearchSpace

CONFIG_NAME = "nagkit.toml"
REPO_ROOT = Path(__file__).resolve().parents[2]
PRESETS_DIR = REPO_ROOT / "examples" / "workspaces"
DEFAULT_PRESET = "fmnist"  # the embedded default workspace (used when no --workspace and no ./nagkit.toml)

_TOP_KEYS = ("name", "description", "space", "latency_table", "accuracy", "accuracy_options", "supernet",
             "seed", "artifacts", "budgets", "dataset", "evaluator", "generator", "frontier", "inference")
_ARTIFACT_KEYS = ("dataset", "evaluator", "generator", "archive")
_DATASET_KEYS = ("n", "seed")


@dataclass(frozen=True)
class DatasetSettings:
    n: int = 16000
    seed: int = 0


@dataclass(frozen=True)
class Workspace:
    root: Path
    name: str
    space: SearchSpace
    latency_table_spec: str
    accuracy_spec: str
    accuracy_options: dict[str, Any] = field(default_factory=dict)
    supernet_spec: str | None = None
    description: str = ""
    seed: int = 0
    artifacts: dict[str, str] = field(default_factory=dict)
    budgets: BudgetConfig = BudgetConfig()
    dataset_settings: DatasetSettings = DatasetSettings()
    evaluator_config: EvaluatorConfig = EvaluatorConfig()
    generator_config: GeneratorConfig = GeneratorConfig()
    frontier_config: FrontierConfig = FrontierConfig()
    inference: InferenceConfig = InferenceConfig()

    # -- paths ---------------------------------------------------------------------------
    def resolve_input(self, text: str, what: str = "file") -> Path:
        """An existing input path: absolute, or relative to the workspace, repo root or cwd."""
        p = Path(text).expanduser()
        tried = [p] if p.is_absolute() else [self.root / p, REPO_ROOT / p, Path.cwd() / p]
        for c in tried:
            if c.exists():
                return c.resolve()
        raise BadInputError(
            f"workspace {self.name!r}: {what} {text!r} not found; looked in "
            + ", ".join(str(t) for t in tried),
            hint=f"fix the path in {self.root / CONFIG_NAME}",
        )

    def artifact_path(self, kind: str) -> Path:
        if kind not in _ARTIFACT_KEYS:
            raise BadInputError(f"unknown artifact {kind!r}; valid: {', '.join(_ARTIFACT_KEYS)}")
        p = Path(self.artifacts.get(kind, _default_artifact(kind))).expanduser()
        return p if p.is_absolute() else self.root / p

    def require_artifact(self, kind: str) -> Path:
        p = self.artifact_path(kind)
        if not p.is_file():
            fix = {"dataset": f"nagkit dataset --workspace {self.ref}",
                   "evaluator": f"nagkit train --workspace {self.ref}",
                   "generator": f"nagkit train --workspace {self.ref}",
                   "archive": f"nagkit train --workspace {self.ref}"}[kind]
            hint = f"create it with `{fix}`"
            raise ArtifactError(f"workspace {self.name!r} has no {kind} yet ({str(p)!r} is missing)", hint=hint)
        return p

    @property
    def ref(self) -> str:
        """How to name this workspace on the command line."""
        try:
            if self.root.resolve() == (PRESETS_DIR / self.name).resolve():
                return self.name
        except OSError:
            pass
        return str(self.root)

    # -- bound objects -------------------------------------------------------------------
    @cached_property
    def latency_table(self):
        spec = self.latency_table_spec
        if spec.startswith("synthetic:"):
            from nagkit.data.synthetic import MacsLatencyTable

            return MacsLatencyTable()
        from nagkit.latency.table import LatencyTable

        table = LatencyTable.load(self.resolve_input(spec, "latency table"))
        if table.space_name != self.space.name:
            raise ArtifactError(
                f"latency table {spec!r} is for space {table.space_name!r}, but workspace {self.name!r} "
                f"uses {self.space.name!r}", hint=f"fix `latency_table` in {self.root / CONFIG_NAME}")
        return table

    def nag_model(self, with_source: bool = True):
        """The trained generator and evaluator (:class:`nagkit.nag.infer.NagModel`), with the
        accuracy source (for ``--search-queries`` and displayed accuracies) unless told not to."""
        from nagkit.nag.infer import NagModel

        paths = {k: self.artifact_path(k) for k in ("evaluator", "generator", "archive")}
        for k in ("evaluator", "generator"):
            self.require_artifact(k)
        return NagModel.load(self.space, self.latency_table, paths,
                             source=self.open_accuracy_source() if with_source else None, inference=self.inference)

    def latency_table_provenance(self) -> dict[str, Any]:
        t = self.latency_table
        if self.latency_table_spec.startswith("synthetic:"):
            return {"spec": self.latency_table_spec, **t.provenance()}
        from nagkit.data.accuracy import file_sha256

        p = self.resolve_input(self.latency_table_spec, "latency table")
        return {"spec": self.latency_table_spec, "path": str(p), "sha256": file_sha256(p),
                "device": getattr(t, "device", {}), "runtime": getattr(t, "runtime", {})}

    def open_accuracy_source(self):
        from nagkit.data.accuracy import open_accuracy_source, split_spec

        scheme, rest = split_spec(self.accuracy_spec)

        def resolve(text: str) -> Path:
            if scheme == "synthetic":
                return Path(text)
            return self.resolve_input(text, f"{scheme} accuracy source")

        return open_accuracy_source(self.accuracy_spec, self.space, resolve=resolve, options=self.accuracy_options)

    def supernet_path(self) -> Path | None:
        return self.resolve_input(self.supernet_spec, "supernet weights") if self.supernet_spec else None

    def summary(self) -> dict[str, Any]:
        return {"name": self.name, "root": str(self.root), "space": self.space.name,
                "latency_table": self.latency_table_spec, "accuracy": self.accuracy_spec,
                "supernet": self.supernet_spec, "seed": self.seed,
                "artifacts": {k: str(self.artifact_path(k)) for k in _ARTIFACT_KEYS}}


def _default_artifact(kind: str) -> str:
    return {"dataset": "dataset.jsonl", "evaluator": "evaluator.pt", "generator": "generator.pt",
            "archive": "archive.jsonl"}[kind]


def list_presets() -> list[str]:
    if not PRESETS_DIR.is_dir():
        return []
    return sorted(p.name for p in PRESETS_DIR.iterdir() if (p / CONFIG_NAME).is_file())


def load_workspace(name_or_path: str | Path | Workspace | None) -> Workspace:
    """Open a workspace by folder, ``nagkit.toml`` path or preset name."""
    if isinstance(name_or_path, Workspace):
        return name_or_path
    if name_or_path is None:
        if (Path.cwd() / CONFIG_NAME).is_file():
            return _load_file(Path.cwd() / CONFIG_NAME)
        if (PRESETS_DIR / DEFAULT_PRESET / CONFIG_NAME).is_file():  # the embedded default workspace
            return _load_file(PRESETS_DIR / DEFAULT_PRESET / CONFIG_NAME)
        raise BadInputError(
            f"no workspace given and the current folder has no {CONFIG_NAME}; presets: "
            f"{', '.join(list_presets()) or '(none)'}",
            hint="pass --workspace ofa-note10 (a preset) or --workspace PATH/TO/FOLDER")
    text = str(name_or_path)
    p = Path(text).expanduser()
    if p.is_file():
        return _load_file(p)
    if p.is_dir():
        if not (p / CONFIG_NAME).is_file():
            raise BadInputError(f"folder {text!r} is not a workspace (no {CONFIG_NAME} in it)",
                                hint=f"copy a preset: cp {PRESETS_DIR / 'ofa-note10' / CONFIG_NAME} {p}/ and edit it")
        return _load_file(p / CONFIG_NAME)
    presets = list_presets()
    if text in presets:
        return _load_file(PRESETS_DIR / text / CONFIG_NAME)
    msg = f"workspace {text!r} is neither a folder nor a preset"
    if dym := did_you_mean(text, presets, n=2, cutoff=0.5):
        msg += f"; {dym}"
    msg += f" Presets: {', '.join(presets) or '(none)'}"
    raise BadInputError(msg, hint=f"use a preset, or create one: mkdir -p {text} && cp "
                                  f"{PRESETS_DIR / 'ofa-note10' / CONFIG_NAME} {text}/ (then edit it)")


def _check_keys(d: dict[str, Any], valid: tuple[str, ...], where: str) -> None:
    reject_unknown_keys(d, valid, where)


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


_TABLE_KEYS = ("artifacts", "accuracy_options", "budgets", "dataset", "evaluator", "generator", "frontier",
               "inference")
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


def _load_file(path: Path) -> Workspace:
    path = path.resolve()
    cfg = _read_toml(path)
    where = str(path)
    _check_keys(cfg, _TOP_KEYS, where)
    for req in ("space", "latency_table", "accuracy"):
        if req not in cfg:
            raise BadInputError(f"{where} is missing {req!r}",
                                hint=f"see {PRESETS_DIR / 'ofa-note10' / CONFIG_NAME} for an example")
    _check_types(cfg, where)
    space_v = cfg["space"]
    if isinstance(space_v, str):
        from nagkit.space.presets import get_space

        space = get_space(space_v)
    elif isinstance(space_v, dict) and "preset" in space_v:  # a preset with some fields changed
        from nagkit.space.presets import get_space

        over = {k: v for k, v in space_v.items() if k != "preset"}
        if not isinstance(space_v["preset"], str):
            raise BadInputError(f"{where}: [space] preset must be a space name, got {str(space_v['preset'])[:40]!r}")
        base = get_space(space_v["preset"]).to_dict()
        bad = sorted(set(over) - set(base))
        if bad:
            names = ', '.join(short_repr(b, 60) for b in bad[:5])
            raise BadInputError(f"{where}: unknown [space] field(s) {names}; valid: "
                                f"preset, {', '.join(sorted(base))}")
        space = _inline_space({**base, **over}, where)
    elif isinstance(space_v, dict):
        space = _inline_space(space_v, where)
    else:
        raise BadInputError(f"{where}: 'space' must be a registered name or a table, got {short_repr(space_v)}")
    for key in ("latency_table", "accuracy"):
        if not isinstance(cfg[key], str) or not cfg[key]:
            raise BadInputError(f"{where}: {key!r} must be a non-empty string, got {short_repr(cfg[key])}")
    arts = cfg.get("artifacts", {})
    _check_keys(arts, _ARTIFACT_KEYS, f"{where} [artifacts]")
    ds = cfg.get("dataset", {})
    _check_keys(ds, _DATASET_KEYS, f"{where} [dataset]")
    seed = cfg.get("seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise BadInputError(f"{where}: 'seed' must be an integer, got {short_repr(seed)}")
    return Workspace(
        root=path.parent,
        name=str(cfg.get("name", path.parent.name)),
        description=str(cfg.get("description", "")),
        space=space,
        latency_table_spec=cfg["latency_table"],
        accuracy_spec=cfg["accuracy"],
        accuracy_options=dict(cfg.get("accuracy_options", {})),
        supernet_spec=cfg.get("supernet") or None,
        seed=seed,
        artifacts={k: str(v) for k, v in arts.items()},
        budgets=config_from_dict(BudgetConfig, cfg.get("budgets"), f"{where} [budgets]"),
        dataset_settings=DatasetSettings(**{"seed": seed, **ds}),
        evaluator_config=config_from_dict(EvaluatorConfig, {"seed": seed, **cfg.get("evaluator", {})},
                                          f"{where} [evaluator]"),
        generator_config=config_from_dict(GeneratorConfig, {"seed": seed, **cfg.get("generator", {})},
                                          f"{where} [generator]"),
        frontier_config=config_from_dict(FrontierConfig, cfg.get("frontier"), f"{where} [frontier]"),
        inference=config_from_dict(InferenceConfig, cfg.get("inference"), f"{where} [inference]"),
    )
