"""Search spaces, the ``Arch`` value type, encodings, sampling and exact counts."""

from nagkit.space.arch import Arch
from nagkit.space.layers import LayerSpec, conv_out, layer_input_shape, make_divisible
from nagkit.space.presets import SPACES, get_space, list_spaces
from nagkit.space.sampling import crossover_arch, mutate_arch, sample, sample_many
from nagkit.space.space import SearchSpace
from nagkit.space.transform import InputTransform

__all__ = [
    "Arch", "InputTransform", "SPACES", "get_space", "list_spaces", "sample", "sample_many", "mutate_arch", "crossover_arch",
    "LayerSpec", "SearchSpace", "conv_out", "layer_input_shape", "make_divisible",
]
