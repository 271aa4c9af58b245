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
import shutil
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from nagkit.errors import ArtifactError, BadInputError, did_you_mean, reject_unknown_keys, short_repr
from nagkit.nag.config import (BudgetConfig, EvaluatorConfig, FrontierConfig, GeneratorConfig, InferenceConfig,
                               SurrogateConfig,
                               config_from_dict)
from nagkit.app.workspace_config import (_ARTIFACT_KEYS, _DATASET_KEYS, _check_types, _default_artifact,
                                         _inline_space, _read_toml)
from nagkit.resources import ROOT as RESOURCES_DIR
from nagkit.resources import WORKSPACES as PRESETS_DIR
from nagkit.resources import is_shipped
from nagkit.space.space import SearchSpace

log = logging.getLogger(__name__)

CONFIG_NAME = "nagkit.toml"
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
        p = Path(text).expanduser()
        tried = [p] if p.is_absolute() else [self.root / p, RESOURCES_DIR / p, Path.cwd() / p]
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
        if (Path.cwd() / CONFIG_NAME).is_file():
            return _load_file(Path.cwd() / CONFIG_NAME)
        name_or_path = DEFAULT_PRESET  # the embedded default workspace (or the user's copy of it)
    text = str(name_or_path)
    p = Path(text).expanduser()
    if p.is_file():
        return _load_file(p)
    if p.is_dir() and (p / CONFIG_NAME).is_file():
        return _load_file(p / CONFIG_NAME)
    named = find_named(text)
    if named is not None:
        return _load_file(named)
    if p.is_dir():
        raise BadInputError(f"folder {text!r} is not a workspace (no {CONFIG_NAME} in it)",
                            hint=f"make one there: `nagkit init {text} --from {DEFAULT_PRESET}`")
    names = sorted(set(list_presets()) | set(list_user_workspaces()))
    msg = f"workspace {text!r} is neither a folder nor a workspace name"
    if dym := did_you_mean(text, names, n=2, cutoff=0.5):
        msg += f"; {dym}"
    msg += f" Presets: {', '.join(list_presets()) or '(none)'}"
    if list_user_workspaces():
        msg += f"; yours ({user_workspaces_dir()}): {', '.join(list_user_workspaces())}"
    raise BadInputError(msg, hint=f"use one of them, or create one: `nagkit init {text} --from {DEFAULT_PRESET}`")


def init_workspace(dest: str | Path | None, *, source: str | Path | Workspace | None = None,
                   latency_table: str | Path | None = None, resolutions: list[int] | None = None,
                   force: bool = False) -> Workspace:
    """A new user workspace: a copy of ``source`` (a preset or any workspace; default the
    default preset) at ``dest`` (a folder path, or a name under :func:`user_workspaces_dir`;
    default: the source's name). ``latency_table`` re-targets the copy to another table: the
    evaluator, generator and archive belong to the old table and are left out; the dataset (its
    latency recomputed on the new table) and the query journal come along, as accuracies carried
    over (a training then spends ``retarget_queries`` new ones, decisions 37);
    ``resolutions`` narrows the space to those a table covers."""
    src = load_workspace(source)
    src_ref = src.ref  # before the copy exists (a copy of the same name would take the name)
    target = _dest_folder(dest if dest is not None else src.root.name)
    if (target / CONFIG_NAME).exists() and not force:
        raise BadInputError(f"{target} already holds a workspace",
                            hint=f"use it (`--workspace {target}`), pick another name, or pass --force to replace it")
    _check_init_target(target)
    text = (src.root / CONFIG_NAME).read_text(encoding="utf-8")
    skip = set()
    if latency_table is not None:
        table = Path(latency_table).expanduser().resolve()
        if not table.is_file():
            raise BadInputError(f"latency table {str(latency_table)!r} does not exist",
                                hint="make one with `nagkit profile --device D`")
        text = _set_key(text, "latency_table", str(table))
        # the models and the frontier archive belong to the old table; the dataset and the query
        # journal are accuracies, which do not depend on it, so they come along (decisions 37)
        skip = {src.artifact_path(k).resolve() for k in ("evaluator", "generator", "archive")} | {
            src.artifact_path(k).with_suffix(".json").resolve() for k in ("evaluator", "generator")}
    if resolutions is not None:
        text = _set_resolutions(text, src.space.name, sorted(int(r) for r in resolutions))
    header = f"# copied_from: {src_ref} ({src.root})" + ("" if latency_table is None else
                                                          f", re-targeted to {latency_table}")
    _copy_tree(src.root, target, skip, force)
    text = _set_key(_set_key(text, "name", target.name), "copied_from", src_ref)
    (target / CONFIG_NAME).write_text(header + "\n" + text, encoding="utf-8")
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


def _check_init_target(target: Path) -> None:
    """Refuse (exit 2, with or without --force) a destination that is not a workspace and not an
    empty folder: ``--force`` replaces a workspace nagkit wrote, never a user's files (issue 35)."""
    if target.is_symlink() or (target.exists() and not target.is_dir()):
        raise BadInputError(f"{str(target)!r} exists and is not a folder; a workspace is a folder",
                            hint="pick another destination")
    if not target.is_dir() or (target / CONFIG_NAME).is_file():
        return
    try:
        names = sorted(p.name for p in target.iterdir())
    except OSError as e:
        raise BadInputError(f"{str(target)!r} cannot be read: {e.strerror}", hint="pick another destination") from None
    if names:
        shown = ", ".join(repr(n) for n in names[:3]) + (", ..." if len(names) > 3 else "")
        raise BadInputError(f"{str(target)!r} is a folder with {len(names)} entr{'y' if len(names) == 1 else 'ies'} "
                            f"({shown}) and no {CONFIG_NAME}: not a workspace, so nagkit does not write into it "
                            "or replace it (not even with --force)",
                            hint="pick a new folder or name, e.g. `nagkit init my-workspace`")


def dataset_size(frontier: FrontierConfig) -> int:
    """The uniform dataset's default size: a tenth of the training's query budget (501 of 5,010;
    decisions 37), at least 100."""
    return max(100, frontier.total_queries // 10)


def _dest_folder(dest: str | Path) -> Path:
    text = str(dest)
    if "/" in text or os.sep in text or text in (".", ".."):
        return Path(text).expanduser().resolve()
    if not text or text.startswith("."):
        raise BadInputError(f"bad workspace name {text!r}", hint="use letters, digits, '-', '_', '.', '@'")
    return user_workspaces_dir() / text


def _copy_tree(src: Path, dest: Path, skip: set[Path], force: bool) -> None:
    """Copy ``src`` to ``dest`` (files in ``skip`` left out) through a temporary folder, so a
    failure leaves no half-made workspace; when another process made ``dest`` meanwhile (ranks
    under torchrun), its copy is kept."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.part")
    shutil.rmtree(tmp, ignore_errors=True)

    def ignore(folder: str, names: list[str]) -> list[str]:
        return [n for n in names if (Path(folder) / n).resolve() in skip or n.endswith((".lock", ".part"))]

    try:
        shutil.copytree(src, tmp, ignore=ignore)
        for f in tmp.rglob("*"):  # the package's files may be read-only; the copy is the user's
            f.chmod(f.stat().st_mode | 0o200)
        if dest.exists() and force:
            shutil.rmtree(dest)
        try:
            os.replace(tmp, dest)
        except OSError:
            if not (dest / CONFIG_NAME).is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _set_resolutions(text: str, space_name: str, resolutions: list[int]) -> str:
    """``text`` (a nagkit.toml) with the space narrowed to ``resolutions``."""
    import json
    import re

    line = f"resolutions = {json.dumps(resolutions)}"
    sec = re.search(r"^\[space\]\s*$", text, re.M)
    if sec is None:  # space = "NAME": becomes a [space] table on that preset
        text = re.sub(r"^space\s*=.*$\n?", "", text, count=1, flags=re.M)
        return text.rstrip("\n") + f"\n\n[space]\npreset = {json.dumps(space_name)}\n{line}\n"
    nxt = re.search(r"^\[", text[sec.end():], re.M)
    end = sec.end() + nxt.start() if nxt else len(text)
    body = text[sec.end():end]
    if re.search(r"^resolutions\s*=", body, re.M):
        body = re.sub(r"^resolutions\s*=.*$", line, body, count=1, flags=re.M)
    else:
        body = "\n" + line + body
    return text[:sec.end()] + body + text[end:]


def _set_key(text: str, key: str, value: str) -> str:
    """``text`` (a nagkit.toml) with the top-level ``key = value`` set (replaced or added first)."""
    import json
    import re

    line = f"{key} = {json.dumps(value)}"
    pat = re.compile(rf"^{re.escape(key)}\s*=.*$", re.M)
    first_table = re.search(r"^\[", text, re.M)
    head = text[:first_table.start()] if first_table else text
    if pat.search(head):
        return pat.sub(lambda _m: line, head, count=1) + text[len(head):]
    m = re.search(r"^name\s*=.*$", head, re.M)
    at = m.end() + 1 if m else 0
    return text[:at] + line + "\n" + text[at:]


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
    seed = cfg.get("seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise BadInputError(f"{where}: 'seed' must be an integer, got {short_repr(seed)}")
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
