"""The latencies the systolic arrays promise, stated once, for the cycle model's expected counts.

The cycle model (:func:`golden.systolic.gemm_cycles`, :func:`golden.systolic.block_fp.block_fp_gemm_cycles`)
takes an array's latencies as parameters. The benches must not read them from the design under
test (a wrong latency attribute would then pass its own cycle check), so they come from here: the
numbers of docs/systolic.md (the element table of Section 1 and the block floating point
derivations of Sections 7c and 7d), written out independently of ``rtl/``.
"""

__all__ = ["array_schedule", "block_fp_schedule", "MULTIPLY_LATENCY", "ADD_LATENCY"]

OS, WS = "output_stationary", "weight_stationary"

# Register stages of a PE's multiplier and adder per element (docs/systolic.md, Section 1).
MULTIPLY_LATENCY = {"f32": 7, "f16": 2, "bf16": 3, "int8": 1}
ADD_LATENCY = {"f32": 6, "f16": 6, "bf16": 6, "int8": 1}
# Block floating point: the block-sum converter and the f32 adder below a block (Sections 7c, 7d),
# and the integer MAC's least cycles per PE row (product and sum registers).
CONVERT_LATENCY = 4
F32_ADD_LATENCY = 6
MIN_INTEGER_LATENCY = 2


def _ceil_div(a, b):
    return -(-a // b)


def array_schedule(element, dataflow=OS, slots=1):
    """The cycle-model keywords of a dense array (os_array, tensor_array, sparse_tensor_array,
    ws_array, tiled_gemm): output stationary ``L = Lm + La + 2`` (shadow write and drain register),
    ``A = La``, ``tile = T``; weight stationary ``L = Lm + La``."""
    multiply, add = MULTIPLY_LATENCY[element], ADD_LATENCY[element]
    if dataflow == OS:
        return {"tile": slots, "mac_latency": multiply + add + 2, "acc_latency": add}
    if dataflow == WS:
        return {"mac_latency": multiply + add}
    raise ValueError(f"unknown dataflow {dataflow!r}")


def block_fp_schedule(*, rows, cols, block, slots=1, dataflow=OS):
    """The keywords of ``block_fp_gemm_cycles`` for a block floating point array.

    Output stationary (Section 7c): ``A = ceil(6 / block)``; the PEs of a row form groups of up to
    ``block`` columns, column ``c = c0 + j`` of a group of g PEs has its final sums ``off(c) = c0 + g
    + j T`` cycles after the row's first block sum, and ``L = 6 + 4 + 6 + max off(c) - cols``.
    Weight stationary (Section 7d): ``L = max(2, ceil(6 / block))`` per PE row, then the converter
    and the f32 adder.
    """
    if dataflow == OS:
        offsets = [c0 + size + j * slots
                   for c0 in range(0, cols, block) for size in [min(block, cols - c0)] for j in range(size)]
        return {"tile": slots, "acc_latency": _ceil_div(F32_ADD_LATENCY, block),
                "mac_latency": 6 + CONVERT_LATENCY + F32_ADD_LATENCY + max(offsets) - cols}
    if dataflow == WS:
        return {"mac_latency": max(MIN_INTEGER_LATENCY, _ceil_div(F32_ADD_LATENCY, block)),
                "convert_latency": CONVERT_LATENCY, "add_latency": F32_ADD_LATENCY}
    raise ValueError(f"unknown dataflow {dataflow!r}")
