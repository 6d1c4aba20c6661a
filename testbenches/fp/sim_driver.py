"""Drive a pipelined FP unit through its stream ports in ``amaranth.sim``.

Everything goes through the ``i``/``o`` ports, so the same checks can later run on the
cocotb/Verilator harness. The driver optionally leaves input gaps and drops ``o.ready``
at random, and records the cycle of every accepted operation and every result.
"""

from dataclasses import dataclass

from amaranth.sim import Simulator

__all__ = ["SimRun", "simulate", "field_offsets"]


def field_offsets(layout):
    """``{name: (offset, width)}`` of a struct layout's fields."""
    return {name: (field.offset, field.width) for name, field in layout}


@dataclass
class SimRun:
    """What came out of a simulation: payload dicts, and acceptance and output cycles."""

    outputs: list
    accepted_cycles: list
    output_cycles: list


def simulate(dut, operations, *, idle=None, stall=None, max_cycles=None):
    """Feed ``operations`` (dicts of operand fields, tag included if any) to ``dut``.

    Parameters
    ----------
    dut : FloatUnit
        The unit under test.
    operations : list of dict
        Operand values by field name.
    idle : callable(cycle) -> bool, optional
        True to hold ``i.valid`` low in that cycle.
    stall : callable(cycle) -> bool, optional
        True to hold ``o.ready`` low in that cycle.
    max_cycles : int, optional
        Give up (and fail) after this many cycles.

    Returns
    -------
    SimRun
    """
    in_fields = field_offsets(dut.i.payload.shape())
    out_fields = field_offsets(dut.o.payload.shape())
    words = [sum((op[name] & ((1 << width) - 1)) << offset for name, (offset, width) in in_fields.items())
             for op in operations]
    idle = idle or (lambda cycle: False)
    stall = stall or (lambda cycle: False)
    limit = max_cycles or (4 * len(operations) + 10 * (dut.latency + 10))
    run = SimRun([], [], [])

    async def bench(ctx):
        i_payload, o_payload = dut.i.payload.as_value(), dut.o.payload.as_value()
        index = 0
        for cycle in range(limit):
            if len(run.outputs) == len(words):
                return
            valid = index < len(words) and not idle(cycle)
            if valid:
                ctx.set(i_payload, words[index])
            ctx.set(dut.i.valid, valid)
            ready = not stall(cycle)
            ctx.set(dut.o.ready, ready)
            if ready and ctx.get(dut.o.valid):
                word = ctx.get(o_payload)
                run.outputs.append({name: (word >> offset) & ((1 << width) - 1)
                                    for name, (offset, width) in out_fields.items()})
                run.output_cycles.append(cycle)
            if valid and ctx.get(dut.i.ready):
                run.accepted_cycles.append(cycle)
                index += 1
            await ctx.tick()
        raise AssertionError(f"simulation gave {len(run.outputs)} of {len(words)} results in {limit} cycles")

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return run
