"""The task spawner: Kernel_start streams task packets out of the host-filled Spawn_MEM."""

from amaranth.hdl import Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..net.packet import NODE_BITS, PACKET_BITS, RANGE_BITS, Packet, PacketType, SpawnWrite, TaskId
from ..registration import Param, Parameterized, register_block
from .classifier import DEFAULT_KERNELS, check_kernels
from .common import ConfigSignature

__all__ = ["TaskSpawner", "start_layout"]


def start_layout(depth):
    """A ``Kernel_start`` command: the kernel id and the Spawn_MEM entries ``first .. first + count - 1``."""
    bits = max(1, (depth - 1).bit_length())
    return data.StructLayout({"task_id": TaskId, "first": bits, "count": bits + 1})


class TaskSpawner(Parameterized, wiring.Component):
    """Generates the tasks of ``Kernel_start(task_id, argv)`` from ``Spawn_MEM``, one per cycle.

    The host fills Spawn_MEM through ``load`` with packet images (``Board_MEM_init`` with the
    task-carrying data): each entry's ``range`` and task payload are used, its other header
    fields are replaced by ``TASK``, the started ``task_id``, ``dst = src =`` this node,
    ``remote`` (the range is owned by another node) and ``check = 0`` (the task enters this
    node's task responder, never the network). ``argv`` is the entry window ``first`` and
    ``count``. A start whose kernel id is not attached (``kernels``) spawns nothing and pulses
    ``error``; a start while busy waits.

    The configuration a run uses (``node``, ``node_mask``, ``range_shift``) is taken at its
    start and held until it ends: a change of those registers while ``busy`` is ignored by the
    run under way and applies from the next start (so a task waiting on ``o`` never changes).
    ``load`` writes while busy go into Spawn_MEM and reach the run only if it has not read that
    entry yet; the host fills Spawn_MEM before the start.

    Parameters
    ----------
    depth : int
        Spawn_MEM entries, 2 to 65536.
    kernels : int
        Bit mask of the attached kernel ids.

    Attributes
    ----------
    config : In(ConfigSignature())
    load : In(stream.Signature(SpawnWrite(address bits)))
        Host writes into Spawn_MEM (always ready).
    start : In(stream.Signature(start_layout(depth)))
        Kernel_start commands.
    o : Out(stream.Signature(Packet))
        Spawned tasks, to the task responder.
    busy : Out(1)
    done : Out(1)
        One-cycle pulse when the last task of a start has been handed over (or a start was rejected).
    error : Out(1)
        One-cycle pulse: a start named a kernel id that is not attached.

    Notes
    -----
    Latency: the first task is on ``o`` 2 cycles after the start. Throughput: one task per cycle.
    """

    PARAMS = (
        Param("depth", int, 64, "Spawn_MEM entries", minimum=2, maximum=65536),
        Param("kernels", int, DEFAULT_KERNELS, "bit mask of attached kernel ids", minimum=0, maximum=127),
    )

    def __init__(self, *, depth=64, kernels=DEFAULT_KERNELS):
        self._kernels = check_kernels(kernels)
        self._address_bits = max(1, (depth - 1).bit_length())
        super().__init__({
            "config": In(ConfigSignature()),
            "load": In(stream.Signature(SpawnWrite(self._address_bits))),
            "start": In(stream.Signature(start_layout(depth))),
            "o": Out(stream.Signature(Packet)),
            "busy": Out(1),
            "done": Out(1),
            "error": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.spawn_mem = memory = Memory(shape=PACKET_BITS, depth=self._depth, init=[])
        write = memory.write_port()
        read = memory.read_port()
        m.d.comb += [
            write.addr.eq(self.load.payload.address),
            write.data.eq(self.load.payload.packet),
            write.en.eq(self.load.valid),
            self.load.ready.eq(1),
        ]

        task_id = Signal(TaskId)
        address = Signal(self._address_bits)
        remaining = Signal(self._address_bits + 1)
        fetched = Signal()  # read.data holds an entry not yet handed over
        advance = Signal()
        issue = Signal()
        m.d.comb += [
            advance.eq(~fetched | self.o.ready),
            issue.eq(advance & (remaining != 0)),
            read.addr.eq(address),
            read.en.eq(advance),
            self.busy.eq((remaining != 0) | fetched),
        ]
        with m.If(advance):
            m.d.sync += fetched.eq(issue)
        with m.If(issue):
            m.d.sync += [address.eq(address + 1), remaining.eq(remaining - 1)]

        # The configuration is sampled at the start and held for the run (see the class docstring).
        # ``remote`` is ``((range >> range_shift) & node_mask) != node``. The run's registers hold it
        # already spread over the range's bits (which bits are compared, against what, and whether
        # a bit above the range's top already differs), so that after the memory read it is one
        # XOR-AND-OR, not a shifter then a compare.
        node = Signal.like(self.config.node, name="run_node")
        compared = Signal(RANGE_BITS, name="run_compared")
        expected = Signal(RANGE_BITS, name="run_expected")
        differs = Signal(name="run_differs")
        config = self.config

        def spread(value):  # bit j of a node id at range bit range_shift + j; bits past the range drop
            return (value << config.range_shift)[:RANGE_BITS]

        entry = Packet(read.data)
        packet = Packet(Signal(PACKET_BITS, name="spawned"))
        m.d.comb += [
            packet.eq(entry),
            packet.header.ptype.eq(PacketType.TASK),
            packet.header.task_id.eq(task_id),
            packet.header.dst.eq(node),
            packet.header.src.eq(node),
            packet.header.remote.eq(differs | ((entry.header.range ^ expected) & compared).any()),
            packet.header.check.eq(0),
            self.o.valid.eq(fetched),
            self.o.payload.eq(packet),
        ]

        attached = Signal(8)
        m.d.comb += attached.eq(self._kernels)
        command = self.start.payload
        known = attached.bit_select(command.task_id.as_value(), 1)
        done = Signal()
        error = Signal()
        m.d.comb += self.start.ready.eq(~self.busy)
        with m.If(self.start.valid & self.start.ready):
            with m.If(known & (command.count != 0)):
                m.d.sync += [task_id.eq(command.task_id), address.eq(command.first),
                             remaining.eq(command.count), node.eq(self.config.node),
                             compared.eq(spread(config.node_mask)), expected.eq(spread(config.node)),
                             differs.eq((config.node & ~(spread(config.node_mask) >> config.range_shift)
                                         [:NODE_BITS]) != 0)]
            with m.Else():
                m.d.comb += [done.eq(1), error.eq(~known)]
        with m.If(fetched & self.o.ready & (remaining == 0)):
            m.d.comb += done.eq(1)
        m.d.sync += [self.done.eq(done), self.error.eq(error)]
        return m


register_block(
    "runtime_spawner", TaskSpawner, family="runtime",
    summary="FCsN task spawner: Kernel_start(task_id, first, count) streams tasks out of Spawn_MEM.",
    golden="golden.runtime.protocol:spawn",
    drops={"error": "Kernel_start commands naming a kernel id that is not attached (nothing spawned)"},
)
