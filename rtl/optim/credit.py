"""Stream backpressure for a fixed-latency pipeline that never stalls: a credit-managed output FIFO.

The optimizer datapaths are chains of ``rtl.fp`` units with ``o.ready`` tied high, so
they have no enable and cannot stop. Instead of stalling them, an input is only accepted
while the output FIFO is sure to have room for its result: the FIFO has ``depth``
entries and an input is a credit spent until its result leaves the FIFO. With ``depth``
at least the pipeline latency plus the FIFO's own two cycles, a consumer that is always
ready sees one result per cycle (II = 1); a consumer that stalls throttles the input,
and nothing is ever lost.
"""

from amaranth.hdl import Shape, Signal
from amaranth.lib.fifo import SyncFIFOBuffered

__all__ = ["credit_depth", "credited_pipeline"]

# SyncFIFOBuffered's write-to-read latency and output register.
_FIFO_SLACK = 4


def credit_depth(latency):
    """The output FIFO depth that keeps a pipeline of ``latency`` cycles at II = 1."""
    return latency + _FIFO_SLACK


def credited_pipeline(m, *, i, o, latency, name="credit"):
    """Put a credit FIFO between a pipeline of ``latency`` cycles and the output stream ``o``.

    Parameters
    ----------
    m : Module
    i : stream interface (the component's input port)
        ``i.ready`` is driven here; ``i.valid`` and ``i.payload`` feed the pipeline.
    o : stream interface (the component's output port)
        Driven from the FIFO.
    latency : int
        Cycles from an accepted input to its result.

    Returns
    -------
    issue : Signal
        High in a cycle in which an input is accepted (``i.valid & i.ready``).
    result : Signal
        Of ``o``'s payload shape; the caller drives it with the pipeline output, which is
        written to the FIFO ``latency`` cycles after the matching ``issue``.
    """
    depth = credit_depth(latency)
    shape = o.payload.shape()
    fifo = SyncFIFOBuffered(width=Shape.cast(shape).width, depth=depth)
    m.submodules[f"{name}_fifo"] = fifo

    occupancy = Signal(range(depth + 1), name=f"{name}_occupancy")
    issue = Signal(name=f"{name}_issue")
    result = Signal(shape, name=f"{name}_result")
    m.d.comb += [
        i.ready.eq(occupancy < depth),
        issue.eq(i.valid & i.ready),
    ]

    # The accept bit travels with the data; it is the FIFO's write enable at the far end.
    arrived = issue
    for stage in range(latency):
        delayed = Signal(name=f"{name}_valid_{stage + 1}")
        m.d.sync += delayed.eq(arrived)
        arrived = delayed

    leave = o.valid & o.ready
    m.d.comb += [
        fifo.w_en.eq(arrived),
        fifo.w_data.eq(result),
        o.valid.eq(fifo.r_rdy),
        o.payload.eq(fifo.r_data),
        fifo.r_en.eq(o.ready),
    ]
    m.d.sync += occupancy.eq(occupancy + issue - leave)
    return issue, result
