"""The scatter bank queues are fed on credit (``room``), not on a ready: a push past ``room`` would
be lost, so each bank has a sticky ``overflow`` flag and the engine exports their OR.

* ``test_bank_flags_a_push_past_its_room``: a :class:`rtl.compress.scatter_bank.ScatterBank` (an
  internal block, driven directly in ``amaranth.sim``) pushed past its room raises ``overflow``,
  and one kept to its room does not.
* ``test_engine_never_overflows_bounded``: a bounded proof (SymbiYosys) that the engine's own
  dispatcher, which keeps to ``room``, never raises ``overflow`` whatever the input stream and
  the consumer do, on a small engine (one-entry-deep queues, so the credit check is tight).
"""

import pytest
from amaranth.hdl import Assert, Cover
from amaranth.sim import Simulator

from rtl.compress.scatter import ScatterEngine
from rtl.compress.scatter_bank import ScatterBank
from scripts.formal.flow import run_proof
from scripts.formal.streams import stream_harness


def _run_bank(pushes_per_cycle, cycles, *, keep_to_room):
    """Push ``pushes_per_cycle`` updates per cycle for ``cycles`` cycles (capped at ``room`` when
    ``keep_to_room``) into a bank whose head is kept busy on one address; return (overflow, pushed)."""
    bank = ScatterBank(depth=4, value_format="f32", writes=2, queue_depth=2)
    sim = Simulator(bank)
    sim.add_clock(1e-8)
    result = {}

    async def bench(ctx):
        pushed = 0
        for _ in range(cycles):
            room = ctx.get(bank.room)
            count = min(pushes_per_cycle, room) if keep_to_room else pushes_per_cycle
            for port in range(2):
                ctx.set(bank.push[port].valid, int(port < count))
                ctx.set(bank.push[port].address, 1)  # one address: a RAW chain, the slowest drain
                ctx.set(bank.push[port].value, 0x3F800000)
            pushed += count
            await ctx.tick()
        for port in range(2):
            ctx.set(bank.push[port].valid, 0)
        await ctx.tick().repeat(4)
        result.update(overflow=ctx.get(bank.overflow), pushed=pushed)

    sim.add_testbench(bench)
    sim.run()
    return result["overflow"], result["pushed"]


def test_bank_flags_a_push_past_its_room():
    overflow, pushed = _run_bank(2, 12, keep_to_room=False)
    assert pushed == 24 and overflow == 1, "pushes past room into a bank that drains one per 6 cycles"
    overflow, pushed = _run_bank(2, 12, keep_to_room=True)
    assert pushed > 2 and overflow == 0, "a sender kept to room raised overflow"


def _engine_harness():
    engine = ScatterEngine(lanes=2, banks=2, chunk_size=4, value_format="f32", out_lanes=1, bank_writes=2,
                           queue_depth=2)
    m, _inputs, _outputs = stream_harness(engine)
    m.d.comb += Assert(~engine.overflow, "no bank queue overflows while the dispatcher keeps to room")
    # Not vacuous: the queues do fill to their room (a push that finds room 0 next cycle).
    m.d.comb += Cover(engine.i.valid & engine.i.payload.pairs[0].valid & engine.i.payload.pairs[1].valid
                      & ~engine.i.ready, "a beat waits for queue room")
    return m


@pytest.mark.parametrize("mode, depth", [("bmc", 12), pytest.param("cover", 16, marks=pytest.mark.slow)])
def test_engine_never_overflows_bounded(tmp_path, mode, depth):
    result = run_proof(_engine_harness(), folder=tmp_path, mode=mode, depth=depth, timeout=600)
    assert result.status == "pass", result
