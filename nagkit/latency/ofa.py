"""Import OFA's per-resolution YAML latency tables (``<r>_lookup_table.yaml``).

OFA keys look like ``expanded_conv-input:28x28x48-output:14x14x96-expand:192-kernel:5-stride:2-
idskip:0-se:0-hs:1`` (``expand`` is the mid channel count), plus ``Conv`` (stem), ``Conv_1``
(final expand), ``AvgPool2D``, ``Conv_2`` (feature mix) and ``Logits``. Each becomes a nagkit
block key scoped to its file's resolution (``r224/<key>``), with OFA's mean as ``mean_ms`` (the
table's prediction stat, so sums reproduce OFA's), its std and count; OFA records no median or
percentiles, so those are null.

The YAML is read with :func:`nagkit.io.load_yaml_bytes` (safe, with caps on size, nesting and
aliases: a few hundred bytes of nested aliases would otherwise expand to a billion values), and
keys are matched with ASCII-only, bounded patterns.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

from nagkit.errors import ArtifactError, BadInputError, short_repr
from nagkit.io import load_yaml_bytes, read_input_file
from nagkit.latency.keys import block_key, scoped
from nagkit.latency.table import LatencyTable
from nagkit.space.space import LayerSpec, SearchSpace

_N = r"(\d{1,7})"  # an ASCII size or count (re.ASCII below); longer is no real layer
_FILE_RE = re.compile(r"(\d{1,6})_lookup_table\.ya?ml", re.ASCII)
_SHAPE = rf"{_N}x{_N}x{_N}"
_MB_RE = re.compile(
    rf"expanded_conv-input:{_SHAPE}-output:{_SHAPE}-expand:{_N}-kernel:{_N}-stride:{_N}"
    r"-idskip:([01])-se:([01])-hs:([01])", re.ASCII)
_PLAIN_RE = re.compile(rf"(Conv|Conv_1|Conv_2|AvgPool2D)-input:{_SHAPE}-output:{_SHAPE}", re.ASCII)
_LOGITS_RE = re.compile(rf"Logits-input:{_SHAPE}-output:{_N}", re.ASCII)
#: The largest OFA table file read (OFA's are about 15 KB).
MAX_OFA_FILE_BYTES = 4 << 20


def ofa_key_to_layer(key: str, space: SearchSpace) -> LayerSpec:
    """The nagkit layer of one OFA key (activations of fixed layers come from ``space``)."""
    m = _MB_RE.fullmatch(key)
    if m:
        h, _, cin, oh, _, cout, mid, k, s, skip, se, hs = map(int, m.groups())
        return LayerSpec("mbconv", h, oh, cin, cout, k=k, stride=s, mid=mid, se=bool(se),
                         act="h_swish" if hs else "relu", skip=bool(skip))
    m = _PLAIN_RE.fullmatch(key)
    if m:
        name = m.group(1)
        h, _, cin, oh, _, cout = map(int, m.groups()[1:])
        if name == "Conv":
            return LayerSpec("stem", h, oh, cin, cout, k=3, stride=space.stem_stride, act=space.stem_act)
        if name == "Conv_1":
            return LayerSpec("final_expand", h, oh, cin, cout, act="h_swish")
        if name == "AvgPool2D":
            return LayerSpec("pool", h, oh, cin, cout, bn=False)
        return LayerSpec("feature_mix", h, oh, cin, cout, act="h_swish", bn=False)
    m = _LOGITS_RE.fullmatch(key)
    if m:
        h, _, cin, cout = map(int, m.groups())
        return LayerSpec("classifier", h, 1, cin, cout, bn=False, bias=True)
    raise BadInputError(f"unrecognised OFA latency key {short_repr(key)}")


def _readme_commit(d: Path) -> str | None:
    for p in (d / "README.md", d.parent / "README.md"):
        if p.is_file():
            m = re.search(r"\b([0-9a-f]{40})\b", p.read_text(errors="replace"))
            if m:
                return m.group(1)
    return None


def import_ofa(directory: str | Path, space: SearchSpace, *, device: dict[str, Any] | None = None,
               check_complete: bool = True) -> LatencyTable:
    """Read every ``<r>_lookup_table.yaml`` in ``directory`` into one :class:`LatencyTable`."""
    d = Path(directory)
    if not d.is_dir():
        raise BadInputError(f"OFA table folder {str(d)!r} does not exist or is not a folder",
                            hint="point at the folder holding 160_lookup_table.yaml, 164_lookup_table.yaml, ... "
                                 "(OFA's note10_lut folder from mit-han-lab/once-for-all)")
    files = sorted((int(m.group(1)), p) for p in d.iterdir() if (m := _FILE_RE.fullmatch(p.name)))
    if not files:
        raise BadInputError(f"no '<resolution>_lookup_table.yaml' files in {str(d)!r}")
    entries: dict[str, dict[str, Any]] = {}
    digests: dict[str, str] = {}
    for r, p in files:
        raw = read_input_file(p, "OFA table", max_bytes=MAX_OFA_FILE_BYTES, error=ArtifactError)
        digests[p.name] = hashlib.sha256(raw).hexdigest()
        data = load_yaml_bytes(raw, what=f"OFA table {str(p)!r}", max_bytes=MAX_OFA_FILE_BYTES)
        if not isinstance(data, dict) or not data:
            raise ArtifactError(f"OFA table {str(p)!r} is empty or not a mapping of key -> stats")
        for okey, v in data.items():
            if not isinstance(okey, str):
                raise ArtifactError(f"OFA table {str(p)!r}: key {short_repr(okey)} is not a string")
            try:
                layer = ofa_key_to_layer(okey, space)
            except BadInputError as e:
                raise ArtifactError(f"{e.message} in {str(p)!r}") from None
            if layer.kind == "stem" and layer.in_hw != r:
                raise ArtifactError(f"OFA table {str(p)!r} (r={r}) has a stem for input {layer.in_hw}")
            if not isinstance(v, dict) or not {"mean", "std", "count"} <= set(v):
                raise ArtifactError(f"OFA table {str(p)!r}: key {short_repr(okey)} needs mean, std and count")
            key = scoped(block_key(layer), r)
            entries[key] = {"median_ms": None, "mean_ms": v["mean"], "std_ms": v["std"],
                            "p10_ms": None, "p90_ms": None, "n": v["count"]}
    from nagkit.version import __version__

    resolutions = [r for r, _ in files]
    table = LatencyTable.create(
        space, entries, stat="mean_ms", resolutions=resolutions,
        device=device or {"spec": "note10", "model": "Samsung Galaxy Note10", "soc": "Snapdragon 855",
                          "note": "measured by the OFA authors"},
        runtime={"name": "tflite", "note": "as measured by OFA (threads/delegate not recorded)"},
        provenance={"source": "ofa-yaml", "dir": str(d), "files_sha256": digests,
                    "upstream": "mit-han-lab/once-for-all", "upstream_commit": _readme_commit(d),
                    "tool": f"nagkit {__version__} lut import-ofa",
                    "note": "OFA records mean/std/count only: mean_ms is the prediction stat; "
                            "median and percentiles are null"})
    if check_complete:
        res_in_space = [r for r in resolutions if r in space.resolutions]
        if not res_in_space:
            raise ArtifactError(f"none of the tables' resolutions ({resolutions}) are in space "
                                f"{space.name!r} ({list(space.resolutions)})",
                                hint="pick the matching space with --space")
        missing = table.missing_keys(space, res_in_space)
        if missing:
            raise ArtifactError(
                f"the OFA tables in {str(d)!r} lack {len(missing)} block(s) that space {space.name!r} "
                f"needs, e.g. {missing[0]!r}", hint="pick the matching space with --space "
                "(OFA's note10 tables are for ofa-mbv3-w1.2)")
    return table
