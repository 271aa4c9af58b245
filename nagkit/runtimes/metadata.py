"""Names and metadata inside exported model files, so that a model describes itself.

- TFLite: the flatbuffer is rewritten (the TFLite schema from ``ai_edge_litert``) to name the
  input and output tensors and to add one ``Metadata`` entry, :data:`METADATA_KEY`, whose buffer
  is UTF-8 JSON. The standard TFLite Support metadata (a ``TFLITE_METADATA`` entry in the
  ``metadata_schema.fbs`` format, written by ``tflite-support``'s MetadataWriter) needs a
  package nagkit does not depend on, and neither LiteRT 2.3 nor litert-torch 0.10 writes it.
- ONNX: ``metadata_props`` gets the same JSON under the same key (ONNX Runtime reads it as
  ``session.get_modelmeta().custom_metadata_map``).

:func:`read_metadata` reads it back from either format.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from nagkit.errors import ArtifactError

METADATA_KEY = "nagkit.model"
MAX_METADATA_BYTES = 1 << 20


def _dumps(metadata: Mapping[str, Any]) -> bytes:
    data = json.dumps(dict(metadata), sort_keys=True, allow_nan=False).encode()
    if len(data) > MAX_METADATA_BYTES:
        raise ValueError(f"model metadata of {len(data)} bytes is over {MAX_METADATA_BYTES}")
    return data


def set_tflite_io(path: str | os.PathLike, names: tuple[str, str] | None, metadata: Mapping[str, Any] | None) -> None:
    """Rename the single input/output tensor of the first subgraph to ``names`` and add (or
    replace) the :data:`METADATA_KEY` entry; rewrites ``path`` in place."""
    import numpy as np
    from ai_edge_litert import schema_py_generated as fb
    from ai_edge_litert.tools import flatbuffer_utils as fu

    path = Path(path)
    model = fu.read_model_from_bytearray(bytearray(path.read_bytes()))
    if names is not None:
        sg = model.subgraphs[0]
        if len(sg.inputs) != 1 or len(sg.outputs) != 1:
            raise ValueError(f"expected one input and one output, found {len(sg.inputs)} and {len(sg.outputs)}")
        sg.tensors[sg.inputs[0]].name = names[0].encode()
        sg.tensors[sg.outputs[0]].name = names[1].encode()
    if metadata is not None:
        buf = fb.BufferT()
        buf.data = np.frombuffer(_dumps(metadata), dtype=np.uint8)
        model.buffers.append(buf)
        entry = fb.MetadataT()
        entry.name = METADATA_KEY
        entry.buffer = len(model.buffers) - 1
        kept = [m for m in (model.metadata or []) if _text(m.name) != METADATA_KEY]
        model.metadata = kept + [entry]
    path.write_bytes(bytes(fu.convert_object_to_bytearray(model)))


def set_onnx_metadata(model, metadata: Mapping[str, Any]) -> None:
    """Add (or replace) the :data:`METADATA_KEY` entry of an ``onnx.ModelProto``'s metadata_props."""
    kept = [(p.key, p.value) for p in model.metadata_props if p.key != METADATA_KEY]
    del model.metadata_props[:]
    for k, v in kept + [(METADATA_KEY, _dumps(metadata).decode())]:
        p = model.metadata_props.add()
        p.key, p.value = k, v


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, (bytes, bytearray)) else str(v)


def read_metadata(path: str | os.PathLike) -> dict[str, Any] | None:
    """The :data:`METADATA_KEY` JSON of a ``.tflite`` or ``.onnx`` file, or None when it has none."""
    path = Path(path)
    try:
        if path.suffix.lower() == ".onnx":
            import onnx

            props = {p.key: p.value for p in onnx.load(str(path), load_external_data=False).metadata_props}
            raw = props.get(METADATA_KEY)
        else:
            from ai_edge_litert.tools import flatbuffer_utils as fu

            model = fu.read_model_from_bytearray(bytearray(path.read_bytes()))
            raw = next((bytes(model.buffers[m.buffer].data) for m in (model.metadata or [])
                        if _text(m.name) == METADATA_KEY), None)
        if raw is None:
            return None
        if len(raw) > MAX_METADATA_BYTES:
            raise ValueError(f"{len(raw)} bytes is over {MAX_METADATA_BYTES}")
        out = json.loads(raw)
    except Exception as e:  # noqa: BLE001 - any failure reading a user's file means it is corrupt
        raise ArtifactError(f"cannot read the {METADATA_KEY} metadata of {str(path)!r}: {str(e)[:200]}") from None
    if not isinstance(out, dict):
        raise ArtifactError(f"the {METADATA_KEY} metadata of {str(path)!r} is not a JSON object")
    return out
