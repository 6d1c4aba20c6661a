"""The multi-lane banked scatter-add engine with a double-buffered on-chip chunk buffer."""

from functools import reduce
from operator import or_

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..registration import Param, Parameterized, check_int, register_block
from .layouts import VALUE_FORMAT_PARAM, dense_layout, scatter_layout
from .scatter_bank import BUFFERS, ScatterBank

__all__ = ["ScatterEngine", "LANE_CHOICES", "BANK_WRITES_PARAM", "BANK_QUEUE_PARAM"]

LANE_CHOICES = (1, 2, 4, 8, 16)
# The bank queue parameters, the same in every block built around a ScatterEngine.
BANK_WRITES_PARAM = Param("bank_writes", int, 3, "pairs one bank queue accepts per cycle", minimum=1,
                          maximum=16)
BANK_QUEUE_PARAM = Param("queue_depth", int, 8, "entries per bank queue", minimum=2, maximum=256)


class ScatterEngine(Parameterized, wiring.Component):
    """Scatter-add of ``lanes`` pairs per cycle into a banked, double-buffered chunk buffer.

    Element ``i`` of a chunk lives in bank ``i % banks`` at address ``i // banks``; each bank is a
    :class:`~rtl.compress.scatter_bank.ScatterBank` with one ``lib.memory.Memory`` per buffer, a
    queue and an f32 adder. Every element starts at +0.0 and each pair performs one float32 add
    (RNE, f16 values widened exactly) in pair order, so the result is bit-exact with
    :func:`golden.compress.scatter`, duplicate indices included.

    Dispatch: a beat is held until all its valid pairs have entered their bank queues. Each cycle
    every bank takes up to ``min(bank_writes, lanes)`` of the beat's pending pairs, lowest lanes
    first, while its queue has room, so each queue receives its pairs in pair order; a beat with
    more pairs for one bank than that takes several cycles, and a full queue holds the beat (and
    ``i.ready``) until it drains. Order among pairs of different banks does not matter (they touch
    different elements), and each bank resolves read-after-write hazards on its own (see
    :class:`~rtl.compress.scatter_bank.ScatterBank`).

    Chunks alternate between two buffers. A ``last`` beat ends the chunk; once its updates are
    written back the buffer is streamed out on ``o``, ``out_lanes`` elements per beat, and every
    element read is written back to +0.0, so the buffer is clean for chunk ``j + 2``. Meanwhile
    chunk ``j + 1`` scatters into the other buffer; it waits only if that one is still draining.
    After reset the engine clears both buffers (``chunk_size // banks`` cycles, ``i.ready`` low).

    Parameters
    ----------
    lanes : int
        Pair slots per input beat: 1, 2, 4, 8 or 16.
    banks : int
        Memory banks, a power of two from 1 to 64, >= ``out_lanes``. ``2 * lanes`` sustains about
        one pair per lane and cycle on random indices (``docs/compress.md``).
    chunk_size : int
        Elements per chunk buffer, a power of two, >= ``2 * banks``.
    value_format : {"f32", "f16"}
        Format of the pair values.
    out_lanes : int
        Elements per output beat, a power of two from 1 to ``banks``.
    bank_writes : int
        Pairs one bank queue accepts per cycle (capped at ``lanes``), 1 to 16.
    queue_depth : int
        Entries of each bank queue, 2 to 256 (rounded up to a multiple of the effective
        ``bank_writes``).

    Attributes
    ----------
    i : In(stream.Signature(scatter_layout(lanes, log2(chunk_size), value_format)))
        Pairs: each slot has ``valid``, ``index`` in the chunk and raw ``value``; ``last`` ends the
        chunk and gives its ``length`` (1 to ``chunk_size`` elements). Indices must be
        < ``length``. A beat may hold no valid pair (e.g. only the end of an empty chunk).
    o : Out(stream.Signature(dense_layout(out_lanes)))
        Each chunk as ``ceil(length / out_lanes)`` beats of float32 bit patterns, element order,
        ``last`` on the final beat. Elements that received no pair are +0.0.
    busy : Out(1)
        Clearing after reset, holding a beat, or a chunk is open, waiting or draining.
    overflow : Out(1)
        Sticky until reset: a bank queue overflowed and lost an update (the OR of the banks'
        ``overflow``). The dispatcher pushes only into ``room`` (a credit count, not a ready), so
        this never rises unless that accounting is broken; it is the check that it is not.

    Notes
    -----
    Throughput: ``lanes`` pairs per cycle at best; measured rates for random and adversarial
    indices are in ``docs/compress.md``. One bank completes one add per cycle on distinct
    addresses and one per adder latency (6 cycles) on a chain of one address. The drain streams
    one beat per cycle. Latency from a chunk's ``last`` beat to its first output beat: about 13
    cycles plus queueing.
    """

    PARAMS = (
        Param("lanes", int, 8, "pair slots per input beat", choices=LANE_CHOICES),
        Param("banks", int, 16, "memory banks (power of two, >= out_lanes)", minimum=1, maximum=64),
        Param("chunk_size", int, 1024, "elements per chunk buffer (power of two, >= 2 * banks)",
              minimum=2, maximum=1 << 24),
        VALUE_FORMAT_PARAM,
        Param("out_lanes", int, 16, "f32 elements per output beat (power of two, <= banks)",
              minimum=1, maximum=64),
        BANK_WRITES_PARAM,
        BANK_QUEUE_PARAM,
    )

    @classmethod
    def check_params(cls, values):
        """Banks, chunk size and output lanes are powers of two, ``2 * banks <= chunk_size`` and
        ``out_lanes <= banks``."""
        banks = values["banks"]
        for name, minimum, maximum in (("banks", 1, 64), ("chunk_size", 2 * banks, 1 << 24),
                                       ("out_lanes", 1, banks)):
            check_int(name, values[name], minimum, maximum)
            if values[name] & (values[name] - 1):
                raise ValueError(f"{name} must be a power of two, not {values[name]}")

    def __init__(self, *, lanes=8, banks=16, chunk_size=1024, value_format="f32", out_lanes=16,
                 bank_writes=3, queue_depth=8):
        self._writes = min(bank_writes, lanes)
        self._index_width = (chunk_size - 1).bit_length()
        self._bank_bits = (banks - 1).bit_length()
        super().__init__({
            "i": In(stream.Signature(scatter_layout(lanes, self._index_width, value_format))),
            "o": Out(stream.Signature(dense_layout(out_lanes))),
            "busy": Out(1),
            "overflow": Out(1),
        })

    def _banks_of(self, m):
        banks = []
        for index in range(self._banks):
            bank = ScatterBank(depth=self._chunk_size // self._banks, value_format=self._value_format,
                               writes=self._writes, queue_depth=self._queue_depth)
            m.submodules[f"bank{index}"] = bank
            banks.append(bank)
        return banks

    def _dispatch(self, m, banks, fill_buffer, can_fill):
        """Hold one beat and push its pairs into the bank queues.

        Returns (beat held, beat, beat done this cycle, some pair pushed this cycle).
        """
        lanes, k = self._lanes, self._writes
        beat_valid = Signal()
        beat = Signal(self.i.payload.shape())
        pending = Signal(lanes)
        # same[l][i]: lanes l and i (i < l) hit the same bank; registered with the beat.
        same = [Signal(max(lane, 1), name=f"same_bank{lane}") for lane in range(lanes)]

        def bank_of(pair):
            return pair.index[:self._bank_bits]

        # Each lane's rank among the pending lanes of its bank decides its bank write port.
        rank = [Signal(range(lane + 1), name=f"rank{lane}") for lane in range(lanes)]
        for lane in range(1, lanes):
            m.d.comb += rank[lane].eq(sum(pending[i] & same[lane][i] for i in range(lane)))
        dispatched = []
        for b, bank in enumerate(banks):
            hits = Signal(lanes, name=f"hits{b}")
            m.d.comb += hits.eq(Cat(pending[lane] & (bank_of(beat.pairs[lane]) == b)
                                    for lane in range(lanes)))
            for r in range(k):
                chosen = Signal(lanes, name=f"chosen{b}_{r}")
                enable = Signal(name=f"enable{b}_{r}")
                m.d.comb += [chosen.eq(Cat(hits[lane] & (rank[lane] == r) for lane in range(lanes))),
                             enable.eq(chosen.any() & (bank.room > r) & can_fill)]
                port = bank.push[r]
                # `chosen` is one-hot or zero: an OR of the masked lanes is the multiplexer.
                pairs = beat.pairs
                m.d.comb += [
                    port.valid.eq(enable),
                    port.address.eq(reduce(or_, [Mux(chosen[lane], pairs[lane].index[self._bank_bits:], 0)
                                                 for lane in range(lanes)])),
                    port.value.eq(reduce(or_, [Mux(chosen[lane], pairs[lane].value, 0)
                                               for lane in range(lanes)])),
                ]
                dispatched.append(Mux(enable, chosen, 0))
            m.d.comb += bank.push_buffer.eq(fill_buffer)
        remaining = Signal(lanes)
        m.d.comb += remaining.eq(pending & ~reduce(or_, dispatched))
        beat_done = Signal()
        m.d.comb += beat_done.eq(beat_valid & (remaining == 0) & (can_fill | ~beat.last))

        incoming = self.i.payload.pairs
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += [beat_valid.eq(1), beat.eq(self.i.payload),
                         pending.eq(Cat(pair.valid for pair in incoming))]
            for lane in range(1, lanes):
                m.d.sync += same[lane].eq(Cat(bank_of(incoming[i]) == bank_of(incoming[lane])
                                              for i in range(lane)))
        with m.Else():
            m.d.sync += pending.eq(remaining)
            with m.If(beat_done):
                m.d.sync += beat_valid.eq(0)
        return beat_valid, beat, beat_done, pending != remaining

    def elaborate(self, platform):
        m = Module()
        banks = self._banks_of(m)
        depth = self._chunk_size // self._banks
        groups = self._banks // self._out_lanes
        group_bits = (groups - 1).bit_length()
        beats_per_chunk = self._chunk_size // self._out_lanes

        # After reset, write +0.0 everywhere before accepting pairs.
        initialising = Signal(init=1)
        init_address = Signal(range(depth))
        with m.If(initialising):
            m.d.sync += init_address.eq(init_address + 1)
            with m.If(init_address == depth - 1):
                m.d.sync += initialising.eq(0)

        # Buffer bookkeeping: `sealed[x]` from a chunk's last beat until its final output beat.
        fill_buffer = Signal()
        drain_buffer = Signal()
        sealed = Signal(BUFFERS)
        last_beat = [Signal(range(beats_per_chunk), name=f"last_beat{x}") for x in range(BUFFERS)]
        filling = Signal()
        can_fill = Signal()
        m.d.comb += can_fill.eq(~initialising & ~sealed.bit_select(fill_buffer, 1))

        beat_valid, beat, beat_done, pushed = self._dispatch(m, banks, fill_buffer, can_fill)
        m.d.comb += self.i.ready.eq(~initialising & (~beat_valid | beat_done))
        with m.If(pushed):
            m.d.sync += filling.eq(1)
        with m.If(beat_done & beat.last):
            length = beat.length
            final_beat = Mux(length == 0, 0, (length - 1) >> (self._out_lanes - 1).bit_length())
            m.d.sync += [filling.eq(0), fill_buffer.eq(~fill_buffer)]
            for x in range(BUFFERS):
                with m.If(fill_buffer == x):
                    m.d.sync += [sealed[x].eq(1), last_beat[x].eq(final_beat)]

        # Drain: one read of `out_lanes` banks per beat; each read element is cleared the next cycle.
        draining = Signal()
        issued_all = Signal()
        drain_beat = Signal(range(beats_per_chunk))
        complete = Signal()
        m.d.comb += complete.eq(~Cat(bank.outstanding.bit_select(drain_buffer, 1) for bank in banks).any())
        with m.If(~draining & sealed.bit_select(drain_buffer, 1) & complete):
            m.d.sync += [draining.eq(1), drain_beat.eq(0)]

        advance = ~self.o.valid | self.o.ready
        read = Signal()
        m.d.comb += read.eq(draining & ~issued_all & advance)
        group = drain_beat[:group_bits]
        address = drain_beat >> group_bits
        final = drain_beat == Mux(drain_buffer, last_beat[1], last_beat[0])
        out_group = Signal(max(group_bits, 1))
        with m.If(read):
            m.d.sync += [self.o.valid.eq(1), self.o.payload.last.eq(final), out_group.eq(group),
                         drain_beat.eq(drain_beat + 1)]
            with m.If(final):
                m.d.sync += issued_all.eq(1)
        with m.Elif(advance):
            m.d.sync += self.o.valid.eq(0)
        with m.If(self.o.valid & self.o.ready & self.o.payload.last):
            m.d.sync += [draining.eq(0), issued_all.eq(0), drain_buffer.eq(~drain_buffer)]
            for x in range(BUFFERS):
                with m.If(drain_buffer == x):
                    m.d.sync += sealed[x].eq(0)

        clear_valid = Signal()
        clear_address = Signal(range(depth))
        clear_group = Signal(max(group_bits, 1))
        m.d.sync += [clear_valid.eq(read), clear_address.eq(address), clear_group.eq(group)]
        for b, bank in enumerate(banks):
            in_group = (group == b // self._out_lanes) if groups > 1 else Const(1)
            in_clear_group = (clear_group == b // self._out_lanes) if groups > 1 else Const(1)
            clearing = clear_valid & in_clear_group
            m.d.comb += [
                bank.drain_buffer.eq(drain_buffer),
                bank.drain_enable.eq(read & in_group),
                bank.drain_address.eq(address),
                bank.clear.eq(Mux(initialising, 0b11, Mux(clearing, Mux(drain_buffer, 0b10, 0b01), 0))),
                bank.clear_address.eq(Mux(initialising, init_address, clear_address)),
            ]
        for lane in range(self._out_lanes):
            choices = [banks[g * self._out_lanes + lane].drain_data for g in range(groups)]
            selected = choices[0]
            for g in range(1, groups):
                selected = Mux(out_group == g, choices[g], selected)
            m.d.comb += self.o.payload.data[lane].eq(selected)

        m.d.comb += self.busy.eq(initialising | beat_valid | filling | sealed.any())
        m.d.comb += self.overflow.eq(Cat(*(bank.overflow for bank in banks)).any())
        return m


register_block(
    "topk_scatter", ScatterEngine, family="compress",
    summary="Multi-lane banked f32 scatter-add into a double-buffered chunk buffer, streamed out dense.",
    golden="golden.compress.scatter:scatter",
    drops={"overflow": "sticky: a bank queue (fed on its room count, not a ready) lost an update"},
)
