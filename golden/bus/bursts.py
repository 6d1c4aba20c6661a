"""Golden cutter of DMA commands into AXI4 INCR bursts (what ``rtl.bus.AXIBurstPlanner`` must emit).

A command ``(address, length)`` covers ``length`` beats of ``data_width // 8`` bytes from
``address`` with its low ``log2(data_width // 8)`` bits cleared. It is cut greedily, from its
first beat on: each burst is as long as the three limits allow, the remaining length,
``max_burst`` and the beats left before the next 4 KB boundary, whichever is least. Addresses
wrap modulo ``2**address_width`` (a burst never wraps: the top of the address space is a 4 KB
boundary). A command of length 0 has no burst.
"""

__all__ = ["PAGE_BYTES", "cut_command", "cut_commands"]

PAGE_BYTES = 4096


def _beat_bytes(data_width):
    if data_width < 8 or data_width & (data_width - 1):
        raise ValueError(f"data_width must be a power of two >= 8, not {data_width}")
    return data_width // 8


def cut_command(address, length, *, data_width, max_burst, address_width=64):
    """The bursts of one command, in address order.

    Parameters
    ----------
    address : int
        Byte address of the first beat (its bits below the beat size are ignored).
    length : int
        Beats, >= 0.
    data_width : int
        Beat width in bits, a power of two >= 8.
    max_burst : int
        Longest burst in beats, >= 1.
    address_width : int
        Byte address width (>= 12); addresses wrap modulo ``2**address_width``.

    Returns
    -------
    list of (int, int, bool)
        ``(address, beats, final)`` per burst; ``final`` only on the last.
    """
    beat_bytes = _beat_bytes(data_width)
    if max_burst < 1 or length < 0 or address_width < 12:
        raise ValueError(f"need max_burst >= 1, length >= 0 and address_width >= 12, "
                         f"not {max_burst}, {length}, {address_width}")
    space = 1 << address_width
    address = (address % space) & ~(beat_bytes - 1)
    bursts = []
    while length:
        to_page_end = (PAGE_BYTES - address % PAGE_BYTES) // beat_bytes
        beats = min(length, max_burst, to_page_end)
        length -= beats
        bursts.append((address, beats, length == 0))
        address = (address + beats * beat_bytes) % space
    return bursts


def cut_commands(commands, **geometry):
    """The bursts of ``(address, length)`` commands served in order: :func:`cut_command` concatenated."""
    return [burst for address, length in commands for burst in cut_command(address, length, **geometry)]
