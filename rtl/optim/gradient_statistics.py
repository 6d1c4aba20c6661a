"""Statistics mode: NaN and Inf counts and the exact (Kulisch) sum of squares of a gradient stream."""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import memory, stream, wiring
from amaranth.lib.wiring import In, Out

from ..registration import Param, check_int, register_block
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
# Input register, significand and bucket, square, read-modify-write.
_PIPELINE = 4


class GradientStatistics(wiring.Component):
    """NaN count, Inf count and the exact sum of squares of binary32 gradient lanes.

    This is the statistics mode of the updater (Smart-Infinity Section IV-C: the NaN/Inf
    check of loss scaling and the global norm of gradient clipping), bit-exact with
    :func:`golden.optim.gradient_statistics`. A finite element ``M * 2**E`` (``M`` the
    24-bit significand, ``e`` the biased exponent field) contributes ``M**2 << 2b`` with
    ``b = max(e, 1) - 1``. Each lane owns a block RAM of :data:`BUCKETS` exact
    :data:`BUCKET_WIDTH`-bit sums, one per ``b``, updated by a one-cycle read-modify-write
    (the read port is transparent to the write port, so back-to-back elements in one
    bucket add up). ``drain`` then folds the buckets of all lanes, from the top bucket down,
    into the 586-bit fixed-point accumulator by Horner's rule, ``acc = 4 * acc + sum_b``,
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
        The exact sum of squares in units of ``2**-298``, valid after ``done``.

    Notes
    -----
    Latency: counts are current 1 cycle after a transfer; a drain takes ``BUCKETS + 3``
    cycles once the 4-stage accumulate pipeline is empty. Throughput: one transfer
    (``lanes`` elements) per cycle.

    Reset: the bucket RAMs are not reset, so a reset in the middle of a run (or of a drain)
    would leave partial sums in them for the next run to add to. After every reset the
    unit therefore walks the buckets as a drain does and zeroes them, without a result or a
    ``done`` pulse: ``BUCKETS + 2`` cycles with ``busy`` high and ``i.ready`` low. Send
    nothing (and do not drain) until ``busy`` falls; the kernel holds its ``ap_idle`` low
    meanwhile.
    """

    throughput = 1

    def __init__(self, *, lanes=1):
        self._lanes = check_int("lanes", lanes, 1, MAX_LANES)
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

            # Stage 2: the exact square; the bucket is read here.
            add2 = Signal(name=f"add2_{lane}")
            square2 = Signal(48, name=f"square2_{lane}")
            bucket2 = Signal(range(BUCKETS), name=f"bucket2_{lane}")
            m.d.sync += [add2.eq(add1), square2.eq(significand1 * significand1), bucket2.eq(bucket1)]

            # Stage 3: add the square to the bucket and write it back.
            add3 = Signal(name=f"add3_{lane}")
            square3 = Signal(48, name=f"square3_{lane}")
            bucket3 = Signal(range(BUCKETS), name=f"bucket3_{lane}")
            m.d.sync += [add3.eq(add2), square3.eq(square2), bucket3.eq(bucket2)]
            in_flight += [live0, add1, add2, add3]

            m.d.comb += read.addr.eq(Mux(reading, index, bucket2))
            with m.If(read_valid):
                # Each bucket is zeroed in the cycle after it was read.
                m.d.comb += [write.addr.eq(read_index), write.data.eq(0), write.en.eq(1)]
            with m.Else():
                m.d.comb += [write.addr.eq(bucket3), write.data.eq(read.data + square3), write.en.eq(add3)]
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
        with m.If(self.clear):
            m.d.sync += self.accumulator.eq(0)
        with m.Elif(total_valid & ~scrubbing):
            m.d.sync += self.accumulator.eq((self.accumulator << 2) + total)

        with m.If(self.drain):
            m.d.sync += pending.eq(1)
        with m.If(pending & ~Cat(*in_flight).any() & ~reading):
            m.d.sync += [pending.eq(0), reading.eq(1), index.eq(BUCKETS - 1), self.accumulator.eq(0)]
        with m.If(reading):
            m.d.sync += index.eq(index - 1)
            with m.If(index == 0):
                m.d.sync += reading.eq(0)
        m.d.comb += finishing.eq(total_valid & ~read_valid)
        m.d.sync += self.done.eq(finishing & ~scrubbing)
        with m.If(finishing):
            m.d.sync += scrubbing.eq(0)
        m.d.comb += self.busy.eq(pending | reading | read_valid | total_valid)
        return m


register_block(
    "gradient_statistics", GradientStatistics, family="optim",
    summary="Statistics mode: NaN/Inf counts and the exact 586-bit Kulisch sum of squares of gradient lanes.",
    params=[Param("lanes", int, 1, "elements per transfer", minimum=1, maximum=MAX_LANES)],
)
