"""Significand products split into DSP-sized tiles, so each DSP output is registered.

A wide product written as one ``*`` makes the synthesiser split it over several DSP
blocks and add the pieces in LUT carry chains behind them, in the same cycle. On ECP5
(MULT18X18D, about 4 ns) that alone exceeds an 8 ns clock. :class:`TiledProduct` instead
writes each tile as its own plain ``*`` that fits one DSP, so the unit can register the
tiles and add them in the next stage.

Some low bits of one factor may instead be multiplied in LUTs (``lut_bits``), as a sum of
shifted, AND-gated rows that no synthesiser maps to a DSP. On xcup's DSP48E2 (27x18 signed,
so 26x17 unsigned) an f32 significand product with ``tile=24, lut_bits=7`` is one DSP
(24x17) plus seven 24-bit rows, instead of two DSPs (or five with 18-bit tiles).
"""

__all__ = ["TiledProduct", "partial_count", "DEFAULT_TILE", "MIN_TILE", "MAX_TILE"]

# The 18x18 multiplier of ECP5 (and the B port of the Xilinx DSP48).
DEFAULT_TILE = 18
MIN_TILE, MAX_TILE = 8, 64


def _pieces(value, tile):
    # (piece, offset) from the bottom, each at most ``tile`` bits.
    return [(value[offset:offset + tile], offset) for offset in range(0, len(value), tile)]


def _sum_tree(terms):
    # A balanced tree keeps the adder depth at log2 of the term count.
    while len(terms) > 1:
        terms = [terms[k] + terms[k + 1] if k + 1 < len(terms) else terms[k]
                 for k in range(0, len(terms), 2)]
    return terms[0]


def partial_count(a_width, b_width, *, tile=DEFAULT_TILE, lut_bits=0):
    """How many partial products :class:`TiledProduct` registers for these factor widths."""
    dsp_bits = b_width - lut_bits
    dsp_tiles = -(-a_width // tile) * -(-dsp_bits // tile) if dsp_bits else 0
    return dsp_tiles + (lut_bits > 0)


class TiledProduct:
    """The product of two unsigned values as a sum of tile products.

    Parameters
    ----------
    a, b : Value
        Unsigned factors.
    tile : int
        Largest factor width a single DSP block multiplies.
    lut_bits : int
        Low bits of ``b`` multiplied in LUTs (0 to ``len(b)``): their rows of ``a`` are
        summed into one partial, ``partial_lut``; the rest of ``b`` is tiled for DSPs.

    Attributes
    ----------
    partials : dict
        ``{name: partial product}``, to be registered in one pipeline stage.
    single : bool
        True when one tile covers both factors: ``total`` is then the registered partial
        itself and no adder stage is needed.
    """

    def __init__(self, a, b, *, tile=DEFAULT_TILE, lut_bits=0):
        if not 0 <= lut_bits <= len(b):
            raise ValueError(f"lut_bits must be 0 to {len(b)}, not {lut_bits}")
        self.width = len(a) + len(b)
        self._offsets = {}
        self.partials = {}
        if lut_bits:
            rows = [(a & b[bit].replicate(len(a))) << bit for bit in range(lut_bits)]
            self.partials["partial_lut"] = _sum_tree(rows)[:len(a) + lut_bits]
            self._offsets["partial_lut"] = 0
        if lut_bits < len(b):
            for a_piece, a_offset in _pieces(a, tile):
                for b_piece, b_offset in _pieces(b[lut_bits:] if lut_bits else b, tile):
                    name = f"partial_{a_offset}_{b_offset + lut_bits}"
                    self.partials[name] = a_piece * b_piece
                    self._offsets[name] = a_offset + b_offset + lut_bits
        self.single = len(self.partials) == 1

    def total(self, registered):
        """The full product from the registered partials (an object with them as attributes)."""
        terms = [getattr(registered, name) << offset for name, offset in self._offsets.items()]
        return _sum_tree(terms)[:self.width]
