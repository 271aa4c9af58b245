"""Workspaces: a folder with ``nagkit.toml`` binding a space, a latency table, an accuracy
source, optional supernet weights, and the dataset/evaluator/generator artifacts.

Example (``nagkit/resources/workspaces/ofa-note10/nagkit.toml``)::

    name = "ofa-note10"
    space = "ofa-mbv3-w1.2"                 # or an inline [space] table for a custom space
    latency_table = "latency_tables/note10.json"
    accuracy = "ofa-predictor:ofa/acc_predictor.pth"
    seed = 0

    [artifacts]
    dataset = "dataset.jsonl"
    evaluator = "evaluator.pt"
    generator = "generator.pt"
    archive = "archive.jsonl"
    queries = "queries.jsonl"             # every accuracy training paid for (kept when re-targeted)

    [budgets]       # K, optional min_ms/max_ms (default: the table's whole range)
    [dataset]       # n, seed
    [frontier]      # total_queries: the training's query budget (see nagkit.nag.config.FrontierConfig)
    [surrogate]     # see nagkit.nag.config.SurrogateConfig
    [evaluator]     # see nagkit.nag.config.EvaluatorConfig
    [generator]     # see nagkit.nag.config.GeneratorConfig
    [inference]     # samples, max_rounds, rerank

**Where workspaces are found** (``--workspace NAME_OR_PATH``): a folder or ``nagkit.toml``
path; else a name, looked up first among the user's workspaces (``$NAGKIT_HOME/workspaces``,
default ``~/.local/share/nagkit/workspaces``) and then among the presets shipped in the package
(``nagkit/resources/workspaces``: ``fmnist``, the default, ``ofa-note10``, ``ofa-cpu-w1.0``).
Without ``--workspace``: ``./nagkit.toml``, else the default ``fmnist`` by name.

**Shipped presets are never modified.** A command that writes to a workspace (``nagkit
dataset``, ``train``, ``supernet train``) asks :func:`writable_workspace`: for a preset it copies
the preset folder to the user's workspaces once (copy on first write; ``nagkit init`` makes one
on purpose) and writes there; the user's copy then wins the name lookup. The supernet accuracy
cache of a preset is read, never appended to.

Relative input paths are looked up in the workspace folder, then in the package's shipped data
(:mod:`nagkit.resources`: ``latency_tables/...``, ``ofa/acc_predictor.pth``), then the current
folder. Artifacts are written in the workspace folder. ``latency_table = "synthetic:"`` and
``accuracy = "synthetic:"`` select the labelled synthetic models of :mod:`nagkit.data.synthetic`
(tests, demos).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from nagkit.errors import ArtifactError, BadInputError, check_seed, did_you_mean, reject_unknown_keys, short_repr
from nagkit.io import check_path_text, shown_path
from nagkit.nag.config import (BudgetConfig, EvaluatorConfig, FrontierConfig, GeneratorConfig, InferenceConfig,
                               SurrogateConfig,
                               config_from_dict)
from nagkit.app.workspace_config import (_ARTIFACT_KEYS, _DATASET_KEYS, _check_types, _default_artifact,
                                         _inline_space, _read_toml)
from nagkit.app.workspace_files import (CONFIG_NAME, check_init_target, copy_workspace, dest_folder, set_key,
                                        set_resolutions)
from nagkit.resources import ROOT as RESOURCES_DIR
from nagkit.resources import WORKSPACES as PRESETS_DIR
from nagkit.resources import is_shipped
from nagkit.space.space import SearchSpace

log = logging.getLogger(__name__)

DEFAULT_PRESET = "fmnist"  # the embedded default workspace (used when no --workspace and no ./nagkit.toml)
HOME_ENV = "NAGKIT_HOME"

_TOP_KEYS = ("name", "description", "copied_from", "space", "latency_table", "accuracy", "accuracy_options", "supernet",
             "seed", "artifacts", "budgets", "dataset", "surrogate", "evaluator", "generator", "frontier", "inference")


@dataclass(frozen=True)
class DatasetSettings:
    n: int = 501  # by default a tenth of the training's query budget (dataset_size)
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
    copied_from: str | None = None
    seed: int = 0
    artifacts: dict[str, str] = field(default_factory=dict)
    budgets: BudgetConfig = BudgetConfig()
    dataset_settings: DatasetSettings = DatasetSettings()
    surrogate_config: SurrogateConfig = SurrogateConfig()
    evaluator_config: EvaluatorConfig = EvaluatorConfig()
    generator_config: GeneratorConfig = GeneratorConfig()
    frontier_config: FrontierConfig = FrontierConfig()
    inference: InferenceConfig = InferenceConfig()

    # -- paths ---------------------------------------------------------------------------
    def resolve_input(self, text: str, what: str = "file") -> Path:
        """An existing input path: absolute, or relative to the workspace, the package's shipped
        data (:mod:`nagkit.resources`) or the current folder."""
        hint = f"fix the path in {self.root / CONFIG_NAME}"
        p = check_path_text(text, f"workspace {short_repr(self.name)}: {what}", hint=hint).expanduser()
        tried = [p] if p.is_absolute() else [self.root / p, RESOURCES_DIR / p, Path.cwd() / p]
        for c in tried:
            if check_path_text(c, f"workspace {short_repr(self.name)}: {what}", hint=hint).exists():
                return c.resolve()
        raise BadInputError(
            f"workspace {short_repr(self.name)}: {what} {shown_path(text)} not found; looked in "
            + ", ".join(shown_path(t) for t in tried), hint=hint)

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
        """How to name this workspace on the command line (its name when the name finds it)."""
        try:
            if find_named(self.root.name) == (self.root / CONFIG_NAME).resolve():
                return self.root.name
        except OSError:
            pass
        return str(self.root)

    @property
    def shipped(self) -> bool:
        """A preset inside the installed package: read-only (see :func:`writable_workspace`)."""
        return is_shipped(self.root)

    def describe(self) -> str:
        """One line naming the workspace and where it is (shipped preset, user copy or folder)."""
        where = "shipped preset" if self.shipped else ("your copy" if self.copied_from else "folder")
        return f"{self.ref} ({where}, {self.root})"

    # -- bound objects -------------------------------------------------------------------
    @cached_property
    def latency_table(self):
        spec = self.latency_table_spec
        if spec.startswith("synthetic:"):
            from nagkit.data.synthetic import MacsLatencyTable

            return MacsLatencyTable()
        from nagkit.latency.table import LatencyTable

        from nagkit.io import input_file

        hint = f"fix `latency_table` in {self.root / CONFIG_NAME}"
        table = LatencyTable.load(input_file(self.resolve_input(spec, "latency table"), "latency table", hint=hint))
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

    def table_origin(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """(device, provenance) of the latency table: where and how it was measured."""
        if self.latency_table_spec.startswith("synthetic:"):
            return {"spec": self.latency_table_spec}, {}
        t = self.latency_table
        return dict(t.device), dict(t.provenance)

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

        options = dict(self.accuracy_options)
        if scheme == "supernet" and options.get("cache") and (self.shipped or is_shipped(resolve(rest))):
            options["cache_readonly"] = True  # a preset's files (a shipped checkpoint's cache) are never written
        return open_accuracy_source(self.accuracy_spec, self.space, resolve=resolve, options=options)

    def supernet_path(self) -> Path | None:
        return self.resolve_input(self.supernet_spec, "supernet weights") if self.supernet_spec else None

    def summary(self) -> dict[str, Any]:
        return {"name": self.name, "root": str(self.root), "space": self.space.name,
                "latency_table": self.latency_table_spec, "accuracy": self.accuracy_spec,
                "supernet": self.supernet_spec, "seed": self.seed,
                "artifacts": {k: str(self.artifact_path(k)) for k in _ARTIFACT_KEYS}}


def user_home() -> Path:
    """Where the user's workspaces (and other nagkit data) live: ``$NAGKIT_HOME``, else
    ``$XDG_DATA_HOME/nagkit``, else ``~/.local/share/nagkit``."""
    if os.environ.get(HOME_ENV):
        return Path(os.environ[HOME_ENV]).expanduser()
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "nagkit"


def user_workspaces_dir() -> Path:
    return user_home() / "workspaces"


def list_presets() -> list[str]:
    """The workspaces shipped in the package."""
    if not PRESETS_DIR.is_dir():
        return []
    return sorted(p.name for p in PRESETS_DIR.iterdir() if (p / CONFIG_NAME).is_file())


def list_user_workspaces() -> list[str]:
    d = user_workspaces_dir()
    return sorted(p.name for p in d.iterdir() if (p / CONFIG_NAME).is_file()) if d.is_dir() else []


def find_named(name: str) -> Path | None:
    """The ``nagkit.toml`` a workspace name means: the user's workspace of that name, else the
    shipped preset, else None."""
    if not name or "/" in name or os.sep in name or name in (".", ".."):
        return None
    for d in (user_workspaces_dir(), PRESETS_DIR):
        if (d / name / CONFIG_NAME).is_file():
            return (d / name / CONFIG_NAME).resolve()
    return None


def load_workspace(name_or_path: str | Path | Workspace | None) -> Workspace:
    """Open a workspace by folder, ``nagkit.toml`` path or name (the user's, else a preset)."""
    if isinstance(name_or_path, Workspace):
        return name_or_path
    if name_or_path is None:
        if os.path.lexists(Path.cwd() / CONFIG_NAME):  # a FIFO there is refused, not passed over
            return _load_file(Path.cwd() / CONFIG_NAME)
        name_or_path = DEFAULT_PRESET  # the embedded default workspace (or the user's copy of it)
    text = str(name_or_path)
    p = check_path_text(text, "workspace", hint="give a workspace name or folder").expanduser()
    if p.is_file():
        return _load_file(p)
    if p.is_dir() and (p / CONFIG_NAME).is_file():
        return _load_file(p / CONFIG_NAME)
    named = find_named(text)
    if named is not None:
        return _load_file(named)
    if os.path.lexists(p) and not p.is_dir() or os.path.lexists(p / CONFIG_NAME):
        from nagkit.io import input_file  # a FIFO, a device, a broken link: not read, said what it is

        input_file(p if not p.is_dir() else p / CONFIG_NAME, "workspace config")
    if p.is_dir():
        raise BadInputError(f"folder {shown_path(text)} is not a workspace (no {CONFIG_NAME} in it)",
                            hint=f"make one there: `nagkit init {_arg(text)} --from {DEFAULT_PRESET}`")
    names = sorted(set(list_presets()) | set(list_user_workspaces()))
    msg = f"workspace {shown_path(text)} is neither a folder nor a workspace name"
    if dym := did_you_mean(text, names, n=2, cutoff=0.5):
        msg += f"; {dym}"
    msg += f" Presets: {', '.join(list_presets()) or '(none)'}"
    if list_user_workspaces():
        msg += f"; yours ({user_workspaces_dir()}): {', '.join(list_user_workspaces())}"
    raise BadInputError(msg, hint=f"use one of them, or create one: `nagkit init {_arg(text)} --from {DEFAULT_PRESET}`")


def _arg(text: str) -> str:
    """``text`` as a shell argument in a hint's command (quoted when it must be; shortened)."""
    import shlex

    from nagkit.errors import short_text

    return shlex.quote(short_text(text, 120))


def init_workspace(dest: str | Path | None, *, source: str | Path | Workspace | None = None,
                   latency_table: str | Path | None = None, resolutions: list[int] | None = None,
                   force: bool = False) -> Workspace:
    """A new user workspace: a copy of ``source`` (a preset or any workspace; default the
    default preset) at ``dest`` (a folder path, or a name under :func:`user_workspaces_dir`;
    default: the source's name). ``latency_table`` re-targets the copy to another table (read
    and checked now: a table of another space, or not a table, is refused): the evaluator,
    generator and archive belong to the old table and are left out; the dataset (its latency
    recomputed on the new table) and the query journal come along, as accuracies carried over (a
    training then spends ``retarget_queries`` new ones, decisions 37); ``resolutions`` narrows
    the space to those a table covers. Nothing is written when any check fails
    (:mod:`nagkit.app.workspace_files`)."""
    src = load_workspace(source)
    src_ref = src.ref  # before the copy exists (a copy of the same name would take the name)
    target = dest_folder(dest if dest is not None else src.root.name, user_workspaces_dir())
    if (target / CONFIG_NAME).exists() and not force:
        raise BadInputError(f"{target} already holds a workspace",
                            hint=f"use it (`--workspace {target}`), pick another name, or pass --force to replace it")
    check_init_target(target)
    text = (src.root / CONFIG_NAME).read_text(encoding="utf-8")
    skip = set()
    if latency_table is not None:
        table = _checked_table(latency_table, src)
        text = set_key(text, "latency_table", str(table))
        # the models and the frontier archive belong to the old table; the dataset and the query
        # journal are accuracies, which do not depend on it, so they come along (decisions 37)
        skip = {src.artifact_path(k).resolve() for k in ("evaluator", "generator", "archive")} | {
            src.artifact_path(k).with_suffix(".json").resolve() for k in ("evaluator", "generator")}
    if resolutions is not None:
        text = set_resolutions(text, src.space.name, sorted(int(r) for r in resolutions))
    header = f"# copied_from: {src_ref} ({src.root})" + ("" if latency_table is None else
                                                          f", re-targeted to {latency_table}")
    text = set_key(set_key(text, "name", target.name), "copied_from", src_ref)
    copy_workspace(src.root, target, skip, force, " ".join(header.splitlines()) + "\n" + text, check=_load_file)
    made = _load_file(target / CONFIG_NAME)
    if latency_table is not None:
        _relabel_carried(made)
    return made


def _relabel_carried(ws: Workspace) -> None:
    """A re-targeted copy's dataset, its latency recomputed on the new table and marked as
    carried over (no accuracy query; :func:`nagkit.data.dataset.relabel`)."""
    from nagkit.data.dataset import relabel

    ds = ws.artifact_path("dataset")
    if ds.is_file():
        relabel(ds, ds, space=ws.space, table=ws.latency_table, table_prov=ws.latency_table_provenance())


def _checked_table(latency_table: str | Path, src: Workspace) -> Path:
    """The table ``nagkit init --latency-table`` re-targets to, read and checked (a regular file
    under the table cap, valid, of the source's space) before anything is written."""
    from nagkit.latency.table import LatencyTable

    table = LatencyTable.load(Path(latency_table).expanduser())
    if table.space_name != src.space.name:
        raise BadInputError(f"latency table {shown_path(latency_table)} is for space {table.space_name!r}, but workspace "
                            f"{src.name!r} uses {src.space.name!r}",
                            hint=f"profile this device for that space: `nagkit profile --device D --space "
                                 f"{src.space.name}`")
    return Path(latency_table).expanduser().resolve()


def writable_workspace(ws: Workspace, what: str) -> Workspace:
    """``ws`` itself, or for a shipped preset the user's copy of it (made now if missing):
    ``what`` (e.g. "nagkit train") then writes there and the preset stays as shipped."""
    if not ws.shipped:
        return ws
    dest = user_workspaces_dir() / ws.root.name
    if (dest / CONFIG_NAME).is_file():
        copy = _load_file(dest / CONFIG_NAME)
    else:
        copy = init_workspace(dest, source=ws)
        log.warning("workspace %s is shipped with nagkit and never modified: %s writes to your copy %s "
                    "(made now; `--workspace %s` finds it from now on)", ws.name, what, dest, ws.root.name)
    return copy


def dataset_size(frontier: FrontierConfig) -> int:
    """The uniform dataset's default size: a tenth of the training's query budget (501 of 5,010;
    decisions 37), at least 100."""
    return max(100, frontier.total_queries // 10)


def _check_keys(d: dict[str, Any], valid: tuple[str, ...], where: str) -> None:
    reject_unknown_keys(d, valid, where)


def _load_file(path: Path) -> Workspace:
    path = path.resolve()
    cfg = _read_toml(path)
    where = str(path)
    _check_keys(cfg, _TOP_KEYS, where)
    for req in ("space", "latency_table", "accuracy"):
        if req not in cfg:
            raise BadInputError(f"{where} is missing {req!r}",
                                hint=f"see {PRESETS_DIR / DEFAULT_PRESET / CONFIG_NAME} for an example")
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
    seed = check_seed(cfg.get("seed", 0), f"{where}: 'seed'", hint=f"fix `seed` in {where}")
    frontier = config_from_dict(FrontierConfig, cfg.get("frontier"), f"{where} [frontier]")
    return Workspace(
        root=path.parent,
        name=str(cfg.get("name", path.parent.name)),
        description=str(cfg.get("description", "")),
        copied_from=str(cfg["copied_from"]) if cfg.get("copied_from") else None,
        space=space,
        latency_table_spec=cfg["latency_table"],
        accuracy_spec=cfg["accuracy"],
        accuracy_options=dict(cfg.get("accuracy_options", {})),
        supernet_spec=cfg.get("supernet") or None,
        seed=seed,
        artifacts={k: str(v) for k, v in arts.items()},
        budgets=config_from_dict(BudgetConfig, cfg.get("budgets"), f"{where} [budgets]"),
        dataset_settings=DatasetSettings(**{"seed": seed, "n": dataset_size(frontier), **ds}),
        surrogate_config=config_from_dict(SurrogateConfig, {"seed": seed, **cfg.get("surrogate", {})},
                                          f"{where} [surrogate]"),
        evaluator_config=config_from_dict(EvaluatorConfig, {"seed": seed, **cfg.get("evaluator", {})},
                                          f"{where} [evaluator]"),
        generator_config=config_from_dict(GeneratorConfig, {"seed": seed, **cfg.get("generator", {})},
                                          f"{where} [generator]"),
        frontier_config=frontier,
        inference=config_from_dict(InferenceConfig, cfg.get("inference"), f"{where} [inference]"),
    )
