"""The updater kernel's datapath: chunk sequencers, memory ports, and beats to lanes through the core.

Pieces of :class:`~rtl.optim.updater_kernel.UpdaterKernel`'s elaboration, added to the
kernel's own module (no block of their own, so the kernel's Verilog keeps one hierarchy).
``run`` is the namespace of the run's signals that
:func:`~rtl.optim.updater_control.run_control` returns.
"""

import functools
import operator

from amaranth.hdl import Cat, Const, Mux, Signal
from amaranth.lib import wiring

from .chunk_sequencer import ChunkSequencer
from .counted_gearbox import CountedGearbox
from .counted_width_converter import CountedWidthConverter
from .memory_port import MemoryPort

__all__ = ["all_of", "any_of", "tensor_enables", "add_sequencers", "add_memory_ports", "route_commands",
           "stop_on_errors", "converter_factory", "add_unpackers", "join_into_core", "drive_core_inputs",
           "fork_from_core", "count_beats"]


def all_of(values):
    """The AND of ``values`` (1 when there are none)."""
    return functools.reduce(operator.and_, values, Const(1))


def any_of(values):
    """The OR of ``values`` (0 when there are none)."""
    return functools.reduce(operator.or_, values, Const(0))


# ---------------------------------------------------------------------- tensors and memory
def tensor_enables(spec, args, statistics_mode):
    """``(update, read_enable, write_enable)``: update mode, and which tensors this run reads and writes."""
    update = ~statistics_mode
    momentum_on = args.momentum[:31].any() if spec.name == "sgd" else Const(1)
    first_step = args.first_step[0] if spec.name == "sgd" else Const(0)
    read_enable = {"param": update, "grad": Const(1)}
    write_enable = {"param": update, "param16": update & (args.copy_format != 0)}
    for state in spec.states:
        read_enable[state] = update & momentum_on & ~first_step
        write_enable[state] = update & momentum_on
    return update, read_enable, write_enable


def add_sequencers(m, run, *, read_tensors, write_tensors, read_enable, write_enable, chunk_elements,
                   data_width):
    """A :class:`ChunkSequencer` per direction, issuing one command per tensor and chunk; by direction."""
    dw = data_width
    chunk_beats32, chunk_beats16 = chunk_elements // (dw // 32), chunk_elements // (dw // 16)
    # Beat counts, chunk sizes and tail strobes of each tensor.
    geometry = {name: (run.beats32, chunk_beats32, run.strobe32) for name in read_tensors + write_tensors}
    geometry["param16"] = (run.beats16, chunk_beats16, run.strobe16)
    if "grad" in read_tensors:
        grad16 = run.args.grad_format != 0
        geometry["grad"] = tuple(Mux(grad16, a, b) for a, b in zip(
            (run.beats16, chunk_beats16, run.strobe16), (run.beats32, chunk_beats32, run.strobe32),
            strict=True))

    sequencers = {}
    for direction, names, enables in (("read", read_tensors, read_enable),
                                      ("write", write_tensors, write_enable)):
        sequencer = ChunkSequencer(tensors=len(names), address_width=64, data_width=dw)
        m.submodules[f"{direction}_sequencer"] = sequencer
        m.d.comb += sequencer.start.eq(run.begin)
        for index, name in enumerate(names):
            beats, chunk, strobe = geometry[name]
            config = sequencer.config[index]
            m.d.comb += [config.address.eq(getattr(run.args, f"{name}_address")), config.beats.eq(beats),
                         config.chunk_beats.eq(chunk), config.tail_strobe.eq(strobe),
                         config.enable.eq(enables[name])]
        sequencers[direction] = sequencer
    return sequencers


def add_memory_ports(m, buses, port_tensors, *, lanes, data_width, chunk_elements, max_burst,
                     max_outstanding, rw_phases=False):
    """A :class:`MemoryPort` on each AXI4 master of ``buses`` (by port name).

    With ``rw_phases`` a port that reads and writes alternates phases (``MemoryPort``'s
    ``batch``: one chunk of its write tensors' beats) and starts only fully buffered writes.

    Returns ``(memory_ports, read_streams, write_streams)``, the streams by tensor name.
    """
    dw = data_width
    buffer_beats = 2 * (chunk_elements // (dw // 32)) + 16
    # A write starts once enough of it is buffered that W never waits on the datapath:
    # a whole burst when the lanes fill a beat more slowly than one per cycle, else a
    # few beats (the rest arrives as fast as W drains it). Commands still go in order,
    # so a shared port writes a chunk's parameters before its state.
    write_gate = max_burst if lanes * 32 < dw else min(16, max_burst)
    memory_ports = {}
    read_streams, write_streams = {}, {}
    for port_name, (reads, writes) in port_tensors.items():
        phases = {}
        if rw_phases and reads and writes:
            beats = [chunk_elements // (dw // (16 if name == "param16" else 32)) for name in writes]
            phases = {"write_gate": 0, "batch": sum(beats)}
        port = MemoryPort(read_tensors=len(reads), write_tensors=len(writes), address_width=64,
                          data_width=dw, max_burst=max_burst, max_outstanding=max_outstanding,
                          read_buffer=buffer_beats, write_buffer=buffer_beats,
                          **{"write_gate": write_gate, **phases})
        m.submodules[f"port_{port_name}"] = port
        memory_ports[port_name] = port
        wiring.connect(m, port.m_axi, wiring.flipped(buses[port_name]))
        for local, name in enumerate(reads):
            read_streams[name] = getattr(port.read_data, f"t{local}")
        for local, name in enumerate(writes):
            write_streams[name] = getattr(port.write_data, f"t{local}")
    return memory_ports, read_streams, write_streams


def route_commands(m, sequencers, memory_ports, port_tensors, *, read_tensors, write_tensors):
    """Send each sequencer command to the port of its tensor, renumbered as that port's tensor."""
    for direction, names in (("read", read_tensors), ("write", write_tensors)):
        cmd = sequencers[direction].cmd
        ready = []
        for port_name, port in memory_ports.items():
            mine = port_tensors[port_name][0 if direction == "read" else 1]
            if not mine:
                continue
            target = getattr(port, f"{direction}_cmd")
            hit = any_of(cmd.payload.tensor == names.index(name) for name in mine)
            local = 0
            for position, name in enumerate(mine):
                local = Mux(cmd.payload.tensor == names.index(name), position, local)
            m.d.comb += [target.valid.eq(cmd.valid & hit), target.payload.address.eq(cmd.payload.address),
                         target.payload.length.eq(cmd.payload.length),
                         target.payload.strobe.eq(cmd.payload.strobe), target.payload.tensor.eq(local)]
            ready.append(hit & target.ready)
        m.d.comb += cmd.ready.eq(any_of(ready))


def stop_on_errors(m, memory_ports, source, begin):
    """Halt every memory port on the first read or write error; returns the ports' errors by direction."""
    errors = {"read": [p.read_error for p in memory_ports.values()],
              "write": [p.write_error for p in memory_ports.values()]}
    failed = any_of(errors["read"] + errors["write"] + [source.read_error])
    for port in memory_ports.values():
        m.d.comb += [port.halt.eq(failed), port.clear.eq(begin)]
    return errors


# ---------------------------------------------------------------------- beats, lanes and the core
def converter_factory(m, run, *, lanes, data_width):
    """``converter(name, source_width, target_width, lane_width, beats)``: adds a width converter to ``m``.

    The converter is started with the run and counts its narrow side's transfers (lane
    vectors, or ``beats``); where neither width divides the other it is a
    :class:`CountedGearbox` that counts the run's ``n`` elements.
    """
    def converter(name, source_width, target_width, lane_width, beats):
        if max(source_width, target_width) % min(source_width, target_width):
            # Neither width divides the other: a gearbox that counts elements.
            unit = CountedGearbox(input_width=source_width, output_width=target_width,
                                  word_width=lane_width)
            m.submodules[name] = unit
            m.d.comb += [unit.start.eq(run.begin), unit.count.eq(run.n)]
            return unit
        unit = CountedWidthConverter(input_width=source_width, output_width=target_width)
        m.submodules[name] = unit
        # The narrow side of a conversion counts its transfers: lane vectors or beats.
        m.d.comb += [unit.start.eq(run.begin),
                     unit.count.eq(run.transfers if lanes * lane_width < data_width else beats)]
        return unit
    return converter


def add_unpackers(m, run, converter, read_streams, names, *, lanes, data_width):
    """Beats of the binary32 tensors ``names`` to lane vectors; their streams by name."""
    unpackers = {}
    for name in names:
        unit = converter(f"unpack_{name}", data_width, 32 * lanes, 32, run.beats32)
        wiring.connect(m, read_streams[name], unit.i)
        unpackers[name] = unit.o
    return unpackers


def join_into_core(m, run, core, source, unpackers, read_enable, *, lanes):
    """Join the gradient and the enabled tensors' lanes into the core; returns the lane vectors issued."""
    join_inputs = [(unpackers[name], read_enable[name]) for name in unpackers]
    join_valid = all_of([source.valid] + [stream.valid | ~enable for stream, enable in join_inputs])
    issued = Signal(32)
    take = Signal()
    m.d.comb += [
        core.i.valid.eq(join_valid & run.running),
        take.eq(core.i.valid & core.i.ready),
        source.ready.eq(take),
        core.i.payload.mask.eq(Mux(issued == run.transfers - 1, run.last_mask, Const(-1, lanes))),
    ]
    for stream_, enable in join_inputs:
        m.d.comb += stream_.ready.eq(take & enable)
    for lane in range(lanes):
        element = core.i.payload.lanes[lane]
        for name, stream_ in unpackers.items():
            value = stream_.payload.word_select(lane, 32)
            m.d.comb += getattr(element, name).eq(Mux(read_enable[name], value, 0))
        m.d.comb += element.grad.eq(source.lanes[lane])
    with m.If(run.begin):
        m.d.sync += issued.eq(0)
    with m.Elif(take):
        m.d.sync += issued.eq(issued + 1)
    return issued


def drive_core_inputs(m, spec, run, core, stats, source):
    """The run-level inputs of the core (scalars, flags, formats) and of the statistics unit."""
    args = run.args
    for name in spec.scalars:
        m.d.comb += getattr(core.scalars, name).eq(getattr(args, name))
    for flag in spec.flags:
        m.d.comb += getattr(core, flag).eq(getattr(args, flag)[0])
    m.d.comb += [core.grad_format.eq(source.grad_format), core.copy_format.eq(args.copy_format),
                 core.clear.eq(run.begin), stats.clear.eq(run.begin),
                 stats.i.valid.eq(core.gradient.valid & run.statistics_mode),
                 stats.i.payload.eq(core.gradient.payload)]


def fork_from_core(m, run, core, converter, write_streams, write_enable, *, write_tensors, lanes, data_width):
    """Fork the core's results into a lanes-to-beats converter per written tensor.

    A result leaves the core once every enabled tensor has taken it. Returns ``(forked,
    packers)``: the results released this run, and the converters by tensor name.
    """
    forked = Signal(32)
    packers = {}
    for name in write_tensors:
        width = 16 if name == "param16" else 32
        beats = run.beats16 if name == "param16" else run.beats32
        unit = converter(f"pack_{name}", width * lanes, data_width, width, beats)
        wiring.connect(m, unit.o, write_streams[name])
        packers[name] = unit
    sent = {name: Signal(name=f"sent_{name}") for name in write_tensors}
    done_each = []
    for name, unit in packers.items():
        wanted = write_enable[name] & ~sent[name]
        m.d.comb += unit.i.valid.eq(core.o.valid & wanted)
        m.d.comb += unit.i.payload.eq(Cat(*(getattr(core.o.payload.lanes[lane], name)
                                            for lane in range(lanes))))
        done_each.append(~wanted | unit.i.ready)
    release = core.o.valid & all_of(done_each)
    m.d.comb += core.o.ready.eq(all_of(done_each))
    for name, unit in packers.items():
        with m.If(release | run.begin):
            m.d.sync += sent[name].eq(0)
        with m.Elif(unit.i.valid & unit.i.ready):
            m.d.sync += sent[name].eq(1)
    with m.If(run.begin):
        m.d.sync += forked.eq(0)
    with m.Elif(release):
        m.d.sync += forked.eq(forked + 1)
    return forked, packers


def count_beats(m, run, buses):
    """``(read_beats, write_beats, cycles)`` of the run: AXI data beats on ``buses``, and clock cycles."""
    read_beats, write_beats, cycles = Signal(64), Signal(64), Signal(64)
    r_fire = [bus.rvalid & bus.rready for bus in buses]
    w_fire = [bus.wvalid & bus.wready for bus in buses]
    with m.If(run.begin):
        m.d.sync += [read_beats.eq(0), write_beats.eq(0), cycles.eq(1)]
    with m.Elif(run.running):
        m.d.sync += [read_beats.eq(read_beats + sum(r_fire)), write_beats.eq(write_beats + sum(w_fire)),
                     cycles.eq(cycles + 1)]
    return read_beats, write_beats, cycles
