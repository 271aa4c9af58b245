"""Fixtures of the export tests: one tiny real StaticNet exported once to both formats."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def tiny_export(tmp_path_factory):
    """(space, arch, net, ExportResult): a seeded random-init StaticNet at 32x32, ONNX + TFLite.

    Exported with extra given parity inputs, so both the seeded and the given-input checks ran.
    """
    from nagkit.export.exporter import export_model
    from nagkit.export.parity import seeded_inputs
    from nagkit.space import SearchSpace
    from nagkit.supernet import StaticNet

    # Two stages (ReLU without SE, h-swish with SE), 1-2 blocks each: every layer kind of
    # MobileNetV3, but few ops, so litert-torch converts it quickly.
    sp = SearchSpace(name="tiny-export", width_mult=0.5, base_stage_width=(16, 16, 24, 40, 240, 320),
                     stage_strides=(2, 2), stage_acts=("relu", "h_swish"), stage_se=(False, True),
                     depth_list=(1, 2), resolutions=(32,), n_classes=10, dropout=0.0,
                     labels=tuple(f"class{i}" for i in range(10)))
    arch = sp.parse_arch("r32-k5e4-k3e6.k7e3")
    net = StaticNet.from_arch(sp, arch, seed=0)
    extra = seeded_inputs((3, 3, 32, 32), seed=99)
    res = export_model(net, (1, 3, 32, 32), "both", tmp_path_factory.mktemp("tiny-export") / "out", seed=4,
                       parity_inputs=extra)
    return sp, arch, net, res
