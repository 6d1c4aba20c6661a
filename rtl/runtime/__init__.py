"""Blocks of the runtime family: the FCsN SmartNIC hardware task runtime (dissertation Ch. 4)."""

from . import classifier  # noqa: F401  (registers the blocks)
