"""The GCU's delayed parameter update: each reduced gradient line goes through Adam, in place."""

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..lib.counters import saturating_count
from ..net.packet import LINE_BITS
from ..optim.optimizers import OPTIMIZERS
from ..optim.updater_core import UpdaterCore
from ..registration import Param, Parameterized, register_block
from .reduction_engine import LINE_WORDS
from .reduction_table import COLLECTIVE_COUNTER_BITS, PARTITION_BITS, ReducedLine

__all__ = ["ParameterUpdate", "UPDATE_LANES", "STATE_TENSORS", "load_layout", "scalars_signature"]

UPDATE_LANES = (1, 2, 7, 14)  # divisors of a line's 14 words
STATE_TENSORS = ("param", *OPTIMIZERS["adam"].states)  # the load port's tensor codes, in this order


def load_layout(depth):
    """``{"tensor": 2, "address": range(depth), "data": 448}``: one line of the stored state."""
    return data.StructLayout({"tensor": 2, "address": range(depth), "data": LINE_BITS})


def scalars_signature():
    """Adam's host scalars (:func:`golden.optim.step_scalars`), binary32 bits each."""
    return wiring.Signature({name: Out(32) for name in OPTIMIZERS["adam"].scalars})


class ParameterUpdate(Parameterized, wiring.Component):
    """One Adam step per reduced line, on parameters and moments held in lines beside the GCU.

    The state of partition ``p``, line ``c`` (parameters, first and second moments, 14 binary32
    words each) lives at address ``p * chunks + c``. A reduced line reads its three state lines,
    goes through an :class:`~rtl.optim.updater_core.UpdaterCore` of ``lanes`` lanes (so a line
    takes ``14 / lanes`` beats), and the new state is written back in place. When the last line of
    a reduced partition has been written back, ``updated`` names the partition: from then on a
    fetch reads the new parameters. The step's host scalars (:func:`golden.optim.step_scalars`,
    with ``grad_scale = 1 / leaves`` to turn the sum into the mean) are inputs, stable during
    a step. The result is bit-exact to :func:`golden.collective.delayed_update_step`.

    A line of a partition whose previous reduction is still being written back waits: the next
    reduction of that partition must read the state the previous one wrote.

    Parameters
    ----------
    partitions : int
        Partitions (1 to 64).
    chunks : int
        Lines per partition (1 to 256).
    lanes : {1, 2, 7, 14}
        Elements updated per cycle.

    Attributes
    ----------
    i : In(stream.Signature(ReducedLine))
        Reduced gradient lines (sums; ``last`` marks a partition's final line).
    load : In(stream.Signature(load_layout(partitions * chunks)))
        The host's writes of the state, ``tensor`` 0 parameters, 1 ``exp_avg``, 2 ``exp_avg_sq``
        (write-back has priority; load only between steps).
    scalars : In(Signature({name: Out(32)}))
        Adam's host scalars, binary32 bits.
    updated : Out(Signature({"valid": Out(1), "payload": Out(PARTITION_BITS)}))
        A partition's new parameters are all written (valid for one cycle; it cannot be stalled).
    read_addr, read_en : In
    read_data : Out(448)
        A read port of the parameters (data one cycle after an enabled address), for the fetches.
    nonfinite : Out(1)
        Sticky: a reduced gradient word was NaN or an infinity (the updater core's status).
    clear : In(1)
        Clears ``nonfinite``.
    bad_loads : Out(16)
        Host loads dropped (saturating at 65535): a ``tensor`` code of 3, or an ``address`` not
        below ``partitions * chunks``.

    Notes
    -----
    Latency from an accepted line to its write-back: ``UpdaterCore.latency + 14 / lanes + 1``
    cycles. Throughput: one line per ``14 / lanes`` cycles.
    """

    PARAMS = (
        Param("partitions", int, 8, "partitions", minimum=1, maximum=64),
        Param("chunks", int, 4, "448-bit lines per partition", minimum=1, maximum=256),
        Param("lanes", int, 1, "elements updated per cycle", choices=UPDATE_LANES),
    )

    def __init__(self, *, partitions=8, chunks=4, lanes=1):
        self._depth = partitions * chunks
        self._scalar_names = OPTIMIZERS["adam"].scalars
        super().__init__({
            "i": In(stream.Signature(ReducedLine)),
            "load": In(stream.Signature(load_layout(self._depth))),
            "scalars": In(scalars_signature()),
            "updated": Out(wiring.Signature({"valid": Out(1), "payload": Out(PARTITION_BITS)})),
            "read_addr": In(range(self._depth)),
            "read_en": In(1),
            "read_data": Out(LINE_BITS),
            "nonfinite": Out(1),
            "clear": In(1),
            "bad_loads": Out(COLLECTIVE_COUNTER_BITS),
        })

    def elaborate(self, platform):
        m = Module()
        lanes, chunks, depth = self._lanes, self._chunks, self._depth
        beats = LINE_WORDS // lanes
        m.submodules.core = core = UpdaterCore(optimizer="adam", lanes=lanes)
        for name in self._scalar_names:
            m.d.comb += getattr(core.scalars, name).eq(getattr(self.scalars, name))
        m.d.comb += [self.nonfinite.eq(core.nonfinite), core.clear.eq(self.clear)]

        stores, reads = {}, {}
        for name in STATE_TENSORS:
            memory = m.submodules[f"{name}_lines"] = Memory(shape=LINE_BITS, depth=depth, init=[])
            stores[name], reads[name] = memory.write_port(granularity=32), memory.read_port()
        fetch = m.submodules.param_lines.read_port()
        m.d.comb += [fetch.addr.eq(self.read_addr), fetch.en.eq(self.read_en), self.read_data.eq(fetch.data)]

        # The line in the core's input stage, beat by beat; its state lines arrive a cycle after it.
        held, held_valid = Signal(ReducedLine), Signal()
        beat = Signal(range(beats))
        # Partitions whose final line is in the core: their next reduction waits for the write-back.
        pending = Signal(self._partitions)
        finishing = Signal(self._partitions)
        incoming = self.i.payload
        index_bits = max(1, (self._partitions - 1).bit_length())
        release = held_valid & core.i.ready & (beat == beats - 1)
        waits = pending.bit_select(incoming.partition[:index_bits], 1)
        m.d.comb += self.i.ready.eq(~waits & (~held_valid | release))
        address = incoming.partition * chunks + incoming.chunk
        for name in STATE_TENSORS:
            m.d.comb += [reads[name].addr.eq(address), reads[name].en.eq(self.i.ready)]
        with m.If(self.i.ready):
            m.d.sync += [held.eq(incoming), held_valid.eq(self.i.valid), beat.eq(0)]
        with m.Elif(release):  # the next line waits for a write-back
            m.d.sync += held_valid.eq(0)
        with m.Elif(core.i.valid & core.i.ready):
            m.d.sync += beat.eq(beat + 1)
        starting = Signal(self._partitions)
        with m.If(self.i.valid & self.i.ready & incoming.last):
            m.d.comb += starting.eq(1 << incoming.partition[:index_bits])
        m.d.sync += pending.eq((pending | starting) & ~finishing)

        width = 32 * lanes
        m.d.comb += [core.i.valid.eq(held_valid), core.i.payload.mask.eq((1 << lanes) - 1),
                     core.grad_format.eq(0), core.copy_format.eq(0)]
        for lane in range(lanes):
            element = core.i.payload.lanes[lane]
            m.d.comb += element.grad.eq(held.data.word_select(beat, width)[32 * lane:32 * (lane + 1)])
            for name in STATE_TENSORS:
                m.d.comb += getattr(element, name).eq(
                    reads[name].data.word_select(beat, width)[32 * lane:32 * (lane + 1)])

        # Where each beat in the core goes back to: the core is in order, and accepts no more
        # beats than its output FIFO holds, so a FIFO of that depth never fills.
        tag_layout = data.StructLayout({"address": range(depth), "beat": range(beats), "last": 1,
                                        "partition": PARTITION_BITS})
        m.submodules.tags = tags = SyncFIFO(width=tag_layout.size, depth=core.fifo_depth)
        tag_in, tag_out = data.View(tag_layout, tags.w_data), data.View(tag_layout, tags.r_data)
        m.d.comb += [tag_in.address.eq(held.partition * chunks + held.chunk), tag_in.beat.eq(beat),
                     tag_in.last.eq(held.last & (beat == beats - 1)), tag_in.partition.eq(held.partition),
                     tags.w_en.eq(core.i.valid & core.i.ready)]

        # Write-back (priority) or a host load, through one write port per tensor.
        m.d.comb += [core.o.ready.eq(1), tags.r_en.eq(core.o.valid), self.load.ready.eq(~core.o.valid)]
        word_enables = Signal(LINE_WORDS)
        m.d.comb += word_enables.eq(((1 << lanes) - 1) << (tag_out.beat * lanes))
        for code, name in enumerate(STATE_TENSORS):
            result = Cat(getattr(core.o.payload.lanes[lane], name) for lane in range(lanes))
            store = stores[name]
            with m.If(core.o.valid):
                m.d.comb += [store.addr.eq(tag_out.address), store.data.eq(Cat([result] * beats)),
                             store.en.eq(word_enables)]
            load_here = (self.load.payload.tensor == code) & (self.load.payload.address < depth)
            with m.Elif(self.load.valid & load_here):
                m.d.comb += [store.addr.eq(self.load.payload.address), store.data.eq(self.load.payload.data),
                             store.en.eq((1 << LINE_WORDS) - 1)]
        loaded = self.load.valid & self.load.ready
        saturating_count(m, self.bad_loads, loaded & ((self.load.payload.tensor >= len(STATE_TENSORS))
                                                      | (self.load.payload.address >= depth)))
        done = core.o.valid & tag_out.last
        m.d.comb += [self.updated.valid.eq(done), self.updated.payload.eq(tag_out.partition)]
        with m.If(done):
            m.d.comb += finishing.eq(1 << tag_out.partition[:index_bits])
        return m


register_block(
    "parameter_update", ParameterUpdate, family="collective",
    drops={"bad_loads": "host loads of tensor code 3 or of an address past partitions * chunks"},
    summary="The GCU's delayed parameter update: each reduced gradient line through Adam, in place, with "
            "a read port for the broadcast.",
    golden="golden.collective.delayed_update:delayed_update_step",
)
