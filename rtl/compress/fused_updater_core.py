"""Fused mode: the Top-K chunk decompressor feeding an optimizer updater core's gradient lanes."""

from amaranth.hdl import Module
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..optim.optimizers import OPTIMIZERS
from ..optim.updater_core import ARITHMETIC_PARAM, UpdaterCore, core_output_layout
from ..registration import Param, Parameterized, register_block
from .chunk_decompressor import CHUNK_SIZE_PARAM, ChunkDecompressor, decompressor_ports
from .chunk_parser import ERROR_NAMES, errors_layout
from .layouts import VALUE_FORMAT_PARAM, wire_layout
from .scatter import BANK_QUEUE_PARAM, BANK_WRITES_PARAM, LANE_CHOICES

__all__ = ["FusedUpdaterCore", "state_layout", "CORE_LANE_CHOICES"]

CORE_LANE_CHOICES = (1, 2, 4, 8, 16)


def state_layout(optimizer, lanes):
    """``{"mask": lanes, "lanes": [{"param", <states>} x lanes]}``: the core input without ``grad``."""
    spec = OPTIMIZERS[optimizer]
    element = data.StructLayout({name: 32 for name in ("param",) + spec.states})
    return data.StructLayout({"mask": lanes, "lanes": data.ArrayLayout(element, lanes)})


class FusedUpdaterCore(Parameterized, wiring.Component):
    """One optimizer step whose gradient arrives as chunked Top-K pairs, never as a dense tensor.

    A :class:`~rtl.compress.chunk_decompressor.ChunkDecompressor` turns the chunked wire stream of
    a shard into dense float32 gradient beats of ``lanes`` elements, in shard order; each beat is
    joined with the matching beat of the optimizer-state stream (parameter and states) into the
    input of an :class:`~rtl.optim.updater_core.UpdaterCore` with its gradient format fixed to f32.
    The result is bit-exact with :func:`golden.optim.host.reference_update` applied to the dense
    gradient :func:`golden.compress.scatter_stream` rebuilds (the decompressor's error handling
    included). The dense gradient exists only in the decompressor's two on-chip chunk buffers.

    Parameters
    ----------
    optimizer : {"adam", "sgd", "adagrad"}
        As :class:`~rtl.optim.updater_core.UpdaterCore`.
    lanes : int
        Elements per cycle of the updater (the decompressor's ``out_lanes``): 1, 2, 4, 8 or 16.
    wire_lanes : int
        64-bit wire words per input beat (the scatter lanes): 1, 2, 4, 8 or 16.
    chunk_size, value_format, banks, bank_writes, queue_depth
        As :class:`~rtl.compress.chunk_decompressor.ChunkDecompressor` (``banks`` >= ``lanes``).
    arithmetic : bool
        As :class:`~rtl.optim.updater_core.UpdaterCore`.

    Attributes
    ----------
    pairs : In(stream.Signature(wire_layout(wire_lanes)))
        The shard's chunked wire stream; ``last`` ends it.
    state : In(stream.Signature(state_layout(optimizer, lanes)))
        Parameter and states, ``ceil(size / lanes)`` beats in shard order, ``mask`` on the tail.
    o : Out(stream.Signature(core_output_layout(optimizer, lanes)))
        The core's results, one beat per state beat.
    size : In(32), sorted : In(1)
        The shard length and the sorted promise (sampled at the first wire beat).
    errors, status : Out
        The decompressor's error counters and sticky bits.
    scalars, copy_format, <flags>, nonfinite, clear
        The core's run-level ports (the gradient format is f32).
    scatter_overflow : Out(1)
        Sticky until reset: the scatter engine's bank queue overflowed and lost an update (its
        ``overflow``; never raised unless its credit accounting is broken).
    busy : Out(1)
        The decompressor is busy (the core's pipeline drains on its own).
    done : Out(1)
        Pulse: the wire stream is parsed and ``errors`` is final.

    Notes
    -----
    Throughput: one beat of ``lanes`` elements per cycle when the decompressor keeps up (see
    ``docs/compress.md``); latency: the decompressor's drain plus the core's ``latency``.
    """

    PARAMS = (
        Param("optimizer", str, "adam", "which optimizer", choices=tuple(OPTIMIZERS)),
        Param("lanes", int, 1, "updater elements per cycle (decompressor out_lanes)",
              choices=CORE_LANE_CHOICES),
        Param("wire_lanes", int, 4, "64-bit wire words per input beat (scatter lanes)", choices=LANE_CHOICES),
        CHUNK_SIZE_PARAM,
        VALUE_FORMAT_PARAM,
        Param("banks", int, 16, "scatter memory banks (power of two, >= lanes)", minimum=1, maximum=64),
        BANK_WRITES_PARAM,
        BANK_QUEUE_PARAM,
        ARITHMETIC_PARAM,
    )

    def __init__(self, *, optimizer="adam", lanes=1, wire_lanes=4, chunk_size=1024, value_format="f32",
                 banks=16, bank_writes=3, queue_depth=8, arithmetic=True):
        self._decompressor = ChunkDecompressor(lanes=wire_lanes, chunk_size=chunk_size,
                                               value_format=value_format, banks=banks, out_lanes=lanes,
                                               bank_writes=bank_writes, queue_depth=queue_depth)
        self._core = UpdaterCore(optimizer=optimizer, lanes=lanes, arithmetic=arithmetic)
        spec = OPTIMIZERS[optimizer]
        members = {
            "pairs": In(stream.Signature(wire_layout(wire_lanes))),
            "state": In(stream.Signature(state_layout(optimizer, lanes))),
            "o": Out(stream.Signature(core_output_layout(optimizer, lanes))),
            "size": In(32),
            "sorted": In(1),
            "errors": Out(errors_layout()),
            "status": Out(len(ERROR_NAMES)),
            "scatter_overflow": Out(1),
            "scalars": In(wiring.Signature({name: Out(32) for name in spec.scalars})),
            "copy_format": In(2),
            "nonfinite": Out(1),
            "clear": In(1),
            "busy": Out(1),
            "done": Out(1),
        }
        members.update({flag: In(1) for flag in spec.flags})
        self._flags = spec.flags
        super().__init__(members)

    @property
    def optimizer(self):
        return self._optimizer

    def elaborate(self, platform):
        m = Module()
        m.submodules.decompressor = decompressor = self._decompressor
        m.submodules.core = core = self._core
        wiring.connect(m, wiring.flipped(self.pairs), decompressor.i)
        wiring.connect(m, core.o, wiring.flipped(self.o))
        wiring.connect(m, wiring.flipped(self.scalars), core.scalars)

        # Join: a core input needs a gradient beat and a state beat; valid never waits for ready.
        dense, state = decompressor.o, self.state
        m.d.comb += [
            core.i.valid.eq(dense.valid & state.valid),
            dense.ready.eq(core.i.ready & state.valid),
            state.ready.eq(core.i.ready & dense.valid),
            core.i.payload.mask.eq(state.payload.mask),
        ]
        for lane in range(self._lanes):
            target, source = core.i.payload.lanes[lane], state.payload.lanes[lane]
            m.d.comb += target.grad.eq(dense.payload.data[lane])
            for name in ("param",) + OPTIMIZERS[self._optimizer].states:
                m.d.comb += getattr(target, name).eq(getattr(source, name))

        m.d.comb += [
            *decompressor_ports(decompressor, self, self.size, self.sorted),
            self.busy.eq(decompressor.busy),
            core.grad_format.eq(0),  # f32: the scatter's sums
            core.copy_format.eq(self.copy_format),
            core.clear.eq(self.clear),
            self.nonfinite.eq(core.nonfinite),
        ]
        for flag in self._flags:
            m.d.comb += getattr(core, flag).eq(getattr(self, flag))
        return m


register_block(
    "topk_fused_updater_core", FusedUpdaterCore, family="compress",
    summary="Fused mode: chunked Top-K pairs -> on-chip scatter -> updater core; no dense gradient in DRAM.",
    golden="golden.optim.host:reference_update",
    drops={
        "errors": ("pairs dropped by the parser: five 40-bit saturating counters (out_of_range, "
                   "chunk_violation, unsorted, excess_pairs, missing)"),
        "scatter_overflow": "sticky: a scatter bank queue (fed on credit) lost an update",
    },
)
