"""A node's dense GEMM unit (kernel id 1): a task's output rows times ``W``, on ``tiled_gemm``."""

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..net.packet import ITEMS, LINE_BITS, ROW_BITS
from ..systolic.tiled_gemm import TiledGemm

__all__ = ["NodeGemm", "gemm_job_layout", "lowest_set_bit"]


def gemm_job_layout():
    """One task's GEMM: its runnable slots' output ``rows`` (``mask``), ``W``'s first line ``col`` and
    the shape ``k`` x ``n``."""
    return data.StructLayout({"rows": data.ArrayLayout(ROW_BITS, ITEMS), "mask": ITEMS, "col": ROW_BITS,
                              "k": 4, "n": 4})


def lowest_set_bit(m, name, bits):
    """The index of the lowest set bit of ``bits`` (0 when none is set)."""
    index = Signal(range(max(2, len(bits))), name=name)
    for bit in reversed(range(len(bits))):
        with m.If(bits[bit]):
            m.d.comb += index.eq(bit)
    return index


def _line_words(m, name, start, lines, address, data, words, out):
    """Stream ``words`` 32-bit words of each line whose bit is set in ``lines`` (lowest first) to ``out``.

    ``address(index)`` is line ``index``'s read address on a port whose ``data`` follows its
    address one cycle later; ``start`` (a pulse) loads ``lines``. Each line is read once into a
    register (two idle cycles per line: the read, then the capture), then its words leave one per
    transfer. Returns the read address.
    """
    left = Signal(len(lines), name=f"{name}_left")
    index = lowest_set_bit(m, f"{name}_index", left)
    fetched, held = Signal(name=f"{name}_fetched"), Signal(name=f"{name}_held")
    word = Signal(4, name=f"{name}_word")
    line = Signal(len(data), name=f"{name}_line")
    addr = Signal(ROW_BITS, name=f"{name}_addr")
    m.d.comb += [addr.eq(address(index)), out.payload.eq(line.word_select(word, 32))]
    with m.If(start):
        m.d.sync += [left.eq(lines), fetched.eq(0), held.eq(0), word.eq(0)]
    with m.Elif(held):
        m.d.comb += out.valid.eq(1)
        with m.If(out.ready):
            m.d.sync += word.eq(word + 1)
            with m.If(word == words - 1):
                m.d.sync += [word.eq(0), held.eq(0), left.eq(left & ~(1 << index))]
    with m.Elif(fetched):
        m.d.sync += [line.eq(data), held.eq(1), fetched.eq(0)]
    with m.Elif(left != 0):
        m.d.sync += fetched.eq(1)
    return addr


class NodeGemm(wiring.Component):
    """``OUT[rows_i] = OUT[rows_i][:k] W`` for a task's runnable slots, ``W`` = ``k`` data lines from ``col``.

    A job (one GEMM task, :func:`gemm_job_layout`) is one ``tiled_gemm`` command ``{M, k, n}``
    with ``M`` the runnable slots: the unit streams A (the first ``k`` words of each slot's output
    row, in slot order) from the output memory and ``W`` (words ``0 .. n - 1`` of lines ``col ..
    col + k - 1``) from the data memory, both at once into the GEMM's buffers; every row is read
    before the first result is written back, so the product replaces its rows in place. Results
    are binary32 (:func:`golden.systolic.gemm` ``element="f32"``: a chain of rounded products in
    increasing ``k``), words past ``n`` zero. The array is 1 x ``features`` PEs with 4
    accumulator slots (one m-tile holds a task's 4 rows, one n-tile a row's words).

    Parameters
    ----------
    features : int
        32-bit words per output row (the largest ``k`` and ``n``), 1 to 14.

    Attributes
    ----------
    job : In(stream.Signature(gemm_job_layout()))
        Taken when idle; ``mask`` must not be 0, ``k`` and ``n`` must be in 1 .. ``features``.
    done : Out(1)
        A pulse with the job's last result write.
    a_addr : Out(24)
    a_data : In(32 features)
        The output memory's read port (data one cycle after the address).
    w_addr : Out(24)
    w_data : In(448)
        The data memory's kernel read port (data one cycle after the address).
    write : Out(stream.Signature(StructLayout(row, data), always_ready=True))
        Result rows for the output memory (valid-only).
    busy : Out(1)
    """

    def __init__(self, *, features=4):
        self._features = features
        width = 32 * features
        super().__init__({
            "job": In(stream.Signature(gemm_job_layout())),
            "done": Out(1),
            "a_addr": Out(ROW_BITS),
            "a_data": In(width),
            "w_addr": Out(ROW_BITS),
            "w_data": In(LINE_BITS),
            "write": Out(stream.Signature(data.StructLayout({"row": ROW_BITS, "data": width}),
                                          always_ready=True)),
            "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        features = self._features
        m.submodules.gemm = gemm = TiledGemm(rows=1, cols=features, element="f32", slots=ITEMS, max_m=ITEMS,
                                             max_k=features, max_n=features)
        job = Signal(gemm_job_layout())
        active, commanded = Signal(), Signal()
        start = self.job.valid & self.job.ready
        m.d.comb += [self.job.ready.eq(~active), self.busy.eq(active)]
        with m.If(start):
            m.d.sync += [job.eq(self.job.payload), active.eq(1), commanded.eq(0)]

        # The command waits for the job to be latched; the fills wait for the command.
        command = gemm.cmd.payload
        m.d.comb += [gemm.cmd.valid.eq(active & ~commanded),
                     command.m.eq(sum(job.mask[index] for index in range(ITEMS))),
                     command.k.eq(job.k), command.n.eq(job.n)]
        with m.If(gemm.cmd.valid & gemm.cmd.ready):
            m.d.sync += commanded.eq(1)
        m.d.comb += self.a_addr.eq(_line_words(m, "a", start, self.job.payload.mask, lambda i: job.rows[i],
                                               self.a_data, job.k, gemm.a))
        w_lines = Cat(*(self.job.payload.k > index for index in range(features)))  # k ones
        m.d.comb += self.w_addr.eq(_line_words(m, "w", start, w_lines, lambda i: job.col + i, self.w_data,
                                               job.n, gemm.b))

        # Results, one row per transfer in slot order, written back to their rows.
        results = Signal(ITEMS)
        slot = lowest_set_bit(m, "result_slot", results)
        with m.If(start):
            m.d.sync += results.eq(self.job.payload.mask)
        c = gemm.c
        m.d.comb += [c.ready.eq(1), self.write.valid.eq(c.valid), self.write.payload.row.eq(job.rows[slot]),
                     self.write.payload.data.eq(Cat(*(c.payload.data[lane] for lane in range(features))))]
        with m.If(c.valid):
            m.d.sync += results.eq(results & ~(1 << slot))
            with m.If(c.payload.last):
                m.d.comb += self.done.eq(1)
                m.d.sync += active.eq(0)
        return m
