"""Golden models of Top-K gradient compression (GPU side) and decompression (FPGA side).

Modules: :mod:`.topk` (compressor, error feedback), :mod:`.layout` (sharding, chunk grouping and the
wire format), :mod:`.scatter` (the scatter-add semantics and error bits the RTL matches),
:mod:`.traffic` (DRAM bytes per parameter), :mod:`.adversarial` (index patterns for the RTL tests).
"""

from .adversarial import ADVERSARIAL_KINDS, adversarial_indices
from .layout import (
    WORD_BYTES,
    chunk_count,
    decode_pairs,
    encode_pairs,
    encode_stream,
    even_shard_bounds,
    group_by_chunk,
    shard_pairs,
)
from .scatter import ScatterErrors, ScatterStatus, scatter, scatter_checked, scatter_stream
from .topk import DEFAULT_BLOCK, ErrorFeedbackCompressor, keep_count, topk_compress
from .traffic import (
    MODES,
    OPTIMIZER_STATE_ARRAYS,
    DramTraffic,
    compressed_fraction,
    dram_bytes_per_parameter,
    dram_traffic,
)
from .values import CANONICAL_NAN_F32, VALUE_FORMATS, canonicalise_nan, value_dtype, widen_to_f32

__all__ = [
    "ADVERSARIAL_KINDS", "adversarial_indices",
    "WORD_BYTES", "chunk_count", "decode_pairs", "encode_pairs", "encode_stream", "even_shard_bounds",
    "group_by_chunk", "shard_pairs",
    "ScatterErrors", "ScatterStatus", "scatter", "scatter_checked", "scatter_stream",
    "DEFAULT_BLOCK", "ErrorFeedbackCompressor", "keep_count", "topk_compress",
    "MODES", "OPTIMIZER_STATE_ARRAYS", "DramTraffic", "compressed_fraction", "dram_bytes_per_parameter",
    "dram_traffic",
    "CANONICAL_NAN_F32", "VALUE_FORMATS", "canonicalise_nan", "value_dtype", "widen_to_f32",
]
