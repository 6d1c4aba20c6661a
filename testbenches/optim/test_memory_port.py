"""Tests of ``memory_port`` (:class:`rtl.optim.memory_port.MemoryPort`) against cocotbext-axi's RAM model.

Read commands (tensor, address, length) and write commands (tensor, address, length, strobe) go in
on ``read_cmd`` and ``write_cmd``; each read tensor's beats come out on ``read_data.t<k>``, each
write tensor's beats go in on ``write_data.t<k>``. The golden model is
:mod:`golden.optim.transfers`: :func:`read_beats` for every read stream, :func:`write_memory` for
the RAM after the writes (the last beat of each command under its strobe), and the bursts on AR
and AW must be :func:`golden.bus.bursts.cut_commands` of the commands, in command order (the
port serves each direction strictly in order). :class:`BurstMonitor` checks every burst and the
outstanding limit. Stalls put random pauses on every AXI channel of the RAM, valid gaps on every
command and write-data stream and backpressure on every read stream.

* ``transfers``: batches of random reads and writes, with and without stalls;
* ``bus_errors``: SLVERR/DECERR ranges; the kernel's rule (``halt`` while an error is latched) is
  applied; sticky errors, zero read data from the first failing beat on, exactly the issued
  write bursts in memory, nothing hangs; then ``clear`` and a clean batch is exact again;
* ``zero_length_commands``: commands of length 0 among the others move nothing and hang nothing;
* ``reset_mid_transfer``: reset while traffic flows, then a clean batch with nothing left over.

Reset rule: the port has no abort path for an AXI burst that is open on the bus, so a reset must
reset the memory side in the same cycles (AXI's ARESETn is one signal for manager and
subordinate). The test does that: the RAM model shares ``rst`` and drops its open bursts.

The pytest runners are at the bottom of this file.
"""

import logging

import cocotb
import pytest
from cocotb.triggers import RisingEdge, with_timeout
from cocotbext.axi.constants import AxiResp

from golden.bus import random_words
from golden.bus.bursts import PAGE_BYTES, cut_commands
from golden.optim.transfers import read_beats, write_memory
from scripts.sim import knobs
from scripts.sim.runner import component_from_env, params_from_env, run_cocotb
from scripts.sim.stream import StreamSink, StreamSource, never, random_pauses, stream_layout
from scripts.sim.tb import CLOCK_PERIOD_NS, ClockedTB, Scoreboard
from testbenches.bus.tb import RAM_SIZE, BurstMonitor, FaultyAxiRam, address_of, random_pauses_all

STALL = 0.3
DEFAULT_BATCHES = 3
WRITE_BASE = RAM_SIZE // 2   # reads come from the lower half of the RAM, writes go to the upper half


def random_batch(rng, params, *, reads=12, writes=12, allow_empty=False):
    """Random read and write commands (RAM offsets) and the write data, in the two halves of the RAM.

    Write commands fit the write buffer when the port waits for whole commands (``write_gate`` 0).
    """
    max_burst, beat_bytes = params["max_burst"], params["data_width"] // 8
    page_beats = PAGE_BYTES // beat_bytes
    longest_write = params["write_buffer"] if not params["write_gate"] else 4 * max_burst + 5

    def command(base, tensors, longest):
        length = int(rng.integers(1, min(longest, (1, 3, 5)[int(rng.integers(3))] * max_burst + 3) + 1))
        if allow_empty and rng.random() < 0.25:
            length = 0
        span = (length + 1) * beat_bytes
        if rng.random() < 0.3:  # start a few beats before a 4 KB boundary
            page = int(rng.integers(1, (RAM_SIZE // 2 - span) // PAGE_BYTES))
            offset = page * PAGE_BYTES - int(rng.integers(1, min(8, page_beats) + 1)) * beat_bytes
        else:
            offset = int(rng.integers(0, (RAM_SIZE // 2 - span) // beat_bytes)) * beat_bytes
        return {"tensor": int(rng.integers(0, tensors)), "offset": base + offset, "length": length,
                "strobe": random_words(rng, 1, beat_bytes)[0]}

    read = [command(0, params["read_tensors"], 8 * max_burst)
            for _ in range(reads if params["read_tensors"] else 0)]
    write = [command(WRITE_BASE, params["write_tensors"], longest_write)
             for _ in range(writes if params["write_tensors"] else 0)]
    data = [random_words(rng, sum(c["length"] for c in write if c["tensor"] == k), params["data_width"])
            for k in range(params["write_tensors"])]
    return read, write, data


class PortTB(ClockedTB):
    def __init__(self, dut, *, stall=0.0, faults=(), salt=0):
        super().__init__(dut)
        component = component_from_env()
        params = params_from_env()
        self.params = params
        self.reads, self.writes = params["read_tensors"], params["write_tensors"]
        self.data_width = params["data_width"]
        self.beat_bytes = self.data_width // 8
        self.stall = stall
        self.salt = salt
        self.geometry = {"data_width": self.data_width, "max_burst": params["max_burst"],
                         "address_width": params["address_width"]}
        self.ram = FaultyAxiRam(dut, "m_axi_", self.clock, dut.rst, faults=faults,
                                in_flight=params["max_outstanding"] + 2)
        for interface in (self.ram.read_if, self.ram.write_if):
            interface.log.setLevel(logging.WARNING)
        self.image = bytearray(knobs.rng(1).bytes(RAM_SIZE))
        self.ram.write(0, bytes(self.image))
        if stall:
            self.ram.set_pause_generators(random_pauses_all(knobs.rng(300 + salt), stall))
        monitor = {"data_width": self.data_width, "max_burst": params["max_burst"],
                   "max_outstanding": params["max_outstanding"]}
        self.ar = BurstMonitor(dut, "m_axi", self.clock, direction="read", **monitor)
        self.aw = BurstMonitor(dut, "m_axi", self.clock, direction="write", **monitor)
        self.marks = {"read": 0, "write": 0}   # bursts recorded before the current batch
        self.drivers = []
        self.read_sinks, self.write_sources = [], []
        if self.reads:
            self.read_cmd = self._source("read_cmd", stream_layout(component, "read_cmd"), 1)
            self.read_sinks = [StreamSink(dut, f"read_data__t{k}", self.clock,
                                          backpressure=self._pauses(10 + k)) for k in range(self.reads)]
            self.drivers += self.read_sinks
        if self.writes:
            self.write_cmd = self._source("write_cmd", stream_layout(component, "write_cmd"), 2)
            self.write_sources = [self._source(f"write_data__t{k}", None, 20 + k) for k in range(self.writes)]
        dut.halt.value = 0
        dut.clear.value = 0
        self.halt_on_error = False
        cocotb.start_soon(self._halt())

    def _pauses(self, salt):
        return random_pauses(knobs.rng(1000 * self.salt + salt), self.stall) if self.stall else never()

    def _source(self, name, layout, salt):
        source = StreamSource(self.dut, name, self.clock, layout, pause=self._pauses(salt))
        self.drivers.append(source)
        return source

    async def _halt(self):
        # The kernel's rule: halt every port while any error is latched.
        while True:
            await RisingEdge(self.clock)
            error = int(self.dut.read_error.value) | int(self.dut.write_error.value)
            self.dut.halt.value = error if self.halt_on_error else 0

    # ---------------------------------------------------------------- traffic

    def random_batch(self, rng, **kwargs):
        return random_batch(rng, self.params, **kwargs)

    def _address(self, command):
        return address_of(command["offset"], self.params["address_width"])

    def send(self, read, write, data):
        if self.reads:
            self.read_cmd.send_many([{"tensor": c["tensor"], "address": self._address(c),
                                      "length": c["length"], "strobe": c["strobe"]} for c in read])
        if self.writes:
            self.write_cmd.send_many([{"tensor": c["tensor"], "address": self._address(c),
                                       "length": c["length"], "strobe": c["strobe"]} for c in write])
            for source, beats in zip(self.write_sources, data, strict=True):
                source.send_many(beats)

    def expected_reads(self, read):
        """Golden beats per read tensor, zero from the first beat (in command order) the RAM refuses."""
        golden = [{**c, "address": c["offset"]} for c in read]
        streams = [[] for _ in range(self.reads)]
        failed = None
        for command in golden:
            beats = read_beats(self.image, [command], data_width=self.data_width, tensors=self.reads)
            for beat, word in enumerate(beats[command["tensor"]]):
                offset = command["address"] + beat * self.beat_bytes
                failed = failed or self.ram.fault_at(offset, self.beat_bytes)
                streams[command["tensor"]].append(0 if failed else word)
        return streams

    async def run_batch(self, read, write, data, label):
        """Send a batch, wait (bounded) until everything is moved, and check it against the golden."""
        expected = self.expected_reads(read)
        boards = [Scoreboard(f"memory_port read_data.t{k} ({label})") for k in range(self.reads)]
        for board, beats in zip(boards, expected, strict=True):
            board.expect_many(beats)
        self.marks = {"read": len(self.ar.bursts), "write": len(self.aw.bursts)}
        self.send(read, write, data)
        beats = sum(c["length"] for c in read + write)

        async def settle():
            for board, sink in zip(boards, self.read_sinks, strict=True):
                while board.pending:
                    board.check(await sink.recv())
            for source in self.drivers:
                if isinstance(source, StreamSource):
                    await source.wait_idle()
            await RisingEdge(self.clock)
            while self.dut.busy.value:
                await RisingEdge(self.clock)

        limit = int(12 * (beats + len(read) + len(write) + 200) * (1 + 4 * self.stall))
        await with_timeout(settle(), limit * CLOCK_PERIOD_NS, "ns")
        await self.cycles(20)
        for board, sink in zip(boards, self.read_sinks, strict=True):
            while not sink.empty():   # a beat beyond the golden ones is a duplicate or a leak
                board.check(sink.queue.popleft())
            board.check_complete()
        for monitor in (self.ar, self.aw):
            assert not monitor.violations, f"{label}: {monitor.violations[:5]}; {knobs.describe()}"
            assert monitor.outstanding == 0, \
                f"{label}: {monitor.outstanding} bursts unanswered; {knobs.describe()}"
        self.check_read_bursts(read, label)
        return self.check_writes(write, data, label)

    def _bursts(self, monitor, direction):
        return [(address, beats) for _, address, beats in monitor.bursts[self.marks[direction]:]]

    def check_read_bursts(self, read, label):
        wanted = [(a, b) for a, b, _ in cut_commands([(self._address(c), c["length"]) for c in read],
                                                       **self.geometry)]
        got = self._bursts(self.ar, "read")
        if self.read_failed():  # after an error the reader issues no AR beyond the one registered
            assert got == wanted[:len(got)], f"{label}: AR bursts {got} not a prefix of {wanted}"
        else:
            assert got == wanted, f"{label}: AR bursts {got}, expected {wanted}; {knobs.describe()}"

    def read_failed(self):
        return bool(self.dut.read_error.value)

    def check_writes(self, write, data, label):
        """AW bursts: the golden ones, or a prefix after an error; RAM: exactly the issued beats written."""
        wanted = [(a, b) for a, b, _ in cut_commands([(self._address(c), c["length"]) for c in write],
                                                       **self.geometry)]
        got = self._bursts(self.aw, "write")
        stopped = bool(self.dut.write_error.value) or (self.halt_on_error and self.read_failed())
        if stopped:
            assert got == wanted[:len(got)], f"{label}: AW bursts {got} not a prefix of {wanted}"
        else:
            assert got == wanted, f"{label}: AW bursts {got}, expected {wanted}; {knobs.describe()}"
        issued = sum(beats for _, beats in got)
        # The golden writes beat by beat, cut after the issued ones; beats the RAM refused are not written.
        single = []
        streams = [iter(beats) for beats in data]
        all_bytes = (1 << self.beat_bytes) - 1
        for command in write:
            for beat in range(command["length"]):
                strobe = command["strobe"] if beat == command["length"] - 1 else all_bytes
                single.append(({"tensor": 0, "address": command["offset"] + beat * self.beat_bytes,
                                "length": 1, "strobe": strobe}, next(streams[command["tensor"]])))
        kept = [(c, w) for c, w in single[:issued]
                if self.ram.fault_at(c["address"], self.beat_bytes) is None]
        expected = write_memory(self.image, [c for c, _ in kept], [[w for _, w in kept]],
                                data_width=self.data_width)
        if not stopped:
            whole = write_memory(self.image, [{**c, "address": c["offset"]} for c in write], data,
                                 data_width=self.data_width)
            assert whole == expected, "the beat-by-beat golden differs from write_memory"
        actual = self.ram.read(0, RAM_SIZE)
        if actual != bytes(expected):
            first = next(i for i in range(RAM_SIZE) if actual[i] != expected[i])
            raise AssertionError(f"{label}: RAM differs first at {first:#x}: {actual[first:first + 8].hex()} "
                                 f"instead of {bytes(expected[first:first + 8]).hex()}; {knobs.describe()}")
        self.image = bytearray(actual)
        return issued

    def check_error(self, direction, expected):
        error = int(getattr(self.dut, f"{direction}_error").value)
        resp = int(getattr(self.dut, f"{direction}_resp").value)
        want = (0, 0) if expected is None else (1, int(expected))
        assert (error, resp) == want, \
            f"{direction}_error={error} {direction}_resp={resp}, expected {want}; {knobs.describe()}"

    async def clear_errors(self):
        self.dut.clear.value = 1
        await RisingEdge(self.clock)
        self.dut.clear.value = 0
        await self.cycles(2)


@cocotb.test()
@cocotb.parametrize(stall=[0.0, STALL])
async def transfers(dut, stall):
    """Batches of random reads and writes; every read stream, every burst and the RAM as golden."""
    salt = int(stall * 10)
    tb = PortTB(dut, stall=stall, salt=salt)
    rng = knobs.rng(salt)
    await tb.reset()
    for batch in range(knobs.vectors(DEFAULT_BATCHES, limit=30)):  # whole random batches of commands
        await tb.run_batch(*tb.random_batch(rng), f"stall={stall} batch {batch}")
    tb.check_error("read", None)
    tb.check_error("write", None)


def _fault(rng, command, beat_bytes):
    first = int(rng.integers(0, command["length"]))
    start = command["offset"] + first * beat_bytes
    resp = AxiResp.SLVERR if rng.random() < 0.5 else AxiResp.DECERR
    return (start, start + int(rng.integers(1, 4)) * beat_bytes, resp)


@cocotb.test()
@cocotb.parametrize(stall=[0.0, STALL])
async def bus_errors(dut, stall):
    """A failing range in a read command, a write command, then both: error codes, halt, no hang, clear.

    Each case runs a batch with the kernel's halt rule, checks it, then clears the errors and runs a
    clean batch, which must be exact again. A port without reads (writes) skips the cases it lacks.
    """
    salt = 20 + int(stall * 10)
    rng = knobs.rng(salt)
    tb = PortTB(dut, stall=stall, salt=salt)
    await tb.reset()

    def first_code(commands):
        codes = (tb.ram.fault_at(c["offset"] + beat * tb.beat_bytes, tb.beat_bytes)
                 for c in commands for beat in range(c["length"]))
        return next((code for code in codes if code is not None), None)

    cases = [where for where, present in (("read", tb.reads), ("write", tb.writes),
                                          ("both", tb.reads and tb.writes)) if present]
    for where in cases:
        read, write, data = tb.random_batch(rng)
        if where in ("read", "both"):
            tb.ram.faults.append(_fault(rng, read[len(read) // 2], tb.beat_bytes))
        if where in ("write", "both"):
            tb.ram.faults.append(_fault(rng, write[len(write) // 2], tb.beat_bytes))
        tb.halt_on_error = True
        await tb.run_batch(read, write, data, f"errors in {where}")
        tb.check_error("read", first_code(read))
        if where == "write":  # nothing halts the writes before their own failing beat
            tb.check_error("write", first_code(write))
        elif where == "read":
            tb.check_error("write", None)
        elif int(tb.dut.write_error.value):  # both: a read error may halt the writes before their fault
            tb.check_error("write", first_code(write))
        # Idle again: lift the halt, clear the errors, and a clean batch is exact.
        tb.halt_on_error = False
        await tb.cycles(2)
        await tb.clear_errors()
        tb.check_error("read", None)
        tb.check_error("write", None)
        tb.ram.faults.clear()
        await tb.run_batch(*tb.random_batch(rng), f"clean batch after errors in {where}")
        tb.check_error("read", None)
        tb.check_error("write", None)


@cocotb.test()
async def zero_length_commands(dut):
    """Commands of length 0 among the others: no beat, no burst, no data consumed, no hang."""
    tb = PortTB(dut, stall=STALL, salt=40)
    rng = knobs.rng(40)
    await tb.reset()
    for batch in range(2):
        await tb.run_batch(*tb.random_batch(rng, allow_empty=True), f"batch {batch} with empty commands")


@cocotb.test()
async def reset_mid_transfer(dut):
    """Reset (shared with the RAM) while traffic flows under stalls; then a clean batch is exact."""
    tb = PortTB(dut, stall=STALL, salt=50)
    rng = knobs.rng(50)
    await tb.reset()
    for round_ in range(max(1, knobs.vectors(DEFAULT_BATCHES, limit=30))):  # whole batches, each cut
        doomed = tb.random_batch(rng)
        tb.send(*doomed)
        beats = sum(c["length"] for c in doomed[0] + doomed[1])
        cycle = await tb.reset_mid_transfer(rng, after=(5, beats // 2 + 10), drivers=tb.drivers)
        # The RAM dropped its open bursts with the reset; whatever the doomed writes left is the new base.
        for monitor in (tb.ar, tb.aw):
            monitor.outstanding = 0
        await tb.cycles(2)
        assert not tb.dut.busy.value, \
            f"round {round_}: busy after the reset at cycle {cycle}; {knobs.describe()}"
        tb.image = bytearray(tb.ram.read(0, RAM_SIZE))
        await tb.run_batch(*tb.random_batch(rng), f"round {round_} after a reset at cycle {cycle}")


# ---------------------------------------------------------------- pytest

MODULE = __name__


def port(read_tensors, write_tensors, *, address_width=32, data_width=64, max_burst=8, max_outstanding=2,
         read_buffer=24, write_buffer=24, queue_depth=4, write_gate=0):
    return {"read_tensors": read_tensors, "write_tensors": write_tensors, "address_width": address_width,
            "data_width": data_width, "max_burst": max_burst, "max_outstanding": max_outstanding,
            "read_buffer": read_buffer, "write_buffer": write_buffer, "queue_depth": queue_depth,
            "write_gate": write_gate}


def _id(params):
    return "R{read_tensors}-W{write_tensors}-D{data_width}-M{max_burst}-G{write_gate}".format(**params)


@pytest.mark.parametrize("params", [
    port(2, 2),
    port(1, 3, address_width=64, data_width=32, max_burst=4, max_outstanding=3, read_buffer=2,
         write_buffer=16, queue_depth=2, write_gate=4),
    pytest.param(port(3, 0, data_width=128, max_burst=16), marks=pytest.mark.slow),
    pytest.param(port(0, 2, data_width=256, max_burst=5, write_gate=3), marks=pytest.mark.slow),
    pytest.param(port(4, 4, address_width=64, data_width=512, max_burst=64, max_outstanding=4,
                      read_buffer=256, write_buffer=256), marks=pytest.mark.slow),
], ids=_id)
def test_memory_port(params):
    run_cocotb("memory_port", MODULE, params=params)
