"""Statistics mode: NaN and Inf counts and the exact (Kulisch) sum of squares of a gradient stream."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import memory, stream, wiring
from amaranth.lib.wiring import In, Out

from ..registration import NO_DROPS, Param, Parameterized, register_block
from .updater_core import MAX_LANES, gradient_layout

__all__ = ["GradientStatistics", "BUCKETS", "BUCKET_WIDTH", "COUNT_WIDTH", "ACCUMULATOR_WIDTH"]

# One bucket per finite biased exponent field, max(e, 1) - 1 = 0 .. 253.
BUCKETS = 254
# A bucket holds the sum of at most 2**32 squared significands (each below 2**48).
BUCKET_WIDTH = 48 + 32
COUNT_WIDTH = 32
# The golden model's accumulator: 298 fraction bits (the square of the smallest subnormal
# is 2**-298) and 256 + 32 integer bits (2**32 squares below 2**256).
ACCUMULATOR_WIDTH = 298 + 256 + 32
# The accumulator adds on segments of this width with registered carries between them; the
# top segment also takes the bits left over (74 bits: 512 to 585).
SEGMENT_WIDTH = 64
_SEGMENT_WIDTHS = ([SEGMENT_WIDTH] * (ACCUMULATOR_WIDTH // SEGMENT_WIDTH - 1)
                   + [ACCUMULATOR_WIDTH - SEGMENT_WIDTH * (ACCUMULATOR_WIDTH // SEGMENT_WIDTH - 1)])


class GradientStatistics(Parameterized, wiring.Component):
    """NaN count, Inf count and the exact sum of squares of binary32 gradient lanes.

    This is the statistics mode of the updater (Smart-Infinity Section IV-C: the NaN/Inf
    check of loss scaling and the global norm of gradient clipping), bit-exact with
    :func:`golden.optim.gradient_statistics`. A finite element ``M * 2**E`` (``M`` the
    24-bit significand, ``e`` the biased exponent field) contributes ``M**2 << 2b`` with
    ``b = max(e, 1) - 1``. Each lane owns a block RAM of :data:`BUCKETS` exact
    :data:`BUCKET_WIDTH`-bit sums, one per ``b``, updated by a read-modify-write whose read
    is registered before the addition (the read port is transparent to the write port, and
    the one write a read misses, the previous cycle's, is forwarded, so back-to-back
    elements in one bucket add up). ``drain`` then folds the buckets of all lanes, from the top bucket down,
    into the 586-bit fixed-point accumulator by Horner's rule, ``acc = 4 * acc + sum_b``
    (on 64-bit segments with registered carries, settled at the end),
    which is the golden model's integer with 298 fraction bits (see
    :mod:`golden.optim.statistics`), and zeroes the buckets for the next run. Nothing is
    ever rounded, so the result is independent of lanes, order and chunking.

    Parameters
    ----------
    lanes : int
        Elements per transfer, 1 to 32.

    Attributes
    ----------
    i : In(stream.Signature(gradient_layout(lanes)))
        Gradient lanes (binary32 bits) and their mask; ``i.ready`` is high but while the
        buckets are zeroed after a reset.
    clear : In(1)
        Zeroes the counts, ``received`` and ``accumulator`` (not while data is in flight).
    drain : In(1)
        Pulse after the last transfer: fold the buckets into ``accumulator``.
    busy : Out(1)
        A drain is pending or running, or the buckets are being zeroed after a reset.
    done : Out(1)
        One-cycle pulse when the drain has finished and ``accumulator`` is final.
    received : Out(32)
        Transfers accepted since ``clear``.
    nan_count, inf_count : Out(32)
        Masked-in NaN and infinite elements since ``clear``.
    accumulator : Out(586)
        The exact sum of squares in units of ``2**-298``, valid from ``done`` until the next
        ``drain`` or ``clear`` (during a drain its segments lack their pending carries).

    Notes
    -----
    Latency: counts are current 1 cycle after a transfer; a drain takes ``BUCKETS + 11``
    cycles once the 5-stage accumulate pipeline is empty (the last 8 settle the
    accumulator's segment carries). Throughput: one transfer
    (``lanes`` elements) per cycle.

    Reset: the bucket RAMs are not reset, so a reset in the middle of a run (or of a drain)
    would leave partial sums in them for the next run to add to. After every reset the
    unit therefore walks the buckets as a drain does and zeroes them, without a result or a
    ``done`` pulse: ``BUCKETS + 2`` cycles with ``busy`` high and ``i.ready`` low. Send
    nothing (and do not drain) until ``busy`` falls; the kernel holds its ``ap_idle`` low
    meanwhile.
    """

    PARAMS = (
        Param("lanes", int, 1, "elements per transfer", minimum=1, maximum=MAX_LANES),
    )

    throughput = 1

    def __init__(self, *, lanes=1):
        super().__init__({
            "i": In(stream.Signature(gradient_layout(lanes))),
            "clear": In(1),
            "drain": In(1),
            "busy": Out(1),
            "done": Out(1),
            "received": Out(COUNT_WIDTH),
            "nan_count": Out(COUNT_WIDTH),
            "inf_count": Out(COUNT_WIDTH),
            "accumulator": Out(ACCUMULATOR_WIDTH),
        })

    def elaborate(self, platform):
        m = Module()
        lanes = self._lanes

        # Drain sequencing: wait for the accumulate pipeline to empty, then read bucket
        # `index` of every lane from the top down; the sums arrive one cycle after the read
        # and enter the accumulator one cycle after that.
        pending = Signal()
        # Reset starts a walk over the buckets that zeroes them (the drain's, without result).
        scrubbing = Signal(init=1)
        reading = Signal(init=1)
        index = Signal(range(BUCKETS), init=BUCKETS - 1)
        read_valid = Signal()       # the RAMs output bucket `read_index` this cycle
        read_index = Signal(range(BUCKETS))
        total_valid = Signal()
        finishing = Signal()
        in_flight = []              # valid bits of every accumulate stage, all lanes

        m.d.comb += self.i.ready.eq(~scrubbing)
        take = self.i.valid & self.i.ready
        with m.If(self.clear):
            m.d.sync += self.received.eq(0)
        with m.Elif(take):
            m.d.sync += self.received.eq(self.received + 1)

        nan_bits, inf_bits, bucket_sums = [], [], []
        for lane in range(lanes):
            ram = memory.Memory(shape=BUCKET_WIDTH, depth=BUCKETS, init=[])
            m.submodules[f"buckets{lane}"] = ram
            write = ram.write_port()
            read = ram.read_port(transparent_for=(write,))

            # Stage 0: register the element.
            live0 = Signal(name=f"live0_{lane}")
            bits0 = Signal(32, name=f"bits0_{lane}")
            m.d.sync += [live0.eq(take & self.i.payload.mask[lane]), bits0.eq(self.i.payload.lanes[lane])]
            exponent, fraction = bits0[23:31], bits0[:23]
            special = exponent == 0xFF
            nan_bits.append(live0 & special & (fraction != 0))
            inf_bits.append(live0 & special & (fraction == 0))

            # Stage 1: the significand M and the bucket max(e, 1) - 1.
            add1 = Signal(name=f"add1_{lane}")
            significand1 = Signal(24, name=f"significand1_{lane}")
            bucket1 = Signal(range(BUCKETS), name=f"bucket1_{lane}")
            m.d.sync += [add1.eq(live0 & ~special), significand1.eq(Cat(fraction, exponent != 0)),
                         bucket1.eq(Mux(exponent == 0, 0, exponent - 1))]

            # Stage 2: the square's partial products, M = high * 2**12 + low (one 12 x 12
            # multiplier each, so no adder follows a multiplier in one cycle); the bucket is
            # read here.
            add2 = Signal(name=f"add2_{lane}")
            high, low = significand1[12:], significand1[:12]
            high_squared2 = Signal(24, name=f"high_squared2_{lane}")
            low_squared2 = Signal(24, name=f"low_squared2_{lane}")
            cross2 = Signal(24, name=f"cross2_{lane}")
            bucket2 = Signal(range(BUCKETS), name=f"bucket2_{lane}")
            m.d.sync += [add2.eq(add1), high_squared2.eq(high * high), low_squared2.eq(low * low),
                         cross2.eq(high * low), bucket2.eq(bucket1)]
            # M**2 = high**2 * 2**24 + low**2 (side by side: low**2 < 2**24) + cross * 2**13.
            square2 = Cat(low_squared2, high_squared2) + (cross2 << 13)

            # Stage 3: the bucket's sum arrives from the RAM and is registered, so that the
            # addition below starts from registers, not from the RAM's slow output.
            add3 = Signal(name=f"add3_{lane}")
            square3 = Signal(48, name=f"square3_{lane}")
            bucket3 = Signal(range(BUCKETS), name=f"bucket3_{lane}")
            m.d.sync += [add3.eq(add2), square3.eq(square2), bucket3.eq(bucket2)]

            # Stage 4: add the square to the bucket and write it back. The read (transparent)
            # saw every write up to its own cycle's; the one write it missed is the previous
            # cycle's, whose sum is forwarded when it was to the same bucket.
            add4 = Signal(name=f"add4_{lane}")
            square4 = Signal(48, name=f"square4_{lane}")
            bucket4 = Signal(range(BUCKETS), name=f"bucket4_{lane}")
            stored4 = Signal(BUCKET_WIDTH, name=f"stored4_{lane}")
            forward4 = Signal(name=f"forward4_{lane}")
            sum4 = Signal(BUCKET_WIDTH, name=f"sum4_{lane}")
            written = Signal(BUCKET_WIDTH, name=f"written_{lane}")  # the previous cycle's sum
            m.d.sync += [add4.eq(add3), square4.eq(square3), bucket4.eq(bucket3), stored4.eq(read.data),
                         forward4.eq(add4 & (bucket4 == bucket3)), written.eq(sum4)]
            m.d.comb += sum4.eq(Mux(forward4, written, stored4) + square4)
            in_flight += [live0, add1, add2, add3, add4]

            m.d.comb += read.addr.eq(Mux(reading, index, bucket2))
            with m.If(read_valid):
                # Each bucket is zeroed in the cycle after it was read.
                m.d.comb += [write.addr.eq(read_index), write.data.eq(0), write.en.eq(1)]
            with m.Else():
                m.d.comb += [write.addr.eq(bucket4), write.data.eq(sum4), write.en.eq(add4)]
            bucket_sums.append(read.data)

        for count, bits in ((self.nan_count, nan_bits), (self.inf_count, inf_bits)):
            with m.If(self.clear):
                m.d.sync += count.eq(0)
            with m.Else():
                m.d.sync += count.eq(count + sum(bits))

        total = Signal(BUCKET_WIDTH + (lanes - 1).bit_length())
        with m.If(read_valid):
            m.d.sync += total.eq(sum(bucket_sums))
        m.d.sync += [read_valid.eq(reading), read_index.eq(index), total_valid.eq(read_valid)]
        settling = Signal(range(len(_SEGMENT_WIDTHS)))  # carry-resolution cycles left
        start = Signal()
        m.d.comb += start.eq(pending & ~Cat(*in_flight).any() & ~reading & (settling == 0))
        self._accumulate(m, total, fold=total_valid & ~scrubbing, settle=settling != 0,
                         zero=self.clear | start)

        with m.If(self.drain):
            m.d.sync += pending.eq(1)
        with m.If(start):
            m.d.sync += [pending.eq(0), reading.eq(1), index.eq(BUCKETS - 1)]
        with m.If(reading):
            m.d.sync += index.eq(index - 1)
            with m.If(index == 0):
                m.d.sync += reading.eq(0)
        m.d.comb += finishing.eq(total_valid & ~read_valid)
        with m.If(finishing & ~scrubbing):
            m.d.sync += settling.eq(len(_SEGMENT_WIDTHS) - 1)
        with m.Elif(settling != 0):
            m.d.sync += settling.eq(settling - 1)
        m.d.sync += self.done.eq(settling == 1)
        with m.If(finishing):
            m.d.sync += scrubbing.eq(0)
        m.d.comb += self.busy.eq(pending | reading | read_valid | total_valid | (settling != 0))
        return m

    def _accumulate(self, m, total, *, fold, settle, zero):
        """``accumulator = 4 * accumulator + total`` on :data:`SEGMENT_WIDTH`-bit segments.

        A 586-bit addition in one cycle is a 586-bit carry chain (42 MHz on ECP5). Each
        segment instead adds on its own and keeps its carry-out (at most 2) in a register
        for the next segment's next addition, so the sum is ``segments + carries``. After
        the last ``total``, ``settle`` adds the carries in without shifting, one segment
        further each cycle: after ``len(segments) - 1`` cycles every carry is zero and the
        segments are the exact sum. Carries out of the top segment are dropped, as the
        586-bit register dropped them.
        """
        segments = [Signal(width, name=f"segment{j}") for j, width in enumerate(_SEGMENT_WIDTHS)]
        # carries[j]: into segment j; none into the lowest, and the top one's is dropped.
        carries = [Const(0, 2)] + [Signal(2, name=f"carry{j}") for j in range(1, len(segments))] + [Signal(2)]
        for j, (segment, width) in enumerate(zip(segments, _SEGMENT_WIDTHS, strict=True)):
            below = segments[j - 1][-2:] if j else Const(0, 2)
            addend = total[SEGMENT_WIDTH * j:SEGMENT_WIDTH * (j + 1)]
            carry_in, carry_out = carries[j], carries[j + 1]
            folded = Signal(width + 2, name=f"folded{j}")
            settled = Signal(width + 1, name=f"settled{j}")
            m.d.comb += [folded.eq(Cat(below, segment[:width - 2]) + (carry_in << 2) + addend),
                         settled.eq(segment + carry_in)]
            with m.If(zero):
                m.d.sync += [segment.eq(0), carry_out.eq(0)]
            with m.Elif(fold):
                m.d.sync += [segment.eq(folded[:width]), carry_out.eq(folded[width:])]
            with m.Elif(settle):
                m.d.sync += [segment.eq(settled[:width]), carry_out.eq(settled[width:])]
        m.d.comb += self.accumulator.eq(Cat(*segments))


register_block(
    "gradient_statistics", GradientStatistics, family="optim",
    summary="Statistics mode: NaN/Inf counts and the exact 586-bit Kulisch sum of squares of gradient lanes.",
    golden="golden.optim.host:reference_statistics",
    drops=NO_DROPS,
)
