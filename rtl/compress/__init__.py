"""Blocks of the compress family: Top-K decompression on the FPGA side.

:mod:`.scatter` (``topk_scatter``), :mod:`.chunk_parser` (``topk_chunk_parser``),
:mod:`.chunk_decompressor` (``topk_chunk_decompressor``, the fused-mode front end),
:mod:`.axi_decompressor` (``topk_axi_decompressor``, the same with its AXI4 read master) and
:mod:`.fused_updater_core` (``topk_fused_updater_core``, the front end feeding ``rtl.optim``'s
updater core), :mod:`.topk_updater` (``topk_updater``, the fused kernel with AXI4-Lite control),
:mod:`.dram_scatter` (``topk_dram_scatter``, the paper mode: zero fill and scatter into a dense region
in DRAM); :mod:`.scatter_bank`, :mod:`.flat_pair_parser`, :mod:`.dram_rmw` and :mod:`.layouts` are
their parts.
"""

from . import (  # noqa: F401  (registers the blocks)
    axi_decompressor,
    chunk_decompressor,
    chunk_parser,
    dram_scatter,
    fused_updater_core,
    scatter,
    topk_updater,
)
