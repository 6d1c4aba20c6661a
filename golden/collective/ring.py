"""The ring all-reduce (reduce-scatter then all-gather, dissertation Section 7.2.2), in the RTL's order.

``N`` nodes each hold a gradient vector of ``N`` segments of ``lines`` lines of 14 binary32 words
(the 448-bit data line of a runtime data packet). Node ``r`` sends to ``r + 1`` (mod ``N``) only.

* **Reduce-scatter.** Segment ``s`` starts at node ``s``, which sends its own lines of ``s`` as
  they are. Each node the segment reaches adds its own line to the one it received
  (``received + own``, binary32, round to nearest even, NaN results made the canonical quiet NaN
  ``0x7FC00000``: :func:`golden.collective.reduction.add_lines`) and sends the sum on. After
  ``N - 1`` hops node ``s - 1`` holds the full sum of segment ``s``::

      sum[s] = (((g[s][s] + g[s+1][s]) + g[s+2][s]) + ...) + g[s-1][s]      (node ids mod N)

* **All-gather.** Node ``s - 1`` stores ``sum[s]`` and sends it on; every node that receives it
  stores it and sends it on, except the last (node ``s - 2``, whose successor already has it),
  so it travels ``N - 1`` hops.

Every node ends with the same ``N`` sums. The packets: each node sends ``N - 1`` segments in each
phase, one packet per line, so ``2 (N - 1) lines`` per node and ``2 N (N - 1) lines`` in all.
"""

from dataclasses import dataclass

import numpy as np

from .reduction import add_lines

__all__ = ["RingMessage", "ring_all_reduce", "ring_messages", "ring_counts", "seed_ring_counts",
           "REDUCE_SCATTER", "ALL_GATHER"]

REDUCE_SCATTER, ALL_GATHER = 0, 1


@dataclass(frozen=True)
class RingMessage:
    """One packet of the ring: ``src`` to ``dst`` (its successor), ``phase``, ``segment``, ``line``."""

    src: int
    dst: int
    phase: int
    segment: int
    line: int


def _check(nodes, lines):
    if not isinstance(nodes, int) or nodes < 2:
        raise ValueError(f"a ring needs at least 2 nodes, not {nodes!r}")
    if not isinstance(lines, int) or lines < 1:
        raise ValueError(f"lines per segment must be a positive integer, not {lines!r}")


def ring_all_reduce(gradients):
    """Every node's vector after the ring all-reduce.

    Parameters
    ----------
    gradients : array_like of uint32, shape ``(N, N, lines, 14)``
        ``gradients[node, segment, line]``: raw binary32 bits of each node's vector.

    Returns
    -------
    numpy.ndarray of uint32, shape ``(N, N, lines, 14)``
        What each node holds at the end (all ``N`` copies are equal).
    """
    gradients = np.asarray(gradients, np.uint32)
    if gradients.ndim != 4 or gradients.shape[0] != gradients.shape[1] or gradients.shape[3] != 14:
        raise ValueError(f"gradients must have shape (N, N, lines, 14), not {gradients.shape}")
    nodes = gradients.shape[0]
    _check(nodes, gradients.shape[2])
    sums = np.empty(gradients.shape[1:], np.uint32)
    for segment in range(nodes):
        total = gradients[segment, segment]
        for hop in range(1, nodes):
            total = add_lines(total, gradients[(segment + hop) % nodes, segment])
        sums[segment] = total
    return np.broadcast_to(sums, gradients.shape).copy()


def ring_messages(nodes, lines):
    """Every packet of one ring all-reduce (each packet goes from a node to its successor).

    Listed segment by segment, phase by phase, hop by hop; the RTL interleaves them in time, but
    the set is the same.
    """
    _check(nodes, lines)
    messages = []
    for segment in range(nodes):
        owner = (segment - 1) % nodes  # holds the full sum after the reduce-scatter
        for phase, first in ((REDUCE_SCATTER, segment), (ALL_GATHER, owner)):
            for hop in range(nodes - 1):
                src = (first + hop) % nodes
                dst = (src + 1) % nodes
                messages += [RingMessage(src, dst, phase, segment, line) for line in range(lines)]
    return messages


def ring_counts(nodes, lines, *, switch_levels=1):
    """Packets and packet-hops of one ring all-reduce of ``N`` segments of ``lines`` lines per node.

    Every packet crosses ``switch_levels + 1`` links (node, switch, node with one level).

    Returns
    -------
    dict
        ``packets_per_node`` = ``2 (N - 1) lines``, ``packets`` = ``2 N (N - 1) lines``,
        ``packet_hops`` = ``packets * (switch_levels + 1)``.
    """
    _check(nodes, lines)
    per_node = 2 * (nodes - 1) * lines
    packets = nodes * per_node
    return {"packets_per_node": per_node, "packets": packets, "packet_hops": packets * (switch_levels + 1)}


def seed_ring_counts(nodes, message_packets, *, second_level_switches=0, hop=1):
    """The dissertation's ring formulas (Section 7.5.1), as written.

    ``message_packets`` is the seed's ``Z/P``: the packets of one message, the size each host sends
    to its neighbour ``N - 1`` times per phase. In a ring all-reduce of a vector of ``Z_vector``
    elements that message is one segment, ``Z_vector / N`` elements.

    Returns
    -------
    dict
        ``packets_per_host`` = ``Z/P * 2 (N - 1)``; ``packets`` = ``Z/P * 2 N (N - 1)`` (the seed
        rounds it to ``Z/P * 2 N^2``); ``packet_hops`` = ``Z/P * 4 (N^2 H + S H)`` (two switch
        levels, ``S`` second-level switches; it too takes ``N (N - 1)`` as ``N^2``).
    """
    return {"packets_per_host": message_packets * 2 * (nodes - 1),
            "packets": message_packets * 2 * nodes * (nodes - 1),
            "packet_hops": message_packets * 4 * (nodes * nodes * hop + second_level_switches * hop)}
