"""The optimizer updater kernel: AXI4 masters, AXI4-Lite control, chunked streaming through the core."""

import dataclasses
import functools
import math
import operator
import types

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..bus.axi import AXI4LiteSignature, AXI4Signature
from ..bus.axi_lite_control import AXILiteControl
from ..registration import Param, check_bool, check_choice, check_int, register_block
from .chunk_sequencer import ChunkSequencer
from .counted_width_converter import CountedWidthConverter
from .gearbox import CountedGearbox
from .gradient_statistics import ACCUMULATOR_WIDTH, GradientStatistics
from .memory_port import MemoryPort
from .optimizers import OPTIMIZERS
from .updater_core import ARITHMETIC_PARAM, UpdaterCore

__all__ = ["UpdaterKernel", "GradientSource", "AdamUpdater", "SGDUpdater", "AdagradUpdater",
           "PORT_MODES", "LANE_CHOICES",
           "MODE_UPDATE", "MODE_STATISTICS", "STATUS_NONFINITE", "ERROR_READ", "ERROR_WRITE"]

PORT_MODES = ("shared", "separate")
LANE_CHOICES = tuple(range(1, 33))
MODE_UPDATE, MODE_STATISTICS = 0, 1
STATUS_NONFINITE = 1 << 0
ERROR_READ, ERROR_WRITE = 1 << 0, 1 << 1
ERROR_READ_RESP_SHIFT, ERROR_WRITE_RESP_SHIFT = 8, 10
_SUM_WORDS = -(-ACCUMULATOR_WIDTH // 64)


def _all(values):
    return functools.reduce(operator.and_, values, Const(1))


def _any(values):
    return functools.reduce(operator.or_, values, Const(0))


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


class UpdaterKernel(wiring.Component):
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
    take them from elsewhere (:class:`rtl.compress.topk_updater_kernel.TopKUpdaterKernel`:
    a Top-K pair stream through an on-chip decompressor), with its own ports, registers and
    statuses (:meth:`_arguments`, :meth:`_status`, :meth:`_extra_ports`).

    Parameters
    ----------
    optimizer : {"adam", "sgd", "adagrad"}
    lanes : int
        Elements per cycle, 1 to 32 (default 1; Smart-Infinity's kernel has 16). Where
        neither the beat nor the lane vector divides the other (say 3 lanes and 2-word
        beats), a :class:`~rtl.optim.gearbox.CountedGearbox` converts between them. A
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
    arithmetic : bool
        ``False`` replaces the core's floating-point datapath by its timing alone (see
        :class:`~rtl.optim.updater_core.UpdaterCore`): cycle counts are unchanged and
        nothing is computed. For cycle benchmarks of wide kernels only.

    Attributes
    ----------
    s_axi_control : In(AXI4LiteSignature(12, 32))
        Host register port.
    irq : Out(1)
        Interrupt (the Vitis ``interrupt`` port).
    m_axi_gmem or m_axi_<tensor> : Out(AXI4Signature(64, data_width))
        Memory ports.
    """

    #: Tensors read from memory for the gradient (none when a subclass supplies it otherwise).
    GRADIENT_TENSORS = ("grad",)

    def __init__(self, *, optimizer="adam", lanes=1, data_width=512, ports="shared", chunk_elements=1024,
                 max_burst=64, max_outstanding=4, arithmetic=True):
        self._spec = OPTIMIZERS[check_choice("optimizer", optimizer, tuple(OPTIMIZERS))]
        self._lanes = check_int("lanes", lanes, 1, 32)
        self._data_width = check_int("data_width", data_width, 64, 1024)
        if data_width & (data_width - 1):
            raise ValueError(f"data_width must be a power of two, not {data_width}")
        self._ports = check_choice("ports", ports, PORT_MODES)
        granule = math.lcm(lanes, data_width // 16)
        self._chunk = check_int("chunk_elements", chunk_elements, granule, 1 << 20)
        if chunk_elements % granule:
            raise ValueError(f"chunk_elements must be a multiple of {granule} (lanes and 16-bit elements "
                             f"per beat), not {chunk_elements}")
        self._max_burst = check_int("max_burst", max_burst, 1, 256)
        self._max_outstanding = check_int("max_outstanding", max_outstanding, 2, 64)
        self._arithmetic = check_bool("arithmetic", arithmetic)
        self.parameters = {"lanes": lanes, "data_width": data_width, "ports": ports,
                           "chunk_elements": chunk_elements, "max_burst": max_burst,
                           "max_outstanding": max_outstanding, "arithmetic": arithmetic}
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
        kinds = {"param16": "16-bit copy", "grad": "gradient, in grad_format"}
        args = [(f"{name}_address", 64, f"byte address of {name} ({kinds.get(name, 'binary32')}), "
                                         f"{self._data_width // 8}-byte aligned")
                for name in self._buffers]
        args.append(("n", 32, "element count (0 to 2**32 - 1)"))
        args += [(name, 32, f"host scalar {name} (binary32 bits, golden.optim.step_scalars)")
                 for name in self._spec.scalars]
        args += [("mode", 32, "0 update, 1 gradient statistics"),
                 ("grad_format", 32, "gradient format: 0 f32, 1 f16, 2 bf16"),
                 ("copy_format", 32, "16-bit parameter copy: 0 none, 1 f16, 2 bf16")]
        descriptions = {"first_step": "1 at SGD step 1 (the buffer becomes the gradient and is not read)",
                        "nesterov": "1 for Nesterov momentum"}
        args += [(flag, 32, descriptions[flag]) for flag in self._spec.flags]
        return args

    def _status(self):
        status = [
            ("run_status", 32, "bit 0: a gradient element was NaN or Inf (update mode; sticky for the run)"),
            ("error", 32, "bit 0 read error, bit 1 write error (SLVERR/DECERR); bits 9:8 first read "
                          "response, bits 11:10 first write response"),
            ("cycles", 64, "clock cycles of the last run, start to done"),
            ("read_beats", 64, "AXI read data beats of the last run, all ports"),
            ("write_beats", 64, "AXI write data beats of the last run, all ports"),
            ("nan_count", 32, "statistics mode: NaN gradient elements"),
            ("inf_count", 32, "statistics mode: infinite gradient elements"),
        ]
        for word in range(_SUM_WORDS):
            low, high = 64 * word, min(64 * word + 63, ACCUMULATOR_WIDTH - 1)
            status.append((f"sum_of_squares_{word}", 64,
                           f"statistics mode: bits {low}..{high} of the exact sum of squares in units of "
                           f"2**-298 ({ACCUMULATOR_WIDTH} bits)"))
        return status

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
        per_beat32, per_beat16 = dw // 32, dw // 16
        chunk_beats32, chunk_beats16 = self._chunk // per_beat32, self._chunk // per_beat16
        spec = self._spec

        m.submodules.control = control = AXILiteControl(**self._registers)
        wiring.connect(m, wiring.flipped(self.s_axi_control), control.s_axi_control)
        m.d.comb += self.irq.eq(control.irq)
        args = control.args

        m.submodules.core = core = UpdaterCore(optimizer=spec.name, lanes=lanes, arithmetic=self._arithmetic)
        m.submodules.statistics = stats = GradientStatistics(lanes=lanes)

        # ---- run control: IDLE -> LOAD (latch counts) -> RUN -> [DRAIN] -> IDLE
        n = args.n
        statistics_mode = args.mode[0]
        transfers = Signal(32)
        beats32, beats16 = Signal(32), Signal(32)
        strobe32, strobe16 = Signal(dw // 8), Signal(dw // 8)
        last_mask = Signal(lanes)
        begin = Signal()        # one-cycle pulse that starts every sub-block
        running = Signal()
        finished = Signal()

        def ceil_shift(value, count):
            shift = count.bit_length() - 1
            return (value + (count - 1)) >> shift

        def tail_strobe(elements_per_beat, bytes_per_element):
            tail = n[:elements_per_beat.bit_length() - 1]
            ones = Const(-1, dw // 8)
            return Mux(tail == 0, ones, (Const(1, dw // 8 + 1) << (tail * bytes_per_element)) - 1)

        def tail_mask(lane_tail):
            return Mux(lane_tail == 0, Const(-1, lanes), (Const(1, lanes + 1) << lane_tail) - 1)

        power_of_two = not lanes & (lanes - 1)
        lane_tail = n[:lanes.bit_length() - 1] if lanes > 1 else Const(0, 1)
        # Run states, compared rather than switched on (a six-way Verilog case would be incomplete).
        # Any other lane count divides n by lanes first, in divide_state (power-of-two kernels
        # have no such state, so their Verilog is as before).
        idle_state, begin_state, run_state, check_state, drain_state, done_state = range(6)
        divide_state = 6
        state = Signal(range(6 if power_of_two else 7))
        m.d.comb += [begin.eq(state == begin_state),
                     running.eq((state == run_state) | (state == check_state) | (state == drain_state)),
                     control.done.eq(state == done_state), control.ready.eq(state == done_state)]
        loads = [beats32.eq(ceil_shift(n, per_beat32)),
                 beats16.eq(ceil_shift(n, per_beat16)),
                 strobe32.eq(tail_strobe(per_beat32, 4)),
                 strobe16.eq(tail_strobe(per_beat16, 2))]
        if not power_of_two:
            # Restoring division, one quotient bit per cycle: the dividend shifts out of the
            # top of `transfers` while the quotient shifts in at the bottom; 32 steps, then a
            # cycle that rounds up and sets the last lane vector's mask.
            remainder = Signal(range(2 * lanes))
            steps = Signal(range(33))
            trial = Signal(range(2 * lanes))
            m.d.comb += trial.eq(Cat(transfers[31], remainder))
        with m.If(state == idle_state):
            with m.If(control.start):
                if power_of_two:
                    m.d.sync += [state.eq(begin_state), transfers.eq(ceil_shift(n, lanes)), *loads,
                                 last_mask.eq(tail_mask(lane_tail))]
                else:
                    m.d.sync += [state.eq(divide_state), transfers.eq(n), remainder.eq(0), steps.eq(0),
                                 *loads]
        if not power_of_two:
            with m.Elif(state == divide_state):
                with m.If(steps == 32):
                    m.d.sync += [transfers.eq(transfers + (remainder != 0)),
                                 last_mask.eq(tail_mask(remainder)), state.eq(begin_state)]
                with m.Else():
                    bit = trial >= lanes
                    m.d.sync += [remainder.eq(Mux(bit, trial - lanes, trial)),
                                 transfers.eq(Cat(bit, transfers[:31])), steps.eq(steps + 1)]
        with m.Elif(state == begin_state):
            m.d.sync += state.eq(run_state)
        with m.Elif(state == run_state):
            with m.If(finished):
                m.d.sync += state.eq(check_state)
        with m.Elif(state == check_state):
            m.d.comb += stats.drain.eq(statistics_mode)
            m.d.sync += state.eq(Mux(statistics_mode, drain_state, done_state))
        with m.Elif(state == drain_state):
            with m.If(stats.done):
                m.d.sync += state.eq(done_state)
        with m.Else():
            m.d.sync += state.eq(idle_state)
        # The statistics unit zeroes its buckets after a reset: no start until it has.
        m.d.comb += control.idle.eq(~running & ~begin & ~stats.busy if power_of_two else
                                    ~running & ~begin & ~stats.busy & (state != divide_state))

        # ---- tensors: enables, beat counts and chunk sizes
        update = ~statistics_mode
        momentum_on = args.momentum[:31].any() if spec.name == "sgd" else Const(1)
        first_step = args.first_step[0] if spec.name == "sgd" else Const(0)
        read_enable = {"param": update, "grad": Const(1)}
        write_enable = {"param": update, "param16": update & (args.copy_format != 0)}
        for state in spec.states:
            read_enable[state] = update & momentum_on & ~first_step
            write_enable[state] = update & momentum_on
        geometry = {name: (beats32, chunk_beats32, strobe32)
                    for name in self.read_tensors + self.write_tensors}
        geometry["param16"] = (beats16, chunk_beats16, strobe16)
        if "grad" in self.read_tensors:
            grad16 = args.grad_format != 0
            geometry["grad"] = tuple(Mux(grad16, a, b) for a, b in zip(
                (beats16, chunk_beats16, strobe16), (beats32, chunk_beats32, strobe32), strict=True))

        sequencers = {}
        for direction, names, enables in (("read", self.read_tensors, read_enable),
                                          ("write", self.write_tensors, write_enable)):
            sequencer = ChunkSequencer(tensors=len(names), address_width=64, data_width=dw)
            m.submodules[f"{direction}_sequencer"] = sequencer
            m.d.comb += sequencer.start.eq(begin)
            for index, name in enumerate(names):
                beats, chunk, strobe = geometry[name]
                config = sequencer.config[index]
                m.d.comb += [config.address.eq(getattr(args, f"{name}_address")), config.beats.eq(beats),
                             config.chunk_beats.eq(chunk), config.tail_strobe.eq(strobe),
                             config.enable.eq(enables[name])]
            sequencers[direction] = sequencer

        # ---- memory ports and command routing
        buffer_beats = 2 * chunk_beats32 + 16
        # A write starts once enough of it is buffered that W never waits on the datapath:
        # a whole burst when the lanes fill a beat more slowly than one per cycle, else a
        # few beats (the rest arrives as fast as W drains it). Commands still go in order,
        # so a shared port writes a chunk's parameters before its state.
        write_gate = self._max_burst if lanes * 32 < dw else min(16, self._max_burst)
        memory_ports = {}
        read_streams, write_streams = {}, {}
        for port_name, (reads, writes) in self.port_tensors.items():
            port = MemoryPort(read_tensors=len(reads), write_tensors=len(writes), address_width=64,
                              data_width=dw, max_burst=self._max_burst, max_outstanding=self._max_outstanding,
                              read_buffer=buffer_beats, write_buffer=buffer_beats,
                              write_gate=write_gate)
            m.submodules[f"port_{port_name}"] = port
            memory_ports[port_name] = port
            wiring.connect(m, port.m_axi, wiring.flipped(getattr(self, f"m_axi_{port_name}")))
            for local, name in enumerate(reads):
                read_streams[name] = getattr(port.read_data, f"t{local}")
            for local, name in enumerate(writes):
                write_streams[name] = getattr(port.write_data, f"t{local}")
        for direction, names in (("read", self.read_tensors), ("write", self.write_tensors)):
            cmd = sequencers[direction].cmd
            ready = []
            for port_name, port in memory_ports.items():
                mine = self.port_tensors[port_name][0 if direction == "read" else 1]
                if not mine:
                    continue
                target = getattr(port, f"{direction}_cmd")
                hit = _any(cmd.payload.tensor == names.index(name) for name in mine)
                local = 0
                for position, name in enumerate(mine):
                    local = Mux(cmd.payload.tensor == names.index(name), position, local)
                m.d.comb += [target.valid.eq(cmd.valid & hit), target.payload.address.eq(cmd.payload.address),
                             target.payload.length.eq(cmd.payload.length),
                             target.payload.strobe.eq(cmd.payload.strobe), target.payload.tensor.eq(local)]
                ready.append(hit & target.ready)
            m.d.comb += cmd.ready.eq(_any(ready))

        # ---- beats to lanes, joined into the core
        def converter(name, source_width, target_width, lane_width, beats):
            if max(source_width, target_width) % min(source_width, target_width):
                # Neither width divides the other: a gearbox that counts elements.
                unit = CountedGearbox(input_width=source_width, output_width=target_width,
                                      word_width=lane_width)
                m.submodules[name] = unit
                m.d.comb += [unit.start.eq(begin), unit.count.eq(n)]
                return unit
            unit = CountedWidthConverter(input_width=source_width, output_width=target_width)
            m.submodules[name] = unit
            # The narrow side of a conversion counts its transfers: lane vectors or beats.
            m.d.comb += [unit.start.eq(begin), unit.count.eq(transfers if lanes * lane_width < dw else beats)]
            return unit

        # What a gradient source may use: the run's signals, the read streams, the converters.
        run = types.SimpleNamespace(args=args, control=control, begin=begin, running=running, n=n,
                                    transfers=transfers, beats32=beats32, beats16=beats16,
                                    read_streams=read_streams, converter=converter,
                                    statistics_mode=statistics_mode)
        source = self._gradient_source(m, run)

        errors = {"read": [p.read_error for p in memory_ports.values()],
                  "write": [p.write_error for p in memory_ports.values()]}
        failed = _any(errors["read"] + errors["write"] + [source.read_error])
        for port in memory_ports.values():
            m.d.comb += [port.halt.eq(failed), port.clear.eq(begin)]

        unpackers = {}
        for name in self.read_tensors:
            if name in self.GRADIENT_TENSORS:
                continue
            unit = converter(f"unpack_{name}", dw, 32 * lanes, 32, beats32)
            wiring.connect(m, read_streams[name], unit.i)
            unpackers[name] = unit.o

        join_inputs = [(unpackers[name], read_enable[name]) for name in unpackers]
        join_valid = _all([source.valid] + [stream.valid | ~enable for stream, enable in join_inputs])
        issued = Signal(32)
        take = Signal()
        m.d.comb += [
            core.i.valid.eq(join_valid & running),
            take.eq(core.i.valid & core.i.ready),
            source.ready.eq(take),
            core.i.payload.mask.eq(Mux(issued == transfers - 1, last_mask, Const(-1, lanes))),
        ]
        for stream_, enable in join_inputs:
            m.d.comb += stream_.ready.eq(take & enable)
        for lane in range(lanes):
            element = core.i.payload.lanes[lane]
            for name, stream_ in unpackers.items():
                value = stream_.payload.word_select(lane, 32)
                m.d.comb += getattr(element, name).eq(Mux(read_enable[name], value, 0))
            m.d.comb += element.grad.eq(source.lanes[lane])
        with m.If(begin):
            m.d.sync += issued.eq(0)
        with m.Elif(take):
            m.d.sync += issued.eq(issued + 1)

        # ---- run-level inputs of the core and the statistics unit
        for name in spec.scalars:
            m.d.comb += getattr(core.scalars, name).eq(getattr(args, name))
        for flag in spec.flags:
            m.d.comb += getattr(core, flag).eq(getattr(args, flag)[0])
        m.d.comb += [core.grad_format.eq(source.grad_format), core.copy_format.eq(args.copy_format),
                     core.clear.eq(begin), stats.clear.eq(begin),
                     stats.i.valid.eq(core.gradient.valid & statistics_mode),
                     stats.i.payload.eq(core.gradient.payload)]

        # ---- core results forked into lanes-to-beats converters
        forked = Signal(32)
        packers = {}
        for name in self.write_tensors:
            width = 16 if name == "param16" else 32
            beats = beats16 if name == "param16" else beats32
            unit = converter(f"pack_{name}", width * lanes, dw, width, beats)
            wiring.connect(m, unit.o, write_streams[name])
            packers[name] = unit
        sent = {name: Signal(name=f"sent_{name}") for name in self.write_tensors}
        done_each = []
        for name, unit in packers.items():
            wanted = write_enable[name] & ~sent[name]
            m.d.comb += unit.i.valid.eq(core.o.valid & wanted)
            m.d.comb += unit.i.payload.eq(Cat(*(getattr(core.o.payload.lanes[lane], name)
                                                for lane in range(lanes))))
            done_each.append(~wanted | unit.i.ready)
        release = core.o.valid & _all(done_each)
        m.d.comb += core.o.ready.eq(_all(done_each))
        for name, unit in packers.items():
            with m.If(release | begin):
                m.d.sync += sent[name].eq(0)
            with m.Elif(unit.i.valid & unit.i.ready):
                m.d.sync += sent[name].eq(1)
        with m.If(begin):
            m.d.sync += forked.eq(0)
        with m.Elif(release):
            m.d.sync += forked.eq(forked + 1)

        quiet = [~sequencers["read"].busy, ~sequencers["write"].busy, issued == transfers,
                 forked == transfers]
        quiet += [~port.busy for port in memory_ports.values()]
        quiet += [~unit.o.valid for unit in packers.values()]
        quiet += source.quiet
        m.d.comb += finished.eq(_all(quiet))

        # ---- status, errors and counters
        read_beats, write_beats, cycles = Signal(64), Signal(64), Signal(64)
        buses = [getattr(self, f"m_axi_{name}") for name in memory_ports]
        buses += [getattr(self, name) for name in self._extra_ports() if name.startswith("m_axi_")]
        r_fire = [bus.rvalid & bus.rready for bus in buses]
        w_fire = [bus.wvalid & bus.wready for bus in buses]
        with m.If(begin):
            m.d.sync += [read_beats.eq(0), write_beats.eq(0), cycles.eq(1)]
        with m.Elif(running):
            m.d.sync += [read_beats.eq(read_beats + sum(r_fire)), write_beats.eq(write_beats + sum(w_fire)),
                         cycles.eq(cycles + 1)]

        def first_resp(kind):
            ports = list(memory_ports.values())
            resp = Const(0, 2)
            for port in reversed(ports):
                resp = Mux(getattr(port, f"{kind}_error"), getattr(port, f"{kind}_resp"), resp)
            return resp

        status = control.status
        m.d.comb += [
            status.run_status.eq(core.nonfinite & update),
            status.error.eq(Cat(_any(errors["read"]), _any(errors["write"]), Const(0, 6),
                                first_resp("read"), first_resp("write")) | source.error_flags),
            status.cycles.eq(cycles), status.read_beats.eq(read_beats), status.write_beats.eq(write_beats),
            status.nan_count.eq(stats.nan_count), status.inf_count.eq(stats.inf_count),
        ]
        for word in range(_SUM_WORDS):
            register = getattr(status, f"sum_of_squares_{word}")
            m.d.comb += register.eq(stats.accumulator[64 * word:64 * word + 64])
        return m

    def _gradient_source(self, m, run):
        """The dense gradient: beats of ``grad`` unpacked into lanes of 32 or 16 bits (``grad_format``).

        ``run`` holds the kernel's run-level signals (``args``, ``begin``, ``running``, ``n``,
        ``transfers``, ``beats32``, ``beats16``, ``statistics_mode``, ``control``), its tensors' read
        streams (``read_streams``) and ``converter(name, source_width, target_width, lane_width, beats)``,
        which adds a :class:`CountedWidthConverter` started with the run. Returns a :class:`GradientSource`.
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
        def __init__(self, **params):
            super().__init__(optimizer=optimizer, **params)
    return Kernel


class AdamUpdater(_kernel("adam")):
    """The Adam / AdamW :class:`UpdaterKernel` (``optimizer="adam"``)."""


class SGDUpdater(_kernel("sgd")):
    """The SGD :class:`UpdaterKernel` (``optimizer="sgd"``)."""


class AdagradUpdater(_kernel("adagrad")):
    """The AdaGrad :class:`UpdaterKernel` (``optimizer="adagrad"``)."""


_KERNEL_PARAMS = [
    # A small default keeps `make lint` quick; the main job and the benchmarks set 16.
    Param("lanes", int, 1, "elements per cycle", minimum=1, maximum=32),
    Param("data_width", int, 512, "AXI data width in bits (power of two)", minimum=64, maximum=1024),
    Param("ports", str, "shared", "one AXI4 master for all tensors, or one per tensor", choices=PORT_MODES),
    Param("chunk_elements", int, 1024, "elements per chunk (common multiple of lanes and data_width/16)",
          minimum=1, maximum=1 << 20),
    Param("max_burst", int, 64, "longest AXI burst in beats", minimum=1, maximum=256),
    Param("max_outstanding", int, 4, "bursts in flight per direction and port", minimum=2, maximum=64),
    ARITHMETIC_PARAM,
]
for _name, _cls, _what in (("adam_updater", AdamUpdater, "Adam/AdamW"), ("sgd_updater", SGDUpdater, "SGD"),
                           ("adagrad_updater", AdagradUpdater, "AdaGrad")):
    register_block(_name, _cls, family="optim", params=_KERNEL_PARAMS,
                   summary=f"{_what} updater kernel: AXI4 DMA, AXI4-Lite ap_ctrl_hs, chunked, bit-exact.")
