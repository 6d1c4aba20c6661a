"""The UART board demo (:class:`rtl.board.adam_demo.AdamBoardDemo`): cocotb tests and runners.

``host_script``: the real ``neartrain board-demo`` runs in a subprocess and talks to the
simulated UART through a TCP socket, which the testbench bridges to the ``rx``/``tx``
pins. The script checks the results against ``golden.optim`` and must exit 0 with PASS.

``protocol``: the command protocol and the error bits, driven from here: register and
tensor read-back at every lane position, zero counts, unmapped words, an unknown command,
a refused run (``n > depth``), a framing error and an overrun. Host bytes go out with
random idle gaps between them.

The pytest runners (at the bottom) run both against the simulated board, and check the
command line's one-line errors.
"""

import os
import pathlib
import select
import socket
import struct
import subprocess
import sys
import time

import cocotb
import pytest
from cocotb.triggers import ClockCycles, Event, FallingEdge, RisingEdge

from golden.optim.board_demo import (
    OP_POLL,
    OP_READ,
    OP_START,
    OP_WRITE,
    REGISTERS,
    REPLY_BAD,
    REPLY_OK,
    STATUS_BITS,
    TENSORS,
    tensor_base,
)
from rtl.board.adam_demo import AdamBoardDemo
from scripts.cli import main
from scripts.sim import knobs
from scripts.sim.runner import params_from_env, run_cocotb
from scripts.sim.tb import ClockedTB

ROOT = pathlib.Path(__file__).resolve().parents[2]
# Wall-clock limit of the host-script run (a simulated Adam datapath runs at about 1k cycles/s).
_HOST_WALL_SECONDS = float(os.environ.get("BOARD_DEMO_WALL_SECONDS", "600"))


class TB(ClockedTB):
    """Owns the clock, the host's UART transmitter (``rx`` pin) and receiver (``tx`` pin)."""

    def __init__(self, dut, gap_probability=0.3):
        super().__init__(dut)
        params = params_from_env()
        self.divisor = params["divisor"]
        self.depth = params["depth"]
        self.lanes = params["lanes"]
        self.rng = knobs.rng(1)
        self.gap_probability = gap_probability
        self.to_device = []
        self.from_device = []
        self._sent = Event()
        self._arrived = Event()
        dut.rx.value = 1
        cocotb.start_soon(self._drive())
        cocotb.start_soon(self._monitor())

    def send(self, data, *, stop_bit=1):
        """Queue bytes for the device (``stop_bit=0`` makes framing errors)."""
        self.to_device.extend((byte, stop_bit) for byte in data)
        self._sent.clear()

    async def wait_sent(self):
        while self.to_device:
            await self._sent.wait()

    async def _drive(self):
        while True:
            if not self.to_device:
                self._sent.set()
                await ClockCycles(self.clock, self.divisor)
                continue
            byte, stop = self.to_device.pop(0)
            # Idle generator: random gaps of up to two bit times between frames.
            if self.rng.random() < self.gap_probability:
                await ClockCycles(self.clock, int(self.rng.integers(1, 2 * self.divisor)))
            for bit in [0] + [byte >> i & 1 for i in range(8)] + [stop]:
                self.dut.rx.value = bit
                await ClockCycles(self.clock, self.divisor)
            self.dut.rx.value = 1

    async def _monitor(self):
        while True:
            await FallingEdge(self.dut.tx)
            await ClockCycles(self.clock, self.divisor // 2)
            assert int(self.dut.tx.value) == 0, "a start bit shorter than half a bit"
            byte = 0
            for i in range(8):
                await ClockCycles(self.clock, self.divisor)
                byte |= int(self.dut.tx.value) << i
            await ClockCycles(self.clock, self.divisor)
            assert int(self.dut.tx.value) == 1, f"byte {byte:#04x} from the device has a low stop bit"
            self.from_device.append(byte)
            self._arrived.set()

    async def receive(self, count, *, limit_bits=None):
        limit = (limit_bits or 20 * (count + 8)) * 10 * self.divisor
        start = self.cycle
        while len(self.from_device) < count:
            assert self.cycle - start < limit, (f"waited {limit} cycles for {count} bytes, got "
                                                f"{bytes(self.from_device)!r}")
            await ClockCycles(self.clock, self.divisor)
        data, self.from_device = bytes(self.from_device[:count]), self.from_device[count:]
        return data

    # The protocol, as the host script speaks it.
    async def write(self, address, words):
        self.send(struct.pack("<BHH", OP_WRITE, address, len(words)) + struct.pack(f"<{len(words)}I", *words))
        assert await self.receive(1, limit_bits=40 * len(words) + 80) == bytes([REPLY_OK])

    async def read(self, address, count):
        self.send(struct.pack("<BHH", OP_READ, address, count))
        return list(struct.unpack(f"<{count}I", await self.receive(4 * count)))

    async def poll(self):
        self.send(bytes([OP_POLL]))
        status = (await self.receive(1))[0]
        return {name: bool(status >> bit & 1) for name, bit in STATUS_BITS.items()}


@cocotb.test()
async def protocol(dut):
    tb = TB(dut)
    await tb.reset()
    seed = knobs.seed()
    rng = knobs.rng(2)
    assert await tb.read(REGISTERS["lanes"], 2) == [tb.lanes, tb.depth], f"seed {seed}"
    assert await tb.poll() == dict.fromkeys(STATUS_BITS, False)

    # Registers and every tensor, at random addresses covering every lane position.
    values = [int(v) for v in rng.integers(0, 1 << 32, 3 + 9)]
    await tb.write(REGISTERS["n"], values)
    got = await tb.read(REGISTERS["n"], len(values))
    expected = [values[0], values[1] & 3, values[2] & 3] + values[3:]  # the formats are 2-bit registers
    assert got == expected, f"seed {seed}: {got} != {expected}"
    for index, name in enumerate(TENSORS):
        base = tensor_base(index, tb.depth)
        start = int(rng.integers(0, tb.depth - 8))
        words = [int(v) for v in rng.integers(0, 1 << 32, 7)]
        await tb.write(base + start, words)
        mask = 0xFFFF if name == "param16" else 0xFFFFFFFF
        got = await tb.read(base + start - 1 if start else base, 8 if start else 7)
        got = got[1:] if start else got
        assert got[:7] == [w & mask for w in words], f"seed {seed}: {name} at {start}: {got} != {words}"
    # Zero counts; unmapped words read 0 and ignore writes; read-only registers keep their value.
    tb.send(struct.pack("<BHH", OP_WRITE, 0x40, 0))
    assert await tb.receive(1) == bytes([REPLY_OK])
    tb.send(struct.pack("<BHH", OP_READ, 0x40, 0))
    await tb.write(0x40, [0x12345678])
    await tb.write(REGISTERS["lanes"], [7])
    unmapped = tensor_base(len(TENSORS), tb.depth)
    assert await tb.read(0x40, 1) == [0] and await tb.read(REGISTERS["lanes"], 1) == [tb.lanes]
    if unmapped < 1 << 16:
        assert await tb.read(unmapped, 1) == [0]

    # An unknown command: '?' and bad_command, cleared by the poll that reports it.
    tb.send(b"X")
    assert await tb.receive(1) == bytes([REPLY_BAD])
    status = await tb.poll()
    assert status["bad_command"] and not status["busy"]
    assert not (await tb.poll())["bad_command"]

    # A run longer than the memories is refused: bad_length and done, nothing runs.
    await tb.write(REGISTERS["n"], [tb.depth + 1])
    tb.send(bytes([OP_START]))
    assert await tb.receive(1) == bytes([REPLY_OK])
    status = await tb.poll()
    assert status["bad_length"] and status["done"] and not status["busy"], status
    assert await tb.read(REGISTERS["cycles"], 1) == [0]

    # A short run (the results are the core's business; the host-script test checks them).
    await tb.write(REGISTERS["n"], [2 * tb.lanes + 1])
    tb.send(bytes([OP_START]))
    assert await tb.receive(1) == bytes([REPLY_OK])
    for _ in range(50):
        status = await tb.poll()
        if status["done"]:
            break
    assert status["done"] and not status["busy"] and not status["bad_length"], status
    cycles = (await tb.read(REGISTERS["cycles"], 1))[0]
    assert 3 <= cycles < 400, cycles

    # A frame with a low stop bit: framing_error, and the byte is dropped.
    tb.send(bytes([OP_POLL]), stop_bit=0)
    await tb.wait_sent()
    await ClockCycles(tb.clock, 30 * tb.divisor)
    assert not tb.from_device, "a frame with a bad stop bit was taken"
    status = await tb.poll()
    assert status["framing_error"] and not status["overrun"], status
    assert not (await tb.poll())["framing_error"]

    # Bytes sent while the device is still answering a read overrun its one-byte receiver: the
    # first poll waits in the receiver, the next two are dropped; that poll's answer says so.
    tb.gap_probability = 0
    tb.send(struct.pack("<BHH", OP_READ, REGISTERS["n"], 4) + bytes([OP_POLL]) * 3)
    answer = await tb.receive(17)
    assert answer[16] >> STATUS_BITS["overrun"] & 1, f"no overrun reported: {answer!r}"
    await ClockCycles(tb.clock, 20 * tb.divisor)
    assert not tb.from_device, "a dropped byte was answered"
    assert not (await tb.poll())["overrun"]


@cocotb.test()
async def host_script(dut):
    """The real host script, in a subprocess, over a socket bridged to the UART pins."""
    tb = TB(dut, gap_probability=0.1)
    await tb.reset()
    default = int(os.environ.get("BOARD_DEMO_ELEMENTS", "24"))
    elements = knobs.vectors(default, limit=max(default, tb.depth))  # one shard, over a simulated UART
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    command = ["board-demo", "--port", f"socket://127.0.0.1:{port}", "--elements", str(elements),
               "--seed", str(knobs.seed()), "--step", os.environ.get("BOARD_DEMO_STEP", "3"),
               "--timeout", "300"]
    host = subprocess.Popen([sys.executable, "-c", "import sys; from scripts.cli import main; "
                             "sys.exit(main(sys.argv[1:]))", *command], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        # Simulated time stands still until the script connects (or exits early, e.g. on an error).
        server.settimeout(1)
        connection = None
        while connection is None and host.poll() is None:
            try:
                connection, _ = server.accept()
            except TimeoutError:
                continue
        if connection is None:
            raise AssertionError(f"the host script exited before connecting:\n{host.communicate()[0]}")
        connection.setblocking(False)
        started = time.monotonic()
        while host.poll() is None:
            assert time.monotonic() - started < _HOST_WALL_SECONDS, "the host script did not finish"
            await ClockCycles(tb.clock, 4 * tb.divisor)
            readable, _, _ = select.select([connection], [], [], 0)
            if readable:
                try:
                    data = connection.recv(4096)
                except (BlockingIOError, ConnectionResetError):
                    data = b""
                tb.send(data)
            if tb.from_device:
                try:
                    connection.sendall(bytes(tb.from_device))
                except (BrokenPipeError, ConnectionResetError):
                    pass
                tb.from_device.clear()
        connection.close()
    finally:
        server.close()
        if host.poll() is None:
            host.kill()
        output = host.communicate()[0]
    dut._log.info("host script output:\n%s", output)
    if os.environ.get("BOARD_DEMO_EXPECT") == "FAIL":
        # A datapath that computes nothing: the script must notice, name the mismatch and exit 1.
        assert host.returncode == 1 and "MISMATCH" in output and "FAIL" in output, output
    else:
        assert host.returncode == 0 and "PASS" in output, f"host script exit {host.returncode}:\n{output}"
    await RisingEdge(tb.clock)


# ---------------------------------------------------------------- pytest runners

MODULE = __name__


def _params(lanes, depth, arithmetic, divisor=8):
    return {"lanes": lanes, "depth": depth, "divisor": divisor, "arithmetic": arithmetic}


def test_board_demo_host_script_passes_against_golden():
    """``neartrain board-demo`` over the simulated UART: one Adam step, bit-exact with golden.optim."""
    run_cocotb(AdamBoardDemo, MODULE, params=_params(1, 64, True, divisor=4), testcase="host_script",
               extra_env={"BOARD_DEMO_ELEMENTS": "12"})


def test_board_demo_host_script_notices_wrong_results():
    """With the arithmetic left out the results are zero: the script must fail and say where."""
    run_cocotb(AdamBoardDemo, MODULE, params=_params(2, 32, False), testcase="host_script",
               extra_env={"BOARD_DEMO_EXPECT": "FAIL", "BOARD_DEMO_ELEMENTS": "8"})


@pytest.mark.parametrize("lanes,depth", [(2, 32), (4, 256)])
def test_board_demo_protocol(lanes, depth):
    run_cocotb(AdamBoardDemo, MODULE, params=_params(lanes, depth, False), testcase="protocol")


@pytest.mark.slow
def test_board_demo_two_lanes_long():
    """Two lanes, a full 128-element shard, at step 1000 (the model runs at about 1k cycles/s)."""
    run_cocotb(AdamBoardDemo, MODULE, params=_params(2, 128, True, divisor=4), testcase="host_script",
               extra_env={"BOARD_DEMO_ELEMENTS": "128", "BOARD_DEMO_STEP": "1000",
                          "BOARD_DEMO_WALL_SECONDS": "3600"})


@pytest.mark.parametrize("argv,message", [
    ([], "either --port"),
    (["--port", "socket://127.0.0.1:1", "--build", "x"], "either --port"),
    (["--port", "socket://nowhere"], "socket://HOST:PORT"),
    (["--build", "{tmp}", "--lanes", "3"], "lanes must be one of 1, 2, 4"),
    (["--build", "{tmp}", "--board", "smartssd"], "no open-toolchain flow"),
    (["--build", "{tmp}", "--board", "nope"], "nope"),
])
def test_board_demo_bad_input_is_one_line(argv, message, tmp_path, capsys):
    argv = [arg.replace("{tmp}", str(tmp_path)) for arg in argv]
    assert main(["board-demo", *argv]) == 2
    error = capsys.readouterr().err
    assert len(error.strip().splitlines()) == 1 and message in error, error


def test_board_demo_serial_needs_pyserial(capsys):
    """Without pyserial a serial port is a one-line error (with it, the port does not exist here)."""
    assert main(["board-demo", "--port", "/dev/nonexistent-neartrain-tty"]) == 2
    error = capsys.readouterr().err
    assert len(error.strip().splitlines()) == 1
    assert "pyserial is not installed" in error or "cannot open" in error
