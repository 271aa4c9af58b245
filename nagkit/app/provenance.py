"""What a bundle's manifest says about where a workspace's numbers came from: the latency
table behind a prediction (its spec, sha256, and the device and runtime it was measured on) and
the split behind an accuracy source's value (dataset, split, number of images)."""

from __future__ import annotations

from typing import Any

# OFA's accuracy predictor was fitted to the accuracies of 16K subnets measured on 10,000
# images held out of ImageNet's training set (Cai et al., Once-for-All, ICLR 2020, sec. 3.4).
OFA_PREDICTOR_SPLIT = ("ImageNet: 10,000 images held out of the training set (the split OFA's accuracy predictor "
                       "was fitted on)", 10_000)


def table_record(ws) -> dict[str, Any]:
    """The latency table a workspace predicts with: spec, sha256, device and runtime."""
    prov = ws.latency_table_provenance()
    return {"spec": str(prov.get("spec") or ws.latency_table_spec), "sha256": prov.get("sha256"),
            "device": dict(prov["device"]) if prov.get("device") else None,
            "runtime": dict(prov["runtime"]) if prov.get("runtime") else None}


def source_record(source, value: float) -> dict[str, Any]:
    """An :func:`~nagkit.export.manifest.accuracy_record` of ``value`` from an accuracy source
    (by its scheme; the supernet's split comes from its recorded options)."""
    from nagkit.export.manifest import accuracy_record

    prov = source.provenance()
    if source.name == "supernet":
        split = str(prov.get("split", "val"))
        images = prov.get("eval_images") or (prov.get("n_val") if split == "val" else 10_000)
        what = "validation split of the training set" if split == "val" else "test set"
        return accuracy_record(value, dataset="fashion-mnist",
                               split=f"{split} ({what}{', a seeded subset' if prov.get('eval_images') else ''})",
                               images=int(images), source=f"accuracy source {source.spec}",
                               evaluated="the subnet in PyTorch with the supernet's weights, BN recalibrated on "
                                         f"{prov.get('calib_images')} training images")
    if source.name == "ofa-predictor":
        split, images = OFA_PREDICTOR_SPLIT
        return accuracy_record(value, dataset="imagenet", split=split, images=images,
                               source=f"accuracy source {source.spec}",
                               evaluated="predicted by OFA's accuracy predictor (no image was run)")
    return accuracy_record(value, dataset=None, split=f"none ({source.name} accuracy)", images=None,
                           source=f"accuracy source {source.spec}", evaluated=f"{source.name} model (no image was run)")
