"""Systolic tensor arrays: output-stationary and weight-stationary GEMM engines (see docs/systolic.md)."""

from . import block_fp_decoder, block_fp_encoder, os_array, tiled_gemm, widening_multiplier, ws_array  # noqa: F401  (registers the blocks)
