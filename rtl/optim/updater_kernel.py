"""The optimizer updater kernel: AXI4 masters, AXI4-Lite control, chunked streaming through the core.

The kernel's elaboration is put together here from the pieces of :mod:`.updater_control` (the
register map, the run's state machine, the status registers) and :mod:`.updater_datapath`
(sequencers, memory ports, converters, the join into the core and the fork out of it).
"""

import dataclasses
import math

from amaranth.hdl import Const, Module, Mux, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..bus.axi import AXI4LiteSignature, AXI4Signature
from ..bus.axi_lite_control import AXILiteControl
from ..fp.product import DEFAULT_TILE
from ..registration import Param, Parameterized, check_int, register_block
from .gradient_statistics import GradientStatistics
from .optimizers import OPTIMIZERS
from .updater_control import (
    ERROR_READ,
    ERROR_READ_RESP_SHIFT,
    ERROR_WRITE,
    ERROR_WRITE_RESP_SHIFT,
    MODE_STATISTICS,
    MODE_UPDATE,
    STATUS_NONFINITE,
    drive_status,
    kernel_arguments,
    kernel_status,
    run_control,
)
from .updater_core import ARITHMETIC_PARAM, PRODUCT_PARAMS, UpdaterCore
from .updater_datapath import (
    add_memory_ports,
    add_sequencers,
    add_unpackers,
    all_of,
    converter_factory,
    count_beats,
    drive_core_inputs,
    fork_from_core,
    join_into_core,
    route_commands,
    stop_on_errors,
    tensor_enables,
)

__all__ = ["UpdaterKernel", "GradientSource", "AdamUpdater", "SGDUpdater", "AdagradUpdater",
           "PORT_MODES", "LANE_CHOICES",
           "MODE_UPDATE", "MODE_STATISTICS", "STATUS_NONFINITE", "ERROR_READ", "ERROR_WRITE",
           "ERROR_READ_RESP_SHIFT", "ERROR_WRITE_RESP_SHIFT"]

PORT_MODES = ("shared", "separate")
LANE_CHOICES = tuple(range(1, 33))

@dataclasses.dataclass
class GradientSource:
    """Where the kernel's gradient lanes come from (what :meth:`UpdaterKernel._gradient_source` returns).

    Attributes
    ----------
    valid : Value
        A lane vector of gradient elements is available (held until taken).
    ready : Signal
        Driven by the kernel: the lane vector is taken this cycle (only while ``valid``).
    lanes : list of Value
        The gradient bits of each lane, as the core's ``grad`` field takes them.
    grad_format : Value
        The core's gradient format code (0 f32, 1 f16, 2 bf16).
    quiet : list of Value
        All high once the source has nothing left of the run (part of the run's end condition).
    read_error : Value
        A read of the source failed: stops the memory ports as their own errors do.
    error_flags : Value
        OR-ed into the ``error`` register (bits the dense kernel leaves at 0).
    """

    valid: Value
    ready: Signal
    lanes: list
    grad_format: Value
    quiet: list = dataclasses.field(default_factory=list)
    read_error: Value = dataclasses.field(default_factory=lambda: Const(0))
    error_flags: Value = dataclasses.field(default_factory=lambda: Const(0, 32))


# The parameters of a registered kernel: all but the optimizer, which each kernel class fixes.
_KERNEL_PARAMS = (
    # A small default keeps `make lint` quick; the main job and the benchmarks set 16.
    Param("lanes", int, 1, "elements per cycle", minimum=1, maximum=32),
    Param("data_width", int, 512, "AXI data width in bits (power of two)", minimum=64, maximum=1024),
    Param("ports", str, "shared", "one AXI4 master for all tensors, or one per tensor", choices=PORT_MODES),
    Param("chunk_elements", int, 1024, "elements per chunk (common multiple of lanes and data_width/16)",
          minimum=1, maximum=1 << 20),
    Param("max_burst", int, 64, "longest AXI burst in beats", minimum=1, maximum=256),
    Param("max_outstanding", int, 4, "bursts in flight per direction and port", minimum=2, maximum=64),
    Param("rw_phases", bool, False, "alternate read and write phases of a chunk's writes (one-bus DRAM)"),
    ARITHMETIC_PARAM,
    *PRODUCT_PARAMS,
)


class UpdaterKernel(Parameterized, wiring.Component):
    """A Vitis-style RTL kernel that runs one optimizer step over tensors in device memory.

    **Flow.** The host writes buffer addresses, the element count ``n``, the step's host
    scalars (:func:`golden.optim.step_scalars` as binary32 bits) and the formats, then
    starts the kernel (``ap_ctrl_hs``). The tensors are cut into chunks of
    ``chunk_elements``; a :class:`~rtl.optim.chunk_sequencer.ChunkSequencer` per direction
    issues one DMA command per tensor per chunk. Reads of later chunks run ahead of the
    computation as far as the buffers allow, and writes of earlier chunks trail it, so
    reading chunk ``j + 1``, computing chunk ``j`` and writing chunk ``j - 1`` overlap.
    Beats become lane vectors (:class:`~rtl.optim.counted_width_converter.CountedWidthConverter`),
    the lanes of all tensors are joined into the :class:`~rtl.optim.updater_core.UpdaterCore`
    (bit-exact with :mod:`golden.optim`), and its results are forked back into beats.
    Within a chunk the parameter and its 16-bit copy are written before the optimizer
    state (Smart-Infinity's transfer handler, Section IV-B).

    **Ports.** ``ports="shared"`` puts every tensor on one AXI4 master ``m_axi_gmem``
    (the paper's single 512-bit bundle); ``ports="separate"`` gives each tensor its own
    master ``m_axi_<tensor>``, so that memory with several channels can feed all lanes.
    Buffers must be aligned to ``data_width // 8`` bytes; the last beat of each output
    tensor is written with a byte strobe, so memory past the end is never written (it may
    be read).

    **Statistics mode** (``mode = 1``) reads the gradient only and returns its NaN count,
    Inf count and exact sum of squares (:class:`~rtl.optim.gradient_statistics.GradientStatistics`).

    **Errors.** A SLVERR or DECERR response sets the ``error`` register; from then on no
    write starts, reads return zeros, and the run finishes normally (it never hangs). The
    memory written by bursts that started before the error is valid; the rest of the
    outputs are not written.

    **Reset.** ``rst`` may rise at any cycle, a run in flight included, if it resets the
    kernel's AXI slaves (interconnect, memory controller) too, as AXI requires of ARESETn:
    both ends of every bus then drop the bursts in flight, the bus is idle when reset falls,
    and the next run is exact. The statistics unit first zeroes its buckets (``ap_idle``
    stays low about 260 cycles; a start waits). A reset of the kernel alone while a burst is
    open is not supported: the memory would still send R beats and B responses, and wait for
    W beats, of bursts the kernel has forgotten. Without a shared reset, reset the kernel
    only while it is idle (after ``ap_done``), when no burst is open (docs/optim.md, *Reset*).

    The register map is :meth:`register_map` (and docs/optim.md).

    **Gradient source.** The gradient lanes come from :meth:`_gradient_source`; this class
    reads the dense tensor ``grad`` (tensors of :attr:`GRADIENT_TENSORS`). A subclass may
    take them from elsewhere (:class:`rtl.compress.topk_updater.TopKUpdaterKernel`:
    a Top-K pair stream through an on-chip decompressor), with its own ports, registers and
    statuses (:meth:`_arguments`, :meth:`_status`, :meth:`_extra_ports`).

    Parameters
    ----------
    optimizer : {"adam", "sgd", "adagrad"}
    lanes : int
        Elements per cycle, 1 to 32 (default 1; Smart-Infinity's kernel has 16). Where
        neither the beat nor the lane vector divides the other (say 3 lanes and 2-word
        beats), a :class:`~rtl.optim.counted_gearbox.CountedGearbox` converts between them. A
        count that is not a power of two first spends 33 cycles of each run dividing ``n``
        by ``lanes`` (not counted in ``cycles``).
    data_width : int
        AXI data width in bits, a power of two from 64 to 1024 (512 on Alveo and SmartSSD).
    ports : {"shared", "separate"}
        One AXI4 master for all tensors, or one per tensor.
    chunk_elements : int
        Elements per chunk, a multiple of ``lanes`` and of ``data_width // 16`` (so chunk
        boundaries fall on both lane vectors and beats).
    max_burst, max_outstanding : int
        DMA burst length (beats) and bursts in flight per direction and port.
    rw_phases : bool
        For DRAM with one data bus that turns around between reads and writes (the SmartSSD's
        DDR4): each memory port alternates a read phase and a write phase of at least one
        chunk's writes (:class:`~rtl.optim.memory_port.MemoryPort`'s ``batch``), so a
        turnaround is paid about once per chunk instead of once per burst. Default False:
        reads and writes overlap, which suits memory with a read and a write path (and
        ``AxiRam``).
    arithmetic : bool
        ``False`` replaces the core's floating-point datapath by its timing alone (see
        :class:`~rtl.optim.updater_core.UpdaterCore`): cycle counts are unchanged and
        nothing is computed. For cycle benchmarks of wide kernels only.
    dsp_tile, lut_bits : int
        The significand-product mapping of the core's multipliers and FMAs (see
        :class:`~rtl.optim.updater_core.UpdaterCore`); the defaults (18, 0) suit ECP5, and
        ``dsp_tile=24, lut_bits=7`` brings Adam to 10 DSP48E2 per lane on xcup. Bit-exact
        for every choice.

    Attributes
    ----------
    s_axi_control : In(AXI4LiteSignature(12, 32))
        Host register port.
    irq : Out(1)
        Interrupt (the Vitis ``interrupt`` port).
    m_axi_gmem or m_axi_<tensor> : Out(AXI4Signature(64, data_width))
        Memory ports.
    """

    PARAMS = (Param("optimizer", str, "adam", "the optimizer step", choices=tuple(OPTIMIZERS)),
              *_KERNEL_PARAMS)

    #: Tensors read from memory for the gradient (none when a subclass supplies it otherwise).
    GRADIENT_TENSORS = ("grad",)

    def __init__(self, *, optimizer="adam", lanes=1, data_width=512, ports="shared", chunk_elements=1024,
                 max_burst=64, max_outstanding=4, rw_phases=False, arithmetic=True, dsp_tile=DEFAULT_TILE,
                 lut_bits=0):
        self._spec = OPTIMIZERS[optimizer]
        if data_width & (data_width - 1):
            raise ValueError(f"data_width must be a power of two, not {data_width}")
        granule = math.lcm(lanes, data_width // 16)
        self._chunk = check_int("chunk_elements", chunk_elements, granule, 1 << 20)
        if chunk_elements % granule:
            raise ValueError(f"chunk_elements must be a multiple of {granule} (lanes and 16-bit elements "
                             f"per beat), not {chunk_elements}")
        self._max_burst = max_burst
        self._products = {"dsp_tile": dsp_tile,
                          "lut_bits": lut_bits}
        self.parameters = {"lanes": lanes, "data_width": data_width, "ports": ports,
                           "chunk_elements": chunk_elements, "max_burst": max_burst,
                           "max_outstanding": max_outstanding, "rw_phases": rw_phases,
                           "arithmetic": arithmetic, **self._products}
        states = self._spec.states
        self.read_tensors = ("param",) + self.GRADIENT_TENSORS + states
        self.write_tensors = ("param", "param16") + states
        self._buffers = ("param",) + self.GRADIENT_TENSORS + states + ("param16",)
        if ports == "shared":
            self.port_tensors = {"gmem": (self.read_tensors, self.write_tensors)}
        else:
            self.port_tensors = {name: (tuple(t for t in self.read_tensors if t == name),
                                        tuple(t for t in self.write_tensors if t == name))
                                 for name in self._buffers}
        self._registers = {"arguments": self._arguments(), "status": self._status()}
        members = {
            "s_axi_control": In(AXI4LiteSignature(address_width=12, data_width=32)),
            "irq": Out(1),
        }
        for name in self.port_tensors:
            members[f"m_axi_{name}"] = Out(AXI4Signature(address_width=64, data_width=data_width))
        members.update(self._extra_ports())
        super().__init__(members)

    def _extra_ports(self):
        """Ports beyond the control port, the interrupt and the tensors' memory ports (none here)."""
        return {}

    # ------------------------------------------------------------------ register map
    def _arguments(self):
        return kernel_arguments(self._spec, self._buffers, self._data_width)

    def _status(self):
        return kernel_status()

    def register_map(self):
        """The AXI4-Lite register map (see :meth:`rtl.bus.axi_lite_control.AXILiteControl.register_map`)."""
        control = AXILiteControl(**self._registers)
        control._MustUse__silence = True  # built only to describe the map
        return control.register_map()

    @property
    def optimizer(self):
        return self._spec.name

    # ------------------------------------------------------------------ elaboration
    def elaborate(self, platform):
        m = Module()
        lanes, dw = self._lanes, self._data_width
        m.submodules.control = control = AXILiteControl(**self._registers)
        wiring.connect(m, wiring.flipped(self.s_axi_control), control.s_axi_control)
        m.d.comb += self.irq.eq(control.irq)
        m.submodules.core = core = UpdaterCore(optimizer=self._spec.name, lanes=lanes,
                                               arithmetic=self._arithmetic, **self._products)
        m.submodules.statistics = stats = GradientStatistics(lanes=lanes)
        run = run_control(m, control, stats, lanes=lanes, data_width=dw)

        update, read_enable, write_enable = tensor_enables(self._spec, run.args, run.statistics_mode)
        sequencers = add_sequencers(m, run, read_tensors=self.read_tensors, write_tensors=self.write_tensors,
                                    read_enable=read_enable, write_enable=write_enable,
                                    chunk_elements=self._chunk, data_width=dw)
        buses = {name: getattr(self, f"m_axi_{name}") for name in self.port_tensors}
        memory_ports, read_streams, write_streams = add_memory_ports(
            m, buses, self.port_tensors, lanes=lanes, data_width=dw, chunk_elements=self._chunk,
            max_burst=self._max_burst, max_outstanding=self._max_outstanding, rw_phases=self._rw_phases)
        route_commands(m, sequencers, memory_ports, self.port_tensors, read_tensors=self.read_tensors,
                       write_tensors=self.write_tensors)

        # What a gradient source may use: the run's signals, the read streams, the converters.
        converter = converter_factory(m, run, lanes=lanes, data_width=dw)
        run.read_streams, run.converter = read_streams, converter
        source = self._gradient_source(m, run)
        errors = stop_on_errors(m, memory_ports, source, run.begin)

        dense = [name for name in self.read_tensors if name not in self.GRADIENT_TENSORS]
        unpackers = add_unpackers(m, run, converter, read_streams, dense, lanes=lanes, data_width=dw)
        issued = join_into_core(m, run, core, source, unpackers, read_enable, lanes=lanes)
        drive_core_inputs(m, self._spec, run, core, stats, source)
        forked, packers = fork_from_core(m, run, core, converter, write_streams, write_enable,
                                         write_tensors=self.write_tensors, lanes=lanes, data_width=dw)

        quiet = [~sequencers["read"].busy, ~sequencers["write"].busy, issued == run.transfers,
                 forked == run.transfers]
        quiet += [~port.busy for port in memory_ports.values()]
        quiet += [~unit.o.valid for unit in packers.values()]
        quiet += source.quiet
        m.d.comb += run.finished.eq(all_of(quiet))

        counted = list(buses.values())
        counted += [getattr(self, name) for name in self._extra_ports() if name.startswith("m_axi_")]
        drive_status(m, control.status, core=core, stats=stats, update=update, memory_ports=memory_ports,
                     errors=errors, error_flags=source.error_flags, counters=count_beats(m, run, counted))
        return m

    def _gradient_source(self, m, run):
        """The dense gradient: beats of ``grad`` unpacked into lanes of 32 or 16 bits (``grad_format``).

        ``run`` holds the kernel's run-level signals (``args``, ``begin``, ``running``, ``n``,
        ``transfers``, ``beats32``, ``beats16``, ``statistics_mode``, ``control``; see
        :func:`~rtl.optim.updater_control.run_control`), its tensors' read streams
        (``read_streams``) and ``converter(name, source_width, target_width, lane_width, beats)``
        (:func:`~rtl.optim.updater_datapath.converter_factory`), which adds a width converter
        started with the run. Returns a :class:`GradientSource`.
        """
        lanes, dw = self._lanes, self._data_width
        grad16 = run.args.grad_format != 0
        grad32 = run.converter("unpack_grad32", dw, 32 * lanes, 32, run.beats32)
        grad16_unit = run.converter("unpack_grad16", dw, 16 * lanes, 16, run.beats16)
        grad_beats = run.read_streams["grad"]
        for unit, selected in ((grad32, ~grad16), (grad16_unit, grad16)):
            m.d.comb += [unit.i.valid.eq(grad_beats.valid & selected), unit.i.payload.eq(grad_beats.payload)]
        m.d.comb += grad_beats.ready.eq(Mux(grad16, grad16_unit.i.ready, grad32.i.ready))
        take = Signal(name="grad_take")
        m.d.comb += [grad32.o.ready.eq(take & ~grad16), grad16_unit.o.ready.eq(take & grad16)]
        return GradientSource(
            valid=Mux(grad16, grad16_unit.o.valid, grad32.o.valid), ready=take,
            lanes=[Mux(grad16, grad16_unit.o.payload.word_select(lane, 16),
                       grad32.o.payload.word_select(lane, 32)) for lane in range(lanes)],
            grad_format=run.args.grad_format)


def _kernel(optimizer):
    class Kernel(UpdaterKernel):
        PARAMS = _KERNEL_PARAMS

        def __init__(self, **params):
            super().__init__(optimizer=optimizer, **params)
    return Kernel


class AdamUpdater(_kernel("adam")):
    """The Adam / AdamW :class:`UpdaterKernel` (``optimizer="adam"``)."""


class SGDUpdater(_kernel("sgd")):
    """The SGD :class:`UpdaterKernel` (``optimizer="sgd"``)."""


class AdagradUpdater(_kernel("adagrad")):
    """The AdaGrad :class:`UpdaterKernel` (``optimizer="adagrad"``)."""


for _name, _cls, _what in (("adam_updater", AdamUpdater, "Adam/AdamW"), ("sgd_updater", SGDUpdater, "SGD"),
                           ("adagrad_updater", AdagradUpdater, "AdaGrad")):
    register_block(_name, _cls, family="optim", golden="golden.optim.host:reference_update",
                   summary=f"{_what} updater kernel: AXI4 DMA, AXI4-Lite ap_ctrl_hs, chunked, bit-exact.",
                   drops={"s_axi_control": ("the error register (bits 0/1: a read/write answered "
                                            "SLVERR/DECERR, after which the run's remaining writes are "
                                            "discarded)")})
