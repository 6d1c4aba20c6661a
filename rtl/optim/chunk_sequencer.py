"""The chunk schedule of the updater: one DMA command per tensor per chunk, in a fixed tensor order."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..registration import Param, Parameterized, register_block
from .dataflow import select

__all__ = ["ChunkSequencer", "tensor_config_layout", "sequencer_command_layout"]

LENGTH_WIDTH = 32


def tensor_config_layout(address_width, strobe_width):
    """Per-tensor run configuration: base ``address``, total ``beats``, ``chunk_beats``,
    the byte ``tail_strobe`` of its last beat and ``enable``."""
    return data.StructLayout({"address": address_width, "beats": LENGTH_WIDTH, "chunk_beats": LENGTH_WIDTH,
                              "tail_strobe": strobe_width, "enable": 1})


def sequencer_command_layout(tensors, address_width, strobe_width):
    """A command: ``tensor`` index, byte ``address``, ``length`` in beats, ``strobe`` of its last beat."""
    return data.StructLayout({"tensor": range(max(tensors, 2)), "address": address_width,
                              "length": LENGTH_WIDTH, "strobe": strobe_width})


class ChunkSequencer(Parameterized, wiring.Component):
    """Issues the DMA commands of a chunked run: chunk 0 of every tensor, then chunk 1, and so on.

    This is the ordering half of Smart-Infinity's transfer handler (Section IV-B) moved
    into the kernel: within a chunk the tensors come in port order, so listing the
    parameter (and its 16-bit copy) before the optimizer state makes a shared memory port
    write the parameters of each chunk first. A chunk holds ``chunk_beats`` beats of a
    tensor (a 16-bit tensor has half as many beats per chunk as a 32-bit one, so chunk
    ``j`` covers the same elements in every tensor); the last chunk is shorter. Disabled
    tensors and tensors of zero beats issue nothing. The last command of a tensor carries
    its ``tail_strobe`` (the bytes of the final, possibly partial, beat); every other
    command's ``strobe`` is all ones.

    Parameters
    ----------
    tensors : int
        Number of tensors, 1 to 8.
    address_width : int
        Byte address width, 12 to 64.
    data_width : int
        Bus beat width in bits (a power of two, 8 to 1024): addresses advance by
        ``data_width // 8`` bytes per beat.

    counter_width : int
        Width of the two refusal counters, 1 to 32 (narrow ones for tests); they saturate.

    Attributes
    ----------
    config : In(ArrayLayout(tensor_config_layout(address_width, data_width // 8), tensors))
        Per-tensor configuration, sampled at a ``start`` that is taken. Every field is copied
        then, so a change of ``config`` while ``busy`` is ignored: it takes effect at the next
        run.
    start : In(1)
        Begins a run. Taken only while ``busy`` is low: a ``start`` while busy is ignored (the
        run goes on unchanged) and counted in ``ignored_starts``. A ``start`` whose ``config``
        has an enabled tensor with ``beats != 0`` and ``chunk_beats == 0`` (no chunk size) is
        refused: no command is issued and ``refused_starts`` counts it.
    cmd : Out(stream.Signature(sequencer_command_layout(tensors, address_width, data_width // 8)))
        Commands in chunk order.
    busy : Out(1)
        Commands remain to be issued.
    ignored_starts, refused_starts : Out(counter_width)
        Saturating counts of the ``start`` pulses ignored while busy, and of those refused for a
        ``chunk_beats`` of 0 (since reset).

    Notes
    -----
    Latency: the first command is offered the cycle after ``start``. Throughput: one
    command per cycle, plus a cycle for each disabled or finished tensor passed over.
    """

    PARAMS = (
        Param("tensors", int, 4, "number of tensors", minimum=1, maximum=8),
        Param("address_width", int, 64, "byte address width", minimum=12, maximum=64),
        Param("data_width", int, 512, "bus beat width in bits (power of two)", minimum=8, maximum=1024),
        Param("counter_width", int, 32, "width of the refused-start counters", minimum=1, maximum=32),
    )

    def __init__(self, *, tensors=4, address_width=64, data_width=512, counter_width=32):
        if data_width & (data_width - 1):
            raise ValueError(f"data_width must be a power of two, not {data_width}")
        strobe = data_width // 8
        super().__init__({
            "config": In(data.ArrayLayout(tensor_config_layout(address_width, strobe), tensors)),
            "start": In(1),
            "cmd": Out(stream.Signature(sequencer_command_layout(tensors, address_width, strobe))),
            "busy": Out(1),
            "ignored_starts": Out(counter_width),
            "refused_starts": Out(counter_width),
        })

    def elaborate(self, platform):
        m = Module()
        count = self._tensors
        beat_shift = (self._data_width // 8).bit_length() - 1
        remaining = [Signal(LENGTH_WIDTH, name=f"remaining{k}") for k in range(count)]
        address = [Signal(self._address_width, name=f"address{k}") for k in range(count)]
        # Per tensor, registered so that no compare lies between `index` and the command:
        # commands remain, and the next one is the tensor's last.
        live = [Signal(name=f"live{k}") for k in range(count)]
        final = [Signal(name=f"final{k}") for k in range(count)]
        index = Signal(range(count))

        # Copies of the configuration taken at start: what the host drives meanwhile is ignored.
        chunk_beats = [Signal(LENGTH_WIDTH, name=f"chunk_beats{k}") for k in range(count)]
        tail_strobe = [Signal(self._data_width // 8, name=f"tail_strobe{k}") for k in range(count)]
        last = select(index, final)
        m.d.comb += [
            self.busy.eq(Cat(*live).any()),
            self.cmd.valid.eq(select(index, live)),
            self.cmd.payload.tensor.eq(index),
            self.cmd.payload.address.eq(select(index, address)),
            self.cmd.payload.length.eq(Mux(last, select(index, remaining), select(index, chunk_beats))),
            self.cmd.payload.strobe.eq(Mux(last, select(index, tail_strobe),
                                           Const(-1, self._data_width // 8))),
        ]
        fire = self.cmd.valid & self.cmd.ready
        for k in range(count):
            with m.If(fire & (index == k)):
                # A whole chunk goes; after the last one the tensor is done, and its address
                # (advanced by a whole chunk, too) is never sent again.
                m.d.sync += [remaining[k].eq(remaining[k] - chunk_beats[k]),
                             address[k].eq(address[k] + (chunk_beats[k] << beat_shift)),
                             final[k].eq(remaining[k] <= (chunk_beats[k] << 1))]
                with m.If(final[k]):
                    m.d.sync += live[k].eq(0)
        with m.If(fire | ~select(index, live)):
            m.d.sync += index.eq(Mux(index == count - 1, 0, index + 1))
        # A start is taken only while idle, and only with a chunk size for every tensor it runs.
        wanted = [self.config[k].enable & (self.config[k].beats != 0) for k in range(count)]
        no_chunk = Cat(*(wanted[k] & (self.config[k].chunk_beats == 0) for k in range(count))).any()
        ignored, refused = Signal(), Signal()
        m.d.comb += [ignored.eq(self.start & self.busy), refused.eq(self.start & ~self.busy & no_chunk)]
        with m.If(self.start & ~self.busy & ~no_chunk):
            m.d.sync += index.eq(0)
            for k in range(count):
                config = self.config[k]
                m.d.sync += [remaining[k].eq(config.beats), address[k].eq(config.address),
                             live[k].eq(wanted[k]), final[k].eq(config.beats <= config.chunk_beats),
                             chunk_beats[k].eq(config.chunk_beats), tail_strobe[k].eq(config.tail_strobe)]
        for counter, event in ((self.ignored_starts, ignored), (self.refused_starts, refused)):
            with m.If(event & ~counter.all()):
                m.d.sync += counter.eq(counter + 1)
        return m


register_block(
    "chunk_sequencer", ChunkSequencer, family="optim",
    summary="Chunked DMA command schedule: chunk j of every tensor in port order, then chunk j+1.",
    golden="golden.optim.transfers:chunk_schedule",
    drops={"ignored_starts": "start pulses while busy, ignored (the run goes on; saturating)",
           "refused_starts": "start pulses refused for an enabled tensor with chunk_beats 0 (saturating)"},
)
