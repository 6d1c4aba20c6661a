"""Significand products split into DSP-sized tiles, so each DSP output is registered.

A wide product written as one ``*`` makes the synthesiser split it over several DSP
blocks and add the pieces in LUT carry chains behind them, in the same cycle. On ECP5
(MULT18X18D, about 4 ns) that alone exceeds an 8 ns clock. :class:`TiledProduct` instead
writes each tile as its own plain ``*`` that fits one DSP, so the unit can register the
tiles and add them in the next stage.
"""

__all__ = ["TiledProduct", "DEFAULT_TILE", "MIN_TILE", "MAX_TILE"]

# The 18x18 multiplier of ECP5 (and the B port of the Xilinx DSP48).
DEFAULT_TILE = 18
MIN_TILE, MAX_TILE = 8, 64


def _pieces(value, tile):
    # (piece, offset) from the bottom, each at most ``tile`` bits.
    return [(value[offset:offset + tile], offset) for offset in range(0, len(value), tile)]


class TiledProduct:
    """The product of two unsigned values as a sum of tile products.

    Parameters
    ----------
    a, b : Value
        Unsigned factors.
    tile : int
        Largest factor width a single DSP block multiplies.

    Attributes
    ----------
    partials : dict
        ``{name: partial product}``, to be registered in one pipeline stage.
    single : bool
        True when one tile covers both factors: ``total`` is then the registered partial
        itself and no adder stage is needed.
    """

    def __init__(self, a, b, *, tile=DEFAULT_TILE):
        self.width = len(a) + len(b)
        self._offsets = {}
        self.partials = {}
        for a_piece, a_offset in _pieces(a, tile):
            for b_piece, b_offset in _pieces(b, tile):
                name = f"partial_{a_offset}_{b_offset}"
                self.partials[name] = a_piece * b_piece
                self._offsets[name] = a_offset + b_offset
        self.single = len(self.partials) == 1

    def total(self, registered):
        """The full product from the registered partials (an object with them as attributes)."""
        terms = [getattr(registered, name) << offset for name, offset in self._offsets.items()]
        # A balanced tree keeps the adder depth at log2 of the tile count.
        while len(terms) > 1:
            terms = [terms[k] + terms[k + 1] if k + 1 < len(terms) else terms[k]
                     for k in range(0, len(terms), 2)]
        return terms[0][:self.width]
