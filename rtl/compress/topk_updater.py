"""The fused Top-K updater kernel: one Vitis-style kernel whose gradient is a chunked Top-K pair stream."""

from amaranth.hdl import Cat, Const, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import Out

from ..bus.axi import AXI4Signature, check_data_width
from ..optim.optimizers import OPTIMIZERS
from ..optim.updater_core import ARITHMETIC_PARAM
from ..optim.updater_kernel import PORT_MODES, GradientSource, UpdaterKernel
from ..registration import Param, check_int, register_block
from .axi_decompressor import AXIChunkDecompressor
from .chunk_parser import COUNTER_WIDTH, ERROR_NAMES
from .layouts import VALUE_FORMAT_PARAM, WORD_WIDTH

__all__ = ["TopKUpdaterKernel", "TOPK_LANE_CHOICES", "ERROR_PAIRS_READ", "ERROR_PAIRS_RESP_SHIFT",
           "ERROR_SCATTER_OVERFLOW"]

TOPK_LANE_CHOICES = (1, 2, 4, 8, 16)
# Bits of the `error` register the dense kernel leaves at 0.
ERROR_PAIRS_READ = 1 << 2
ERROR_PAIRS_RESP_SHIFT = 12
ERROR_SCATTER_OVERFLOW = 1 << 3


class TopKUpdaterKernel(UpdaterKernel):
    """An :class:`~rtl.optim.updater_kernel.UpdaterKernel` whose gradient arrives as Top-K pairs in DRAM.

    The same kernel as the dense one (``ap_ctrl_hs`` AXI4-Lite control, chunked parameter and
    state traffic, the 16-bit parameter copy, status, error and cycle/beat counters), except for
    the gradient: instead of a dense gradient tensor read through the memory ports, an
    :class:`~rtl.compress.axi_decompressor.AXIChunkDecompressor` reads the shard's chunked
    Top-K wire stream (``pairs_words`` 64-bit words at ``pairs_address``, chunk size
    ``chunk_elements``) from its own AXI4 master ``m_axi_pairs``, scatters each chunk into an
    on-chip double buffer and streams the dense f32 chunk straight into the updater core's
    gradient lanes. No dense gradient is written to DRAM or read from it. The outputs are
    bit-exact with :func:`golden.optim.host.reference_update` applied (``grad_format="f32"``)
    to the dense gradient :func:`golden.compress.scatter_stream` rebuilds from the stream, and
    the error counters with that function's counters.

    **Ports.** ``ports="shared"``: parameter, states and copy on ``m_axi_gmem``, the pair
    stream on ``m_axi_pairs``; ``ports="separate"``: one master per tensor plus
    ``m_axi_pairs``. The pair stream always has its own master (same data width): its reads
    are not chunk-aligned with the state reads, and keeping them off the state port means
    neither can starve the other. On a card, ``m_axi_pairs`` may be linked to the same DRAM
    bank as ``m_axi_gmem``. ``pairs_address`` must be ``data_width // 8``-byte aligned; the
    read is rounded up to whole beats (memory after the stream may be read, never written).

    **Reset.** As the dense kernel's: ``rst`` may cut a run if it resets every AXI slave,
    ``m_axi_pairs``'s included, with the kernel; otherwise only while the kernel is idle.

    **Statistics mode** (``mode`` = 1) computes the NaN and Inf counts and the exact sum of
    squares of the decompressed gradient; nothing is written.

    **Errors.** The decompressor's five counters (40 bits, saturating) and their sticky bits
    (``pairs_status``) describe the stream of the last run. A SLVERR/DECERR on the pair stream
    sets ``error`` bit 2 and bits 13:12 (its response) and stops the memory ports as a dense
    read error does (no write starts; the run still ends). Bit 3 is the scatter engine's sticky
    ``overflow`` (a bank queue lost an update: never, unless its credit accounting is broken;
    until reset). Bits 0, 1, 9:8, 11:10 are the dense kernel's.

    Parameters
    ----------
    optimizer : {"adam", "sgd", "adagrad"}
    lanes : int
        Updater elements per cycle (the decompressor's ``out_lanes``): 1, 2, 4, 8 or 16.
    data_width : int
        AXI data width of every master, a power of two from 64 to 1024; the pair reader takes
        ``data_width // 64`` wire words per beat (its scatter lanes).
    ports : {"shared", "separate"}
    chunk_elements : int
        Elements per chunk of the updater and of the pair stream: a power of two, a multiple
        of ``lanes`` and of ``data_width // 16``, and at least twice the scatter banks
        (``max(lanes, 2 * data_width // 64)``).
    value_format : {"f32", "f16"}
        Value encoding of the pairs.
    max_burst, max_outstanding, arithmetic
        As :class:`~rtl.optim.updater_kernel.UpdaterKernel` (also the pair reader's).
    rw_phases : bool
        As :class:`~rtl.optim.updater_kernel.UpdaterKernel`: read and write phases on the
        parameter/state port(s), for one-bus DRAM (the pair reader is not phased).

    Attributes
    ----------
    s_axi_control, irq, m_axi_gmem or m_axi_<tensor>
        As :class:`~rtl.optim.updater_kernel.UpdaterKernel` (without a gradient tensor).
    m_axi_pairs : Out(AXI4Signature(64, data_width))
        Reads the pair stream; never writes.

    Notes
    -----
    Throughput: ``lanes`` elements per cycle as the dense kernel, as long as each chunk's pairs
    scatter within one chunk drain (``chunk_elements / lanes`` cycles; see docs/compress.md
    section 4). Latency: the dense kernel's, plus the decompressor's first-chunk scatter.
    """

    PARAMS = (
        Param("optimizer", str, "adam", "which optimizer", choices=tuple(OPTIMIZERS)),
        Param("lanes", int, 1, "updater elements per cycle", choices=TOPK_LANE_CHOICES),
        Param("data_width", int, 512, "AXI data width in bits (power of two; pair words per beat = /64)",
              minimum=64, maximum=1024),
        Param("ports", str, "shared", "param/state/copy on one AXI4 master or one per tensor (pairs: own "
              "master)", choices=PORT_MODES),
        Param("chunk_elements", int, 1024, "elements per chunk of updater and pair stream (power of two)",
              minimum=2, maximum=1 << 20),
        VALUE_FORMAT_PARAM,
        Param("max_burst", int, 64, "longest AXI burst in beats", minimum=1, maximum=256),
        Param("max_outstanding", int, 4, "bursts in flight per direction and port", minimum=2, maximum=64),
        Param("rw_phases", bool, False, "alternate read and write phases of a chunk's writes (one-bus DRAM)"),
        ARITHMETIC_PARAM,
    )

    GRADIENT_TENSORS = ()

    def __init__(self, *, optimizer="adam", lanes=1, data_width=512, ports="shared", chunk_elements=1024,
                 value_format="f32", max_burst=64, max_outstanding=4, rw_phases=False, arithmetic=True):
        check_data_width(data_width, 64)
        self._value_format = value_format
        self._wire_lanes = data_width // WORD_WIDTH
        # Two banks per wire lane keep the scatter at one pair per lane and cycle (docs/compress.md).
        self._banks = max(lanes, 2 * self._wire_lanes)
        check_int("chunk_elements", chunk_elements, 2 * self._banks, 1 << 20)
        if chunk_elements & (chunk_elements - 1):
            raise ValueError(f"chunk_elements must be a power of two (the pair stream's chunk), "
                             f"not {chunk_elements}")
        super().__init__(optimizer=optimizer, lanes=lanes, data_width=data_width, ports=ports,
                         chunk_elements=chunk_elements, max_burst=max_burst, max_outstanding=max_outstanding,
                         rw_phases=rw_phases, arithmetic=arithmetic)
        self.parameters["value_format"] = value_format

    # ------------------------------------------------------------------ ports and registers
    def _extra_ports(self):
        return {"m_axi_pairs": Out(AXI4Signature(address_width=64, data_width=self._data_width))}

    def _arguments(self):
        args = []
        for entry in super()._arguments():
            name = entry[0]
            if name == "grad_format":  # the scatter's sums are f32
                continue
            if name == "n":
                args.append(("pairs_address", 64, f"byte address of the chunked Top-K pair stream "
                                                  f"(64-bit wire words, {self._value_format} values), "
                                                  f"{self._data_width // 8}-byte aligned"))
                args.append(("pairs_words", 32, "length of the pair stream in 64-bit words (headers "
                                                "and pairs; 0 = empty stream)"))
                args.append(("sorted", 32, "bit 0: the sender promises non-decreasing indices in "
                                           "each chunk (checked: unsorted counter)"))
            args.append(entry)
        return args

    def _status(self):
        status = []
        for name, width, description in super()._status():
            if name == "error":
                description = ("bit 0 read error, bit 1 write error (SLVERR/DECERR on param/state/copy); "
                               "bits 9:8 first read response, bits 11:10 first write response; bit 2 pair "
                               "stream read error, bits 13:12 its response; bit 3 scatter queue overflow")
            status.append((name, width, description))
        status.append(("pairs_status", 32, "sticky pair-stream errors of the last run: bit 0 out of "
                                           "range, 1 chunk violation, 2 unsorted, 3 excess pairs, "
                                           "4 missing (golden.compress.ScatterStatus)"))
        status += [(name, COUNTER_WIDTH, f"pair-stream error counter {name} of the last run "
                                         f"(saturating, golden.compress.scatter_stream)")
                   for name in ERROR_NAMES]
        return status

    @property
    def value_format(self):
        return self._value_format

    # ------------------------------------------------------------------ the gradient from pairs
    def _gradient_source(self, m, run):
        """The dense gradient lanes of an :class:`AXIChunkDecompressor` reading the pair stream."""
        lanes = self._lanes
        args, status = run.args, run.control.status
        m.submodules.decompressor = decompressor = AXIChunkDecompressor(
            lanes=self._wire_lanes, chunk_size=self._chunk, value_format=self._value_format,
            banks=self._banks, out_lanes=lanes, address_width=64, max_burst=self._max_burst,
            max_outstanding=self._max_outstanding)
        wiring.connect(m, decompressor.m_axi, wiring.flipped(self.m_axi_pairs))

        # One transfer per run: the command is raised at `begin` and held until taken (the
        # decompressor is idle then: the previous run ended only once it was).
        pending = Signal()
        with m.If(run.begin):
            m.d.sync += pending.eq(1)
        with m.Elif(decompressor.cmd.ready):
            m.d.sync += pending.eq(0)
        command = decompressor.cmd.payload
        m.d.comb += [
            decompressor.cmd.valid.eq(pending),
            command.address.eq(args.pairs_address),
            command.words.eq(args.pairs_words),
            command.size.eq(run.n),
            command.sorted.eq(args.sorted[0]),
            decompressor.clear.eq(run.begin),
            status.pairs_status.eq(decompressor.status),
        ]
        for name in ERROR_NAMES:
            m.d.comb += getattr(status, name).eq(getattr(decompressor.errors, name))

        take = Signal(name="grad_take")
        m.d.comb += decompressor.o.ready.eq(take)
        flags = Cat(Const(0, 2), decompressor.read_error, decompressor.scatter_overflow,
                    Const(0, ERROR_PAIRS_RESP_SHIFT - 4), decompressor.read_error_resp)
        return GradientSource(
            valid=decompressor.o.valid, ready=take,
            lanes=[decompressor.o.payload.data[lane] for lane in range(lanes)],
            grad_format=Const(0, 2),
            # The run ends once the transfer is taken and parsed and its last chunk drained.
            quiet=[~pending, ~decompressor.busy],
            read_error=decompressor.read_error, error_flags=flags)


register_block(
    "topk_updater", TopKUpdaterKernel, family="compress",
    summary="Fused Top-K updater kernel: pairs in DRAM -> on-chip scatter -> optimizer step; AXI4-Lite "
            "ap_ctrl_hs, no dense gradient in DRAM.",
    golden="golden.optim.host:reference_update",
    drops={
        "s_axi_control": ("the error register (bits 0/1: a read/write answered SLVERR/DECERR, after which "
                          "the run's remaining writes are discarded); bit 2 a pair-stream read error; bit 3 "
                          "a scatter queue overflow; and the pair-stream counters of the last run"),
    },
)
