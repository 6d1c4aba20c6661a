"""Systolic tensor arrays: output-stationary and weight-stationary GEMM engines (see docs/systolic.md)."""

from . import (  # noqa: F401  (importing a module registers its blocks)
    block_fp_array,
    block_fp_decoder,
    block_fp_encoder,
    block_fp_ws_array,
    os_array,
    sparse_tensor_array,
    tensor_array,
    tiled_gemm,
    widening_multiplier,
    ws_array,
)
