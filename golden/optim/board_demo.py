"""The UART board demo's protocol and address map, as ``docs/boards.md`` states them (not from ``rtl/``).

Commands are one byte (``OP_*``), answered ``REPLY_OK`` or ``REPLY_BAD``; ``poll`` answers the status
byte (:data:`STATUS_BITS`). Registers are 32-bit words at the word addresses of :data:`REGISTERS`
(``lanes``, ``depth`` and ``cycles`` read-only); tensor ``t`` of :data:`TENSORS` starts at word
:func:`tensor_base`. ``testbenches/test_design_constants.py`` holds ``rtl/board/adam_demo.py`` equal
to these tables.
"""

__all__ = ["OP_WRITE", "OP_READ", "OP_START", "OP_POLL", "REPLY_OK", "REPLY_BAD", "STATUS_BITS", "REGISTERS",
           "TENSORS", "tensor_base"]

OP_WRITE, OP_READ, OP_START, OP_POLL = b"W"[0], b"R"[0], b"S"[0], b"P"[0]
REPLY_OK, REPLY_BAD = b"K"[0], b"?"[0]

#: Status byte bit of each flag (bits 3..6 clear when read).
STATUS_BITS = {"busy": 0, "done": 1, "nonfinite": 2, "framing_error": 3, "overrun": 4, "bad_command": 5,
               "bad_length": 6}

#: Word address of each register: the element count, the two format codes, the Adam scalars of
#: ``golden.optim.step_scalars`` as binary32 bits, then the read-only build and run figures.
REGISTERS = {"n": 0x00, "grad_format": 0x01, "copy_format": 0x02,
             "grad_scale": 0x03, "weight_decay": 0x04, "decay_factor": 0x05, "beta1_weight": 0x06,
             "beta2": 0x07, "one_minus_beta2": 0x08, "bias_correction2_sqrt": 0x09,
             "eps": 0x0A, "neg_step_size": 0x0B,
             "lanes": 0x20, "depth": 0x21, "cycles": 0x22}

TENSORS = ("param", "grad", "exp_avg", "exp_avg_sq", "param16")


def tensor_base(index, depth):
    """Word address of tensor ``index`` of :data:`TENSORS`: regions of ``max(256, depth)`` words."""
    return (index + 1) * max(256, depth)
