"""Host device of ``topk_dram_scatter`` (the paper mode): its testbench and measured DRAM traffic.

:class:`DramScatterTB` places a flat pair stream in one ``AxiRam`` and a guarded dense region in
another, runs one command and checks it against :func:`golden.compress.scatter_stream`, the
block's ``traffic`` counters against the monitors' beat counts, and the beats against what the
design promises. The session ``compress_dram.traffic`` (:func:`dram_scatter_traffic`) measures
pairs per cycle and AXI beats at several densities; :func:`run_dram_scatter_traffic` runs it in a
simulation (``bench_compress --paper``; the block's test ``measure_traffic`` awaits the same
session). Beside :mod:`.compress`, which is long enough alone.
"""

import logging
import types

import cocotb
import numpy as np
from amaranth.lib import data
from cocotb.triggers import RisingEdge, with_timeout

from golden.compress import encode_pairs, scatter_stream
from golden.compress.registers import ERROR_NAMES, traffic_fields
from scripts.sim import knobs
from scripts.sim.axi import BurstMonitor, FaultyAxiRam, random_pauses_all
from scripts.sim.devices.compress import CLOCK_NS, PAUSE_PROBABILITY, RATIOS, errors_layout, random_values
from scripts.sim.runner import component_from_env, params_from_env
from scripts.sim.stream import StreamSource, never, random_pauses, stream_layout, unpack
from scripts.sim.tb import ClockedTB

__all__ = ["DRAM_RAM_SIZE", "GUARD_BYTES", "dram_scatter_config", "traffic_layout", "DramScatterTB",
           "flat_words", "SESSIONS", "dram_scatter_traffic", "run_dram_scatter_traffic"]

# The RAM models of both ports, and the guard bytes on either side of a dense region.
DRAM_RAM_SIZE = 1 << 20
GUARD_BYTES = 256


def dram_scatter_config(lanes, data_width, value_format="f32", rmw_depth=16, **extra):
    """Parameters of ``topk_dram_scatter`` (32-bit addresses, 16-beat bursts, 4 outstanding), as
    test_dram_scatter.py and bench_compress.py build it."""
    return {"lanes": lanes, "data_width": data_width, "value_format": value_format, "rmw_depth": rmw_depth,
            "address_width": 32, "max_burst": 16, "max_outstanding": 4, **extra}


def traffic_layout():
    """``topk_dram_scatter``'s ``traffic`` output as the tests read it (:mod:`golden.compress.registers`)."""
    return data.StructLayout(traffic_fields())


class DramScatterTB(ClockedTB):
    """``topk_dram_scatter`` with its pair and dense ``AxiRam`` models (faults and stalls as asked),
    a monitor on every port and the ``done`` reports; :meth:`run` runs and checks one command."""

    def __init__(self, dut, *, stall=False, salt=0, dense_faults=(), pair_faults=(),
                 dense_fault_kinds=("read", "write")):
        super().__init__(dut)
        self.component = component_from_env()
        self.params = params = params_from_env()
        self.lanes, self.value_format = params["lanes"], params["value_format"]
        self.beat_bytes = params["data_width"] // 8
        self.per_beat = self.beat_bytes // 4
        self.pair_beat_bytes = 8 * self.lanes
        depth = params["rmw_depth"]
        self.dense_ram = FaultyAxiRam(dut, "m_axi_dense_", self.clock, dut.rst, size=DRAM_RAM_SIZE,
                                      faults=dense_faults, in_flight=depth + params["max_outstanding"] + 2)
        # FaultyAxiRam guards both directions; undo the guard of a direction that must not fail.
        if "write" not in dense_fault_kinds:
            write_if = self.dense_ram.write_if
            write_if._write = types.MethodType(type(write_if)._write, write_if)
        if "read" not in dense_fault_kinds:
            read_if = self.dense_ram.read_if
            read_if._read = types.MethodType(type(read_if)._read, read_if)
        self.pair_ram = FaultyAxiRam(dut, "m_axi_pairs_", self.clock, dut.rst, size=DRAM_RAM_SIZE,
                                     faults=pair_faults, in_flight=params["max_outstanding"] + 2)
        for ram in (self.dense_ram, self.pair_ram):
            for interface in (ram.read_if, ram.write_if):
                interface.log.setLevel(logging.WARNING)
            if stall:
                ram.set_pause_generators(random_pauses_all(knobs.rng(300 + salt), PAUSE_PROBABILITY))
        outstanding = params["max_outstanding"]
        self.dense_reads = BurstMonitor(dut, "m_axi_dense", self.clock, direction="read",
                                        data_width=8 * self.beat_bytes, max_burst=1, max_outstanding=depth)
        self.dense_writes = BurstMonitor(dut, "m_axi_dense", self.clock, direction="write",
                                         data_width=8 * self.beat_bytes, max_burst=params["max_burst"],
                                         max_outstanding=max(depth, outstanding))
        self.pair_reads = BurstMonitor(dut, "m_axi_pairs", self.clock, direction="read",
                                       data_width=8 * self.pair_beat_bytes, max_burst=params["max_burst"],
                                       max_outstanding=outstanding)
        pause = random_pauses(knobs.rng(100 + salt), PAUSE_PROBABILITY) if stall else never()
        self.cmd = StreamSource(dut, "cmd", self.clock, stream_layout(self.component, "cmd"), pause=pause)
        self.reports = []
        self.w_beats = 0
        self.next_pairs = 0
        self.next_dense = 0
        cocotb.start_soon(self._watch())

    async def _watch(self):
        dut = self.dut
        while True:
            await RisingEdge(self.clock)
            if dut.m_axi_dense__wvalid.value and dut.m_axi_dense__wready.value:
                self.w_beats += 1
            if dut.m_axi_pairs__awvalid.value or dut.m_axi_pairs__wvalid.value:
                raise AssertionError("the pair port drove AW or W")
            if dut.done.value:
                self.reports.append({
                    "errors": unpack(errors_layout(), int(dut.errors.value)),
                    "status": int(dut.status.value),
                    "read_error": int(dut.read_error.value), "write_error": int(dut.write_error.value),
                    "traffic": unpack(traffic_layout(), int(dut.traffic.value)), "cycle": self.cycle,
                })

    def _allocate(self, attribute, nbytes, align):
        offset = getattr(self, attribute)
        span = -(-max(nbytes, 1) // align) * align
        setattr(self, attribute, offset + span + align * 3)
        assert getattr(self, attribute) < DRAM_RAM_SIZE, "test data overflow the RAM model"
        return offset

    def place(self, rng, words, size):
        """Write the pair words and a garbage-filled dense region with guards; return both addresses."""
        raw = np.asarray(words, np.uint64).astype("<u8").tobytes()
        pairs = self._allocate("next_pairs", len(raw), self.pair_beat_bytes)
        self.pair_ram.write(pairs, raw)
        # The region starts a few beats in, so guards on both sides lie in the same RAM.
        dense = self._allocate("next_dense", 4 * size + 2 * GUARD_BYTES, self.beat_bytes) + GUARD_BYTES
        self.dense_ram.write(dense - GUARD_BYTES, rng.integers(0, 256, 4 * size + 2 * GUARD_BYTES,
                                                              dtype=np.uint8).tobytes())
        return pairs, dense

    async def run(self, rng, words, size, count, promised_sorted, label, *, golden_words=None,
                  check_dense=True):
        """Run one command and check it; return the measured traffic."""
        words = np.asarray(words, np.uint64)
        pairs, dense = self.place(rng, words, size)
        guards = (self.dense_ram.read(dense - GUARD_BYTES, GUARD_BYTES),
                  self.dense_ram.read(dense + 4 * size, GUARD_BYTES))
        seen = words if golden_words is None else golden_words
        expected, errors = scatter_stream(seen, size, value_format=self.value_format, pair_count=count,
                                          sorted_within_chunk=promised_sorted)
        marks = (len(self.reports), self.w_beats, len(self.dense_reads.responses),
                 len(self.dense_writes.bursts), len(self.pair_reads.responses))
        start = self.cycle
        self.cmd.send_nowait({"dense": dense, "size": size, "pairs": pairs, "words": len(words),
                              "count": count, "sorted": int(promised_sorted)})
        beats = -(-4 * size // self.beat_bytes)
        budget = 40 * (len(words) + beats + 50)

        async def finished():
            while len(self.reports) == marks[0]:
                await RisingEdge(self.clock)

        where = f"{label}; {knobs.describe()}"
        try:
            await with_timeout(finished(), budget * CLOCK_NS, "ns")
        except Exception as error:
            raise AssertionError(f"no done within {budget} cycles: {self.port_state()}; {where}") from error
        report = self.reports[marks[0]]
        wanted = {name: getattr(errors, name) for name in ERROR_NAMES}
        assert report["errors"] == wanted, f"errors {report['errors']}, expected {wanted}: {where}"
        assert report["status"] == int(errors.status), f"status {report['status']:#x}: {where}"
        after = (self.dense_ram.read(dense - GUARD_BYTES, GUARD_BYTES),
                 self.dense_ram.read(dense + 4 * size, GUARD_BYTES))
        assert guards == after, f"a guard byte changed: {where}"
        end = dense + beats * self.beat_bytes
        for _, address, length in self.dense_writes.bursts[marks[3]:]:
            assert dense <= address and address + length * self.beat_bytes <= end, \
                f"write burst at {address:#x} of {length} beats outside the region's beats: {where}"
        if check_dense:
            actual = np.frombuffer(self.dense_ram.read(dense, 4 * size), "<u4")
            mismatch = np.flatnonzero(actual != expected.view(np.uint32))
            assert not mismatch.size, (
                f"{mismatch.size} elements differ, first {mismatch[0]}: {actual[mismatch[0]]:#010x} expected "
                f"{expected.view(np.uint32)[mismatch[0]]:#010x}: {where}")
        measured = {
            "cycles": report["traffic"]["cycles"],
            "dense_reads": len(self.dense_reads.responses) - marks[2],
            "dense_writes": self.w_beats - marks[1],
            "pair_reads": len(self.pair_reads.responses) - marks[4],
        }
        assert measured == {**report["traffic"], "cycles": measured["cycles"]}, \
            f"traffic counters {report['traffic']}, monitors {measured}: {where}"
        assert 0 < measured["cycles"] <= report["cycle"] - start, \
            f"cycle counter {measured['cycles']}: {where}"
        if not (report["read_error"] or report["write_error"]):
            received = min(count, len(words))
            accepted = received - errors.out_of_range - errors.unsorted
            promised = {"dense_reads": accepted, "dense_writes": size // self.per_beat
                        + int(size % self.per_beat != 0) + accepted,
                        "pair_reads": -(-len(words) // self.lanes)}
            assert {key: measured[key] for key in promised} == promised, \
                f"beats {measured}, expected {promised}: {where}"
        first_read = [cycle for cycle, _, _ in self.dense_reads.bursts if cycle > start]
        measured.update(size=size, words=len(words), report=report, pairs=int(min(count, len(words))),
                        scatter_cycles=report["cycle"] - first_read[0] if first_read else 0)
        return measured

    def port_state(self):
        """The handshake signals of every port and the beats seen, for a timeout report."""
        dut = self.dut
        names = ["busy", "cmd__valid", "cmd__ready"] + [f"m_axi_{port}__{name}" for port in ("dense", "pairs")
                                                     for name in ("awvalid", "awready", "wvalid", "wready",
                                                                  "bvalid", "arvalid", "arready", "rvalid",
                                                                  "rready")]
        state = {name: int(getattr(dut, name).value) for name in names}
        state.update(w_beats=self.w_beats, dense_r=len(self.dense_reads.responses),
                     dense_ar=len(self.dense_reads.bursts), dense_aw=len(self.dense_writes.bursts),
                     dense_b=len(self.dense_writes.responses), pair_r=len(self.pair_reads.responses))
        return state

    async def finish(self):
        await self.cycles(20)
        assert not self.dut.busy.value, "busy stays high after the last run"
        for monitor in (self.dense_reads, self.dense_writes, self.pair_reads):
            assert not monitor.violations, f"{monitor.violations[:5]}; {knobs.describe()}"


def flat_words(indices, values, value_format):
    """The flat pair stream of ``indices`` and ``values`` (:func:`golden.compress.encode_pairs`)."""
    return encode_pairs(np.asarray(indices, np.int64), values, value_format=value_format)


async def dram_scatter_traffic(dut, job):
    """Pairs per cycle and DRAM bytes per parameter at 0.1 %, 1 %, 10 % (random sorted indices), no stalls.

    A shard of ``job["size"]`` elements per ratio (and at 50 %); returns one dict per ratio.
    """
    tb = DramScatterTB(dut)
    rng = knobs.rng(41)
    await tb.reset()
    size = job["size"]
    results = []
    for ratio in (*RATIOS, 0.5):
        n = max(1, int(round(ratio * size)))
        indices = np.sort(rng.choice(size, n, replace=False))
        values = random_values(rng, n, tb.value_format)
        measured = await tb.run(rng, flat_words(indices, values, tb.value_format), size, n, True,
                                {"ratio": ratio, "size": size})
        measured.pop("report")
        measured.update(ratio=ratio, beat_bytes=tb.beat_bytes, pair_beat_bytes=tb.pair_beat_bytes,
                        lanes=tb.lanes)
        results.append(measured)
        dut._log.info("bench: %s", measured)
    await tb.finish()
    return results


SESSIONS = {"traffic": dram_scatter_traffic}


def run_dram_scatter_traffic(params, size):
    """:func:`dram_scatter_traffic` on ``topk_dram_scatter`` built with ``params``, a shard of ``size``
    elements; returns its list of results."""
    from scripts.sim.devices import run_session

    return run_session("topk_dram_scatter", "compress_dram.traffic", {"size": size}, params=params)
