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

from dataclasses import dataclass

__all__ = ["Board", "Clock", "get_board", "boards", "reference_board"]


@dataclass(frozen=True)
class Clock:
    """A clock the board or its shell provides.

    Parameters
    ----------
    name : str
        What the clock is (``"kernel"``, ``"oscillator"``, ...).
    hz : float
        Frequency in hertz.
    source : str
        Where the figure comes from.
    """

    name: str
    hz: float
    source: str


@dataclass(frozen=True)
class Board:
    """One device on one board, with the budgets a design must fit.

    Parameters
    ----------
    name : str
        Command-line name (lower case, ``-`` separated).
    title : str
        Human-readable board and device.
    device : str
        FPGA part.
    target : str
        Synthesis target of :mod:`scripts.synth` (``"xcup"`` or ``"ecp5"``).
    budgets : dict
        Available resources, keyed by the target's resource column names.
    sources : dict
        For every key of ``budgets``, the source of the figure.
    clocks : tuple of Clock
        Clocks the board or its shell provides.
    memory : str
        Off-chip memory next to the FPGA.
    platform : str, optional
        ``"module:Class"`` of the ``amaranth_boards`` platform, for boards that
        ``neartrain bitstream`` can build for.
    clock_resource : str, optional
        Platform resource of the input clock the evaluation top multiplies up.
    led : tuple, optional
        ``(resource, number, subsignal or None)`` of the pin the evaluation top drives.
    notes : str
        Caveats in reading the budgets.
    """

    name: str
    title: str
    device: str
    target: str
    budgets: dict
    sources: dict
    clocks: tuple
    memory: str
    platform: str = None
    clock_resource: str = None
    led: tuple = None
    notes: str = ""

    def __post_init__(self):
        from boards.targets import RESOURCE_COLUMNS

        # A budget under a name the synthesis flow never reports could never be checked.
        unknown = set(self.budgets) - set(RESOURCE_COLUMNS[self.target])
        missing = set(self.budgets) ^ set(self.sources)
        if unknown or missing:
            raise ValueError(f"board {self.name}: budgets {sorted(unknown)} are not {self.target} columns "
                             f"or lack a source {sorted(missing)}")

    def load_platform(self):
        """Return an instance of the board's ``amaranth_boards`` platform.

        Raises
        ------
        ValueError
            When the board has no open-toolchain platform (the data-centre cards).
        """
        import importlib

        if self.platform is None:
            with_platform = ", ".join(name for name, board in _catalog().items() if board.platform)
            raise ValueError(f"board {self.name!r} has no open-toolchain platform "
                             f"(boards with one: {with_platform})")
        module_name, class_name = self.platform.split(":")
        return getattr(importlib.import_module(module_name), class_name)()


def _catalog():
    from .catalog import BOARDS

    return BOARDS


def boards():
    """All described boards, by name, in catalogue order."""
    return dict(_catalog())


def get_board(name):
    """Return the :class:`Board` called ``name``.

    Raises
    ------
    ValueError
        When no such board exists; the message lists the known names.
    """
    catalog = _catalog()
    try:
        return catalog[name]
    except KeyError:
        raise ValueError(f"unknown board {name!r} (known: {', '.join(catalog)})") from None


def reference_board(target):
    """The board a sweep for ``target`` is measured against when none is named."""
    from .catalog import REFERENCE

    try:
        return get_board(REFERENCE[target])
    except KeyError:
        raise ValueError(f"no reference board for target {target!r}") from None
