"""Datapath pieces shared by the floating-point units: leading-zero counts, normalising and
sticky right shifts, and a shared adder/subtractor.

These are plain functions that build combinational expressions; the units place the
pipeline registers around them.
"""

from amaranth.hdl import Cat, Const, Mux, Value

__all__ = ["count_leading_zeros", "block_leading_zeros", "combine_block_leading_zeros", "normalise_left",
           "shift_right_sticky", "one_hot_from_top", "add_or_subtract"]


def _leading_zeros_tree(bits):
    # ``bits`` has a power-of-two width; returns (count of leading zeros mod width, all zero).
    width = len(bits)
    if width == 1:
        return Const(0, 0), ~bits[0]
    half = width // 2
    upper_count, upper_zero = _leading_zeros_tree(bits[half:])
    lower_count, lower_zero = _leading_zeros_tree(bits[:half])
    count = Cat(Mux(upper_zero, lower_count, upper_count), upper_zero)
    return count, upper_zero & lower_zero


def count_leading_zeros(value):
    """Count the zero bits above the most significant one of ``value``.

    Returns an unsigned value wide enough to hold ``len(value)``, which is the result
    for an all-zero input.
    """
    value = Value.cast(value)
    width = len(value)
    padded_width = 1 << (width - 1).bit_length() if width > 1 else 1
    # Ones below the real bits stop the count at ``width`` for an all-zero input.
    padded = Cat(Const((1 << (padded_width - width)) - 1, padded_width - width), value)
    count, all_zero = _leading_zeros_tree(padded)
    if padded_width == width:
        # Without padding an all-zero input would wrap; report ``width`` instead.
        count = Mux(all_zero, width, count)
    return count


def block_leading_zeros(value, block_bits):
    """The first half of a leading-zero count split over two pipeline stages.

    ``value`` is padded with zeros at the bottom to whole blocks of ``2**block_bits`` bits.
    Returns ``{name: value}`` to register: ``lz_count_k`` and ``lz_zero_k`` for each block
    ``k`` (0 is the most significant), for :func:`combine_block_leading_zeros`.
    """
    value = Value.cast(value)
    block = 1 << block_bits
    blocks = -(-len(value) // block)
    padded = Cat(Const(0, blocks * block - len(value)), value)
    fields = {}
    for k in range(blocks):
        count, zero = _leading_zeros_tree(padded[(blocks - 1 - k) * block:(blocks - k) * block])
        fields[f"lz_count_{k}"], fields[f"lz_zero_{k}"] = count, zero
    return fields


def combine_block_leading_zeros(fields, width, block_bits):
    """The second half: ``(count, all_zero)`` from the registered :func:`block_leading_zeros`.

    ``fields`` has the registered values as attributes; ``width`` is the counted value's
    width. ``count`` is meaningless when ``all_zero`` is set.
    """
    blocks = -(-width // (1 << block_bits))
    counts = [getattr(fields, f"lz_count_{k}") for k in range(blocks)]
    zeros = [getattr(fields, f"lz_zero_{k}") for k in range(blocks)]
    index, count = Const(blocks - 1), counts[-1]
    # The first block (from the top) with a one wins.
    for k in reversed(range(blocks - 1)):
        index = Mux(~zeros[k], k, index)
        count = Mux(~zeros[k], counts[k], count)
    return Cat(count[:block_bits], index), Cat(*zeros).all()


def normalise_left(value, shift):
    """Shift ``value`` left by ``shift`` bits inside its own width (zeros enter at the bottom)."""
    value = Value.cast(value)
    return (value << shift)[:len(value)]


def shift_right_sticky(value, shift):
    """Shift ``value`` right by ``shift`` bits, collecting the bits shifted out.

    ``shift`` is unsigned and may exceed ``len(value)``; the result is then zero and
    every set bit lands in the sticky bit.

    Returns
    -------
    (shifted, sticky)
        ``shifted`` has the width of ``value``; ``sticky`` is 1 when a set bit was lost.
    """
    value = Value.cast(value)
    shift = Value.cast(shift)
    width = len(value)
    amount_bits = width.bit_length()
    if len(shift) > amount_bits:
        # Large amounts behave like ``width``: compare once instead of widening the shifter.
        too_far = shift[amount_bits:].any()
        shift = Mux(too_far, width, shift[:amount_bits])
    shifted = value >> shift
    kept_mask = (Const((1 << width) - 1, width) << shift)[:width]
    sticky = (value & ~kept_mask).any()
    return shifted, sticky


def one_hot_from_top(width, position):
    """A ``width``-bit value with only bit ``width - 1 - position`` set (zero if out of range)."""
    return Const(1 << (width - 1), width) >> position


def add_or_subtract(x, y, subtract):
    """``x + y``, or ``x - y`` when ``subtract`` is set, with one adder (``x + ~y + 1``).

    ``y`` must not be wider than ``x``. Returns ``(result, no_borrow)``: ``result`` is
    ``len(x) + 1`` bits, the sum with its carry, or the difference modulo ``2**len(x)``
    with a clear top bit; ``no_borrow`` is 1 when subtracting and ``x >= y``.
    """
    x, y, subtract = Value.cast(x), Value.cast(y), Value.cast(subtract)
    width = len(x)
    raw = x + (y ^ subtract.replicate(width))[:width] + subtract
    return Cat(raw[:width], raw[width] & ~subtract), raw[width] & subtract
