"""``neartrain board-demo``: one Adam step on the UART board demo, checked against ``golden.optim``.

The other end is :class:`rtl.board.adam_demo.AdamBoardDemo`, on a board behind a serial
port (``--port /dev/ttyUSB0``; needs pyserial) or in simulation behind a TCP socket
(``--port socket://127.0.0.1:PORT``; the cocotb testbench bridges it to the simulated
UART). The script reads the design's lane count and memory depth, writes random
parameters, gradients and Adam state plus the step's scalars
(:func:`golden.optim.host.scalar_bits`), starts the run, polls until it is done, reads the
results back and compares every word with :func:`golden.optim.host.reference_update`.
"""

import socket
import struct
import time
import urllib.parse

import numpy as np

__all__ = ["DemoError", "DemoClient", "open_link", "run_demo", "DEFAULT_HYPER"]

# AdamW with torch's defaults except the weight decay; the step is a command-line option.
DEFAULT_HYPER = {"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 1e-2, "decoupled": True}
_MAX_WORDS = 0xFFFF


class DemoError(Exception):
    """The link could not be opened or the device did not answer as the protocol says (one line)."""


class _SocketLink:
    def __init__(self, host, port, timeout):
        try:
            self._socket = socket.create_connection((host, port), timeout=timeout)
        except OSError as error:
            raise DemoError(f"cannot connect to {host}:{port}: {error.strerror or error}") from None
        self._socket.settimeout(timeout)

    def write(self, data):
        self._socket.sendall(data)

    def read(self, size):
        chunks = bytearray()
        while len(chunks) < size:
            try:
                chunk = self._socket.recv(size - len(chunks))
            except TimeoutError:
                chunk = b""
            if not chunk:
                break
            chunks += chunk
        return bytes(chunks)

    def close(self):
        self._socket.close()


class _SerialLink:
    def __init__(self, device, baud, timeout):
        try:
            import serial
        except ImportError:
            raise DemoError("pyserial is not installed (.venv/bin/pip install pyserial) and is needed for "
                            f"{device}") from None
        try:
            self._serial = serial.Serial(device, baudrate=baud, timeout=timeout)
        except (OSError, serial.SerialException) as error:
            raise DemoError(f"cannot open {device}: {error}") from None

    def write(self, data):
        self._serial.write(data)

    def read(self, size):
        return self._serial.read(size)

    def close(self):
        self._serial.close()


def open_link(port, baud=115200, timeout=60.0):
    """A byte link to the demo: ``socket://host:port`` or a serial device."""
    if port.startswith("socket://"):
        parsed = urllib.parse.urlsplit(port)
        if not parsed.hostname or not parsed.port:
            raise DemoError(f"--port {port!r} is not socket://HOST:PORT")
        return _SocketLink(parsed.hostname, parsed.port, timeout)
    return _SerialLink(port, baud, timeout)


class DemoClient:
    """The command protocol of :class:`rtl.board.adam_demo.AdamBoardDemo` over a byte link."""

    def __init__(self, link):
        self.link = link

    def _expect(self, size, what):
        data = self.link.read(size)
        if len(data) != size:
            raise DemoError(f"no answer to {what}: got {len(data)} of {size} bytes (is the board running the "
                            f"demo, at this baud rate?)")
        return data

    def _ok(self, what):
        reply = self._expect(1, what)
        if reply != b"K":
            raise DemoError(f"{what}: the device answered {reply!r}, not b'K'")

    def write_words(self, address, words):
        from rtl.board.adam_demo import OP_WRITE

        words = np.asarray(words, dtype=np.uint32)
        for offset in range(0, len(words), _MAX_WORDS):
            part = words[offset:offset + _MAX_WORDS]
            header = struct.pack("<BHH", OP_WRITE, address + offset, len(part))
            self.link.write(header + part.astype("<u4").tobytes())
            self._ok(f"write of {len(part)} words at {address + offset:#x}")

    def read_words(self, address, count):
        from rtl.board.adam_demo import OP_READ

        words = []
        for offset in range(0, count, _MAX_WORDS):
            size = min(_MAX_WORDS, count - offset)
            self.link.write(struct.pack("<BHH", OP_READ, address + offset, size))
            data = self._expect(4 * size, f"read of {size} words at {address + offset:#x}")
            words.append(np.frombuffer(data, dtype="<u4"))
        return np.concatenate(words) if words else np.zeros(0, np.uint32)

    def start(self):
        from rtl.board.adam_demo import OP_START

        self.link.write(bytes([OP_START]))
        self._ok("start")

    def poll(self):
        """The status byte as a dict of :data:`rtl.board.adam_demo.STATUS_BITS` to bool."""
        from rtl.board.adam_demo import OP_POLL, STATUS_BITS

        self.link.write(bytes([OP_POLL]))
        status = self._expect(1, "poll")[0]
        return {name: bool(status >> bit & 1) for name, bit in STATUS_BITS.items()}


def _random_tensors(rng, elements):
    def f32(values):
        return np.asarray(values, dtype=np.float32).view(np.uint32)

    return {
        "param": f32(rng.normal(0, 1, elements)),
        "grad": f32(rng.normal(0, 1e-2, elements)),
        "exp_avg": f32(rng.normal(0, 1e-3, elements)),
        "exp_avg_sq": f32(np.abs(rng.normal(0, 1e-4, elements))),
    }


def run_demo(*, port, baud=115200, elements=32, seed=1, step=3, timeout=60.0, hyper=None,
             copy_format="bf16", link=None, out=print):
    """Run one step on the device and compare it with the golden model; return True when bit-exact.

    Raises
    ------
    DemoError
        The link failed, the device broke the protocol, or a parameter does not fit the device.
    """
    from golden.optim.host import COPY_FORMAT_CODES, reference_update, scalar_bits
    from rtl.board.adam_demo import REGISTERS, TENSORS, tensor_base

    hyper = {**DEFAULT_HYPER, **(hyper or {}), "step": step}
    try:
        scalars = scalar_bits("adam", hyper)
    except ValueError as error:
        raise DemoError(str(error)) from None
    own_link = link is None
    link = link or open_link(port, baud, timeout)
    try:
        client = DemoClient(link)
        lanes, depth = (int(w) for w in client.read_words(REGISTERS["lanes"], 2))
        if not 0 < elements <= depth:
            raise DemoError(f"--elements must be 1 to {depth} (the device's memory depth), not {elements}")
        out(f"device: Adam board demo, {lanes} lane(s), {depth} elements per tensor")
        rng = np.random.default_rng(seed)
        tensors = _random_tensors(rng, elements)
        for index, name in enumerate(TENSORS[:4]):
            client.write_words(tensor_base(index, depth), tensors[name])
        registers = {"n": elements, "grad_format": 0, "copy_format": COPY_FORMAT_CODES.index(copy_format),
                     **scalars}
        for name, value in registers.items():
            client.write_words(REGISTERS[name], [value])
        readback = {name: int(client.read_words(REGISTERS[name], 1)[0]) for name in registers}
        if readback != registers:
            raise DemoError(f"register read-back differs: wrote {registers}, read {readback}")

        started = time.monotonic()
        client.start()
        while True:
            status = client.poll()
            if status["done"] and not status["busy"]:
                break
            if time.monotonic() - started > timeout:
                raise DemoError(f"the run did not finish within {timeout:g} s (status {status})")
        for flag in ("bad_length", "framing_error", "overrun", "bad_command"):
            if status[flag]:
                raise DemoError(f"the device reports {flag} (status {status})")
        cycles = int(client.read_words(REGISTERS["cycles"], 1)[0])

        results = {name: client.read_words(tensor_base(TENSORS.index(name), depth), elements)
                   for name in ("param", "exp_avg", "exp_avg_sq", "param16")}
        results["param16"] = results["param16"] & 0xFFFF
        expected = reference_update("adam", param=tensors["param"], grad=tensors["grad"],
                                    states={name: tensors[name] for name in ("exp_avg", "exp_avg_sq")},
                                    hyper=hyper, copy_format=copy_format)
        mismatches = 0
        for name, actual in results.items():
            wanted = np.asarray(expected[name], dtype=np.uint32)
            wrong = np.flatnonzero(actual != wanted)
            mismatches += len(wrong)
            if len(wrong):
                i = int(wrong[0])
                out(f"MISMATCH {name}: {len(wrong)} of {elements} elements differ; first at index {i}: "
                    f"param {tensors['param'][i]:#010x} grad {tensors['grad'][i]:#010x} exp_avg "
                    f"{tensors['exp_avg'][i]:#010x} exp_avg_sq {tensors['exp_avg_sq'][i]:#010x} -> expected "
                    f"{int(wanted[i]):#x}, got {int(actual[i]):#x}")
        if bool(status["nonfinite"]) != bool(expected["nonfinite"]):
            mismatches += 1
            out(f"MISMATCH nonfinite status: expected {expected['nonfinite']}, got {status['nonfinite']}")
        verdict = "PASS" if mismatches == 0 else "FAIL"
        out(f"{verdict}: Adam step {step} on {elements} elements (seed {seed}) against golden.optim: "
            f"{4 * elements - min(mismatches, 4 * elements)} of {4 * elements} words bit-exact; "
            f"the run took {cycles} cycles")
        return mismatches == 0
    finally:
        if own_link:
            link.close()


def build_board(*, board, output, lanes=1, depth=256, baud=115200, seed=1):
    """Build the demo's bitstream for an ECP5 ``board`` (:class:`boards.Board`) into ``output``.

    Returns a dict with the bitstream path, the UART divisor, Fmax and utilisation (as
    ``neartrain bitstream`` reports them). Program it with the board's usual tool, e.g.
    ``openFPGALoader -b ulx3s board_demo.bit``, then run ``neartrain board-demo --port``.
    """
    import json
    import pathlib
    import subprocess

    from rtl.board.adam_demo import check_geometry
    from rtl.board.board_top import BoardDemoTop, check_baud
    from scripts.flow.bitstream import BitstreamError, parse_nextpnr, yowasp_environment

    if board.target != "ecp5" or board.platform is None:
        raise DemoError(f"board {board.name!r} has no open-toolchain flow")
    try:
        check_geometry(lanes, depth)
        check_baud(baud)
        env = yowasp_environment()
    except (ValueError, BitstreamError) as error:
        raise DemoError(str(error)) from None
    top = BoardDemoTop(lanes=lanes, depth=depth, baud=baud)
    platform = board.load_platform()
    folder = pathlib.Path(output)
    name = "board_demo"
    plan = platform.prepare(top, name=name, nextpnr_opts=f"--report {name}.report.json --timing-allow-fail "
                                                         f"--seed {seed}")
    try:
        plan.execute_local(str(folder), env=env)
    except subprocess.CalledProcessError:
        logs = f"{folder / (name + '.rpt')}, {folder / (name + '.tim')}"
        raise DemoError(f"the ECP5 build failed; logs: {logs}") from None
    report_path, log_path = folder / f"{name}.report.json", folder / f"{name}.tim"
    figures = parse_nextpnr(report=json.loads(report_path.read_text()) if report_path.exists() else None,
                            log=log_path.read_text() if log_path.exists() else "")
    return {"bitstream": str(folder / f"{name}.bit"), "divisor": top.divisor(platform), **figures}
