"""OFA-compatible elastic MobileNetV3 supernet, static subnets, checkpoints and BN recalibration.

Importing this package needs torch only (no LiteRT, no adb-shell), so CUDA work can use it.
"""

from nagkit.space.layers import layer_input_shape  # re-exported: it lives with LayerSpec
from nagkit.supernet.bn import recalibrate_bn
from nagkit.supernet.checkpoint import load_supernet, read_checkpoint, sha256_file
from nagkit.supernet.network import OFAMobileNetV3
from nagkit.supernet.static import StaticNet, build_layer

__all__ = ["OFAMobileNetV3", "StaticNet", "build_layer", "layer_input_shape", "load_supernet",
           "read_checkpoint", "recalibrate_bn", "sha256_file"]
