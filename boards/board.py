"""What describes a board: its resource budgets, clocks and the source of every figure."""

import importlib
from dataclasses import dataclass

from .targets import RESOURCE_COLUMNS

__all__ = ["Board", "Clock"]


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
        Synthesis target of :mod:`scripts.flow.synth` (``"xcup"`` or ``"ecp5"``).
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
        if self.platform is None:
            raise ValueError(f"board {self.name!r} has no open-toolchain platform "
                             f"(`neartrain boards` lists the boards with one)")
        module_name, class_name = self.platform.split(":")
        # The platform classes are amaranth_boards' (third-party), named as data in the catalogue.
        return getattr(importlib.import_module(module_name), class_name)()  # imports: third-party only
