"""Image data below the supernet: Fashion-MNIST from Debian's IDX files, its splits, the one
preprocessing used for training, evaluation and exported models, and augmentation.

The supernet trains and evaluates on these images, so they live below it; the arch datasets
and accuracy sources of :mod:`nagkit.data` sit above both.
"""
