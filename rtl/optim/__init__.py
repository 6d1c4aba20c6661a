"""Blocks of the optim family: the streaming optimizer updaters (Smart-Infinity SmartUpdate)."""

from . import (  # noqa: F401  (registers the blocks)
    axpby,
    chunk_sequencer,
    counted_gearbox,
    counted_width_converter,
    gradient_statistics,
    memory_port,
    updater_core,
    updater_kernel,
)
