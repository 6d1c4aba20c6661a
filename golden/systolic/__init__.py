"""Reference models for NearTrain's systolic tensor arrays and DPT's layer partitioning.

Topics, one module each: :mod:`.numerics` (PE arithmetic, bit-exact), :mod:`.block_fp` (block
floating point), :mod:`.sparse` (the dissertation's Algorithms 1 and 2, padded-CSR SpMM),
:mod:`.conv` (im2col training GEMMs), :mod:`.cycles` (closed-form cycle model), :mod:`.array_sim`
(register-level schedule models), :mod:`.networks` and :mod:`.partition` (DPT equation 3 sweep).
See docs/systolic.md, Part II.
"""

from .block_fp import block_fp_gemm, from_block_fp, to_block_fp
from .conv import conv2d_backward_data_gemm, conv2d_forward_gemm, conv2d_weight_grad_gemm, im2col
from .cycles import gemm_cycle_terms, gemm_cycles
from .numerics import gemm, gemm_error_bound
from .partition import partition_sweep
from .sparse import choose_pe_kind, padded_csr, plan_tile_rows, sparse_gemm

__all__ = [
    "block_fp_gemm",
    "choose_pe_kind",
    "conv2d_backward_data_gemm",
    "conv2d_forward_gemm",
    "conv2d_weight_grad_gemm",
    "from_block_fp",
    "gemm",
    "gemm_cycle_terms",
    "gemm_cycles",
    "gemm_error_bound",
    "im2col",
    "padded_csr",
    "partition_sweep",
    "plan_tile_rows",
    "sparse_gemm",
    "to_block_fp",
]
