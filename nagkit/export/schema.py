"""A small JSON Schema validator for the subset nagkit's schemas use (no extra dependency).

Supported keywords: ``type`` (a name or a list), ``properties``, ``required``,
``additionalProperties`` (bool or schema), ``minProperties``, ``items``, ``minItems``,
``maxItems``, ``enum``, ``const``, ``pattern``, ``minLength``, ``minimum``, ``maximum``,
``exclusiveMinimum``, ``anyOf``, and ``$ref`` to ``#/$defs/...``. Any other keyword in a schema
raises, so a schema cannot silently rely on something that is not checked. Annotations
(``title``, ``description``, ``$schema``, ``$id``) are ignored.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from nagkit.errors import ArtifactError

_ANNOTATIONS = {"$schema", "$id", "title", "description", "$defs", "$comment", "default", "examples"}
_KEYWORDS = {"type", "properties", "required", "additionalProperties", "minProperties", "items", "minItems",
             "maxItems", "enum", "const", "pattern", "minLength", "minimum", "maximum", "exclusiveMinimum",
             "anyOf", "$ref"}

MANIFEST_SCHEMA_PATH = Path(__file__).with_name("manifest.schema.json")


def _is_type(v: Any, t: str) -> bool:
    if t == "object":
        return isinstance(v, dict)
    if t == "array":
        return isinstance(v, list)
    if t == "string":
        return isinstance(v, str)
    if t == "integer":
        return isinstance(v, int) and not isinstance(v, bool)
    if t == "number":
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    if t == "boolean":
        return isinstance(v, bool)
    if t == "null":
        return v is None
    raise ValueError(f"unsupported JSON Schema type {t!r}")


def _path(base: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{base}[{key}]"
    return f"{base}.{key}" if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key) else f"{base}[{key!r}]"


def _short(v: Any) -> str:
    s = json.dumps(v, default=str)
    return s if len(s) <= 60 else s[:57] + "..."


class Validator:
    def __init__(self, schema: dict[str, Any]):
        self.root = schema
        _check_keywords(schema)

    def errors(self, instance: Any) -> list[str]:
        out: list[str] = []
        self._validate(instance, self.root, "$", out)
        return out

    def _resolve(self, ref: str) -> dict[str, Any]:
        if not ref.startswith("#/"):
            raise ValueError(f"only local $ref (#/...) is supported, got {ref!r}")
        node: Any = self.root
        for part in ref[2:].split("/"):
            node = node[part]
        return node

    def _validate(self, v: Any, s: dict[str, Any], p: str, out: list[str]) -> None:
        if "$ref" in s:
            self._validate(v, self._resolve(s["$ref"]), p, out)
        if "anyOf" in s:
            if not any(not self._sub_errors(v, sub, p) for sub in s["anyOf"]):
                out.append(f"{p}: {_short(v)} matches none of the allowed forms")
        if "type" in s:
            types = s["type"] if isinstance(s["type"], list) else [s["type"]]
            if not any(_is_type(v, t) for t in types):
                out.append(f"{p}: expected {' or '.join(types)}, got {type(v).__name__} {_short(v)}")
                return
        if "const" in s and v != s["const"]:
            out.append(f"{p}: must be {_short(s['const'])}, got {_short(v)}")
        if "enum" in s and v not in s["enum"]:
            out.append(f"{p}: {_short(v)} is not one of {', '.join(_short(e) for e in s['enum'])}")
        if isinstance(v, str):
            if "minLength" in s and len(v) < s["minLength"]:
                out.append(f"{p}: string shorter than {s['minLength']}")
            if "pattern" in s and not re.search(s["pattern"], v):
                out.append(f"{p}: {_short(v)} does not match the pattern {s['pattern']}")
        if _is_type(v, "number"):
            if "minimum" in s and v < s["minimum"]:
                out.append(f"{p}: {v} is below the minimum {s['minimum']}")
            if "maximum" in s and v > s["maximum"]:
                out.append(f"{p}: {v} is above the maximum {s['maximum']}")
            if "exclusiveMinimum" in s and v <= s["exclusiveMinimum"]:
                out.append(f"{p}: {v} must be greater than {s['exclusiveMinimum']}")
        if isinstance(v, list):
            if "minItems" in s and len(v) < s["minItems"]:
                out.append(f"{p}: needs at least {s['minItems']} items, has {len(v)}")
            if "maxItems" in s and len(v) > s["maxItems"]:
                out.append(f"{p}: allows at most {s['maxItems']} items, has {len(v)}")
            if "items" in s:
                for i, item in enumerate(v):
                    self._validate(item, s["items"], _path(p, i), out)
        if isinstance(v, dict):
            for key in s.get("required", []):
                if key not in v:
                    out.append(f"{p}: missing required field {key!r}")
            if "minProperties" in s and len(v) < s["minProperties"]:
                out.append(f"{p}: needs at least {s['minProperties']} entries")
            props = s.get("properties", {})
            extra = s.get("additionalProperties", True)
            for key, val in v.items():
                if key in props:
                    self._validate(val, props[key], _path(p, key), out)
                elif extra is False:
                    out.append(f"{p}: unexpected field {key!r} (allowed: {', '.join(sorted(props))})")
                elif isinstance(extra, dict):
                    self._validate(val, extra, _path(p, key), out)

    def _sub_errors(self, v: Any, s: dict[str, Any], p: str) -> list[str]:
        out: list[str] = []
        self._validate(v, s, p, out)
        return out


def _check_keywords(s: Any) -> None:
    """Refuse schemas that use keywords this validator does not check."""
    if not isinstance(s, dict):
        return
    unknown = set(s) - _KEYWORDS - _ANNOTATIONS
    if unknown:
        raise ValueError(f"schema keyword(s) {sorted(unknown)} are not supported by nagkit.export.schema")
    for key in ("properties", "$defs"):
        for sub in s.get(key, {}).values():
            _check_keywords(sub)
    for key in ("items", "additionalProperties"):
        if isinstance(s.get(key), dict):
            _check_keywords(s[key])
    for sub in s.get("anyOf", []):
        _check_keywords(sub)


@lru_cache(maxsize=1)
def manifest_validator() -> Validator:
    return Validator(json.loads(MANIFEST_SCHEMA_PATH.read_text()))


def validate_manifest(manifest: Any, where: str = "manifest") -> None:
    """Raise :class:`ArtifactError` listing every schema violation of a bundle manifest."""
    errs = manifest_validator().errors(manifest)
    if isinstance(manifest, dict):
        w = manifest.get("weights")
        if isinstance(w, dict) and w.get("sha256") == "random-init" and not w.get("note"):
            errs.append("$.weights: random-init weights need a 'note' saying the model is only for latency checks")
    if errs:
        shown = "; ".join(errs[:8]) + (f"; ... ({len(errs) - 8} more)" if len(errs) > 8 else "")
        raise ArtifactError(f"{where} does not match the bundle manifest schema ({MANIFEST_SCHEMA_PATH.name}): "
                            f"{shown}", hint="rebuild the bundle with `nagkit build` or `nagkit export --bundle`")
