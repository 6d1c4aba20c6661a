"""The block registry: every synthesizable NearTrain block, by name.

A block declares itself at the bottom of its own file with
:func:`rtl.registration.register_block` (which a block module imports, never this one, so
that the registry can import every family without an import loop). The CLI, the Verilog
generator, the synthesis flow, the sweeps and the tests look blocks up here, so a new block
shows up in every command without touching them.
"""

from .registration import (
    FAMILIES,
    NO_DROPS,
    NO_GOLDEN,
    REGISTERED,
    Block,
    Param,
    Parameterized,
    check_bool,
    check_choice,
    check_int,
    register_block,
)

__all__ = ["Param", "Parameterized", "Block", "register_block", "blocks", "get_block", "load_all", "FAMILIES",
           "check_int", "check_choice", "check_bool", "NO_DROPS", "NO_GOLDEN"]

def load_all():
    """Import every family so that all blocks are registered; returns them by name."""
    from . import aggregate, bus, collective, compress, dlrm, fp, net, optim, runtime, systolic  # noqa: F401

    return REGISTERED


def blocks():
    """All registered blocks, by name, in registration order."""
    return dict(load_all())


def get_block(name):
    """Return the registered :class:`Block` called ``name``.

    Raises
    ------
    ValueError
        When no such block exists; the message lists the known names.
    """
    load_all()
    try:
        return REGISTERED[name]
    except KeyError:
        raise ValueError(f"unknown block {name!r} (known: {', '.join(sorted(REGISTERED))})") from None
