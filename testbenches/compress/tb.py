"""Helpers the compress cocotb tests share: pair values, beat packing, the golden dense chunks,
chunked Top-K wire streams (well formed and corrupted), and the stream testbench.

Not a cocotb test module itself; the blocks' ``test_<module>.py`` files import it. The pair values,
the golden dense beats, the well-formed streams, the ``done`` reports' checks and
:class:`CompressTB` are the host device's (:mod:`scripts.sim.devices.compress`), and the
``topk_dram_scatter`` configuration and ``traffic`` layout :mod:`scripts.sim.devices.compress_dram`'s,
re-exported here.
"""

import gc

import numpy as np
import pytest
from cocotb.triggers import RisingEdge

from golden.compress import chunk_count
from scripts.sim import knobs
from scripts.sim.devices.compress import (
    AXI_PARAMS,
    CLOCK_NS,
    PAUSE_PROBABILITY,
    RATIOS,
    CompressTB,
    check_report,
    dense_beats,
    errors_layout,
    expect_dense_stream,
    random_values,
    stall_salt,
    top_k_stream,
    value_bits,
    wait_report,
)
from scripts.sim.devices.compress_dram import dram_scatter_config, traffic_layout
from scripts.sim.stream import unpack

__all__ = ["random_values", "value_bits", "dense_beats", "CompressTB", "PAUSE_PROBABILITY", "CLOCK_NS",
           "stall_salt", "CutBursts", "idle_after_reset", "CORRUPTIONS", "top_k_stream", "corrupted_stream",
           "random_size", "errors_layout", "traffic_layout", "AXI_PARAMS", "dram_scatter_config", "RATIOS",
           "expect_dense_stream", "collect_reports", "corrupted_transfers", "check_cleared",
           "wait_report", "check_report", "engine_params", "engine_id", "check_rejected"]


# Every malformation ``corrupted_stream`` makes.
CORRUPTIONS = ("out_of_range", "chunk_violation", "unsorted", "excess", "truncated", "header_count",
               "huge_header", "duplicates", "empty_transfer", "random_words")


async def collect_reports(tb):
    """Append ``(errors, status)`` to ``tb.reports`` at every ``done`` pulse (run it with ``start_soon``)."""
    layout = errors_layout()
    while True:
        await RisingEdge(tb.clock)
        if tb.dut.done.value:
            tb.reports.append((unpack(layout, int(tb.dut.errors.value)), int(tb.dut.status.value)))


class CutBursts:
    """Burst monitors seen across a reset (a ``driver`` of ``ClockedTB.reset_mid_transfer``).

    The block's reset is its AXI memory models' reset too (``dut.rst``), as AXI requires: the
    bursts in flight are dropped at both ends. ``clear()`` (reset rising, then falling) records
    in ``cut`` how many were open when it rose and makes the monitors forget them.
    """

    def __init__(self, *monitors):
        self.monitors = monitors
        self.cut = 0

    def clear(self):
        self.cut = max(self.cut, sum(monitor.outstanding for monitor in self.monitors))
        for monitor in self.monitors:
            monitor.outstanding = 0

    def burst_open(self):
        """A burst is open (address taken, its last R beat or its B response not)."""
        return any(monitor.outstanding for monitor in self.monitors)


async def idle_after_reset(tb, ports, cycles=32):
    """Check, for ``cycles`` cycles, that no AXI valid of ``ports`` (prefixes ``m_axi...``) is high."""
    names = [f"{port}__{channel}valid" for port in ports for channel in ("ar", "r", "aw", "w", "b")]
    for _ in range(cycles):
        high = [name for name in names if int(getattr(tb.dut, name).value)]
        assert not high, f"{', '.join(high)} high after the reset (cycle {tb.cycle}); {knobs.describe()}"
        await RisingEdge(tb.clock)


def corrupted_stream(rng, kind, size, chunk_size, value_format):
    """A stream with one kind of malformation; returns (words, sorted promise)."""
    promised_sorted = bool(rng.random() < 0.5) or kind == "unsorted"
    words, indices, values, counts = top_k_stream(rng, size, chunk_size, 0.08, value_format, promised_sorted)
    words = words.copy()
    headers = np.arange(len(counts)) + np.concatenate([[0], np.cumsum(counts)[:-1]])
    is_pair = np.ones(len(words), bool)
    is_pair[headers] = False
    pair_positions = np.flatnonzero(is_pair)
    picks = rng.choice(pair_positions, (len(pair_positions) + 3) // 4, replace=False)
    high = np.uint64(0xFFFFFFFF) << np.uint64(32)
    if kind == "out_of_range":
        bad = rng.integers(size, 1 << 32, len(picks), dtype=np.uint64)
        words[picks] = (words[picks] & high) | bad
    elif kind == "chunk_violation":
        words[picks] = (words[picks] & high) | rng.integers(0, size, len(picks)).astype(np.uint64)
    elif kind == "unsorted":
        for start, count in zip(headers + 1, counts, strict=True):
            rng.shuffle(words[start:start + count])
    elif kind == "excess":
        words = np.concatenate([words, rng.integers(0, 1 << 63, int(rng.integers(1, 20)), dtype=np.uint64)])
    elif kind == "truncated":
        words = words[:int(rng.integers(0, len(words) + 1))]
    elif kind == "header_count":
        for header in rng.choice(headers, min(len(headers), 3), replace=False):
            words[header] = np.uint64(max(0, int(words[header]) + int(rng.integers(-3, 4))))
    elif kind == "huge_header" and len(headers):
        words[rng.choice(headers)] = np.uint64(0xFFFFFFFF)
    elif kind == "duplicates":  # well formed: repeated indices accumulate in pair order
        low = np.uint64(0xFFFFFFFF)
        for start, count in zip(headers + 1, counts, strict=True):
            segment = words[start:start + count]
            if count > 1:
                copies = rng.integers(0, count, count)
                chosen = rng.random(count) < 0.5
                segment[chosen] = (segment[chosen] & high) | (segment[copies[chosen]] & low)
                if promised_sorted:  # stable: equal indices keep their pair order
                    words[start:start + count] = segment[np.argsort(segment & low, kind="stable")]
    elif kind == "empty_transfer":
        words = words[:0]
    elif kind == "random_words":  # small header counts among random in-range and out-of-range words
        n = int(rng.integers(1, 4 * chunk_count(size, chunk_size) + 8))
        words = rng.integers(0, 2 * size + 2, n, dtype=np.uint64) | (
            rng.integers(0, 1 << 16, n, dtype=np.uint64) << np.uint64(32))
        headers_here = rng.random(n) < 0.3
        words[headers_here] = rng.integers(0, 5, int(headers_here.sum()), dtype=np.uint64)
    return words, promised_sorted


def corrupted_transfers(rng, chunk_size, value_format, rounds):
    """``rounds`` times every malformation of :data:`CORRUPTIONS`, as ``(n, kind, size, words, sorted)``.

    One transfer in seven has a size of 0..2 elements; the others 1..6 chunks.
    """
    for n, kind in enumerate(CORRUPTIONS * rounds):
        size = random_size(rng, chunk_size, int(rng.integers(1, 7))) if n % 7 else int(rng.integers(0, 3))
        words, promised_sorted = corrupted_stream(rng, kind, size, chunk_size, value_format)
        yield n, kind, size, words, promised_sorted


def check_cleared(dut, what, *flags):
    """Right after a reset the error counters, the status bits and the one-bit outputs ``flags`` read 0."""
    errors = unpack(errors_layout(), int(dut.errors.value))
    values = {flag: int(getattr(dut, flag).value) for flag in flags}
    assert not any(errors.values()) and not dut.status.value and not any(values.values()), (
        f"{what}: counters {errors}, status {int(dut.status.value):#x}"
        + "".join(f", {flag} {value}" for flag, value in values.items())
        + f" after the reset; {knobs.describe()}")


def random_size(rng, chunk_size, chunks):
    return int(rng.integers((chunks - 1) * chunk_size + 1, chunks * chunk_size + 1))


def engine_params(lanes, banks, chunk_size, out_lanes, value_format="f32", **extra):
    """The parameters of a scatter engine build (``topk_scatter``, ``topk_chunk_decompressor``)."""
    return {"lanes": lanes, "banks": banks, "chunk_size": chunk_size, "out_lanes": out_lanes,
            "value_format": value_format, **extra}


def engine_id(params):
    """A runner's test id for :func:`engine_params`."""
    return "L{lanes}-B{banks}-S{chunk_size}-M{out_lanes}-{value_format}".format(**params)


def check_rejected(component, cases):
    """``component(**kwargs)`` raises a ``ValueError`` matching ``match`` for each ``(kwargs, match)``.

    The half-built components warn (``UnusedElaboratable``) once collected: the calling test
    filters that warning, and they are collected here, inside its filter.
    """
    for kwargs, match in cases:
        with pytest.raises(ValueError, match=match):
            component(**kwargs)
    gc.collect()
