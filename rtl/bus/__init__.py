"""Stream plumbing: pipeline registers, width converters, FIFOs."""

from . import skid_buffer, stream_fifo, width_converter  # noqa: F401  (registers the blocks)
