"""Device and board descriptions: resource budgets, clocks and where each figure comes from.

Budgets are keyed by the resource columns of :data:`boards.targets.RESOURCE_COLUMNS` for
the board's synthesis target, so a sweep can compare a synthesis result with a budget
column by column. Every budget and clock names its source (a seed paper's section or
table, or a vendor data sheet).

Example
-------
>>> from boards import get_board
>>> get_board("smartssd").budgets["DSP48E2"]
1968
"""

from .board import Board, Clock
from .catalog import BOARDS, REFERENCE

__all__ = ["Board", "Clock", "get_board", "boards", "reference_board"]


def boards():
    """All described boards, by name, in catalogue order."""
    return dict(BOARDS)


def get_board(name):
    """Return the :class:`Board` called ``name``.

    Raises
    ------
    ValueError
        When no such board exists; the message lists the known names.
    """
    try:
        return BOARDS[name]
    except KeyError:
        raise ValueError(f"unknown board {name!r} (known: {', '.join(BOARDS)})") from None


def reference_board(target):
    """The board a sweep for ``target`` is measured against when none is named."""
    try:
        return get_board(REFERENCE[target])
    except KeyError:
        raise ValueError(f"no reference board for target {target!r}") from None
