"""The flow catches bugs: deliberately broken variants of two blocks fail their proofs.

The variants live here, not in ``rtl/``: a skid buffer that drops the transfer it should
park on a stall, and a burst planner that believes pages are 8 KB (so bursts cross 4 KB).
"""

from amaranth.hdl import Assume, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

import rtl.bus.axi_burst_planner
from scripts.formal.blocks import burst_planner_harness
from scripts.formal.flow import run_proof
from scripts.formal.harnesses import queue_harness, unit_sequence_harness
from scripts.formal.streams import stream_rules_harness


class DroppingSkidBuffer(wiring.Component):
    """The skid buffer of ``rtl/bus/skid_buffer.py`` without its skid register: a stall drops a token."""

    def __init__(self, *, width=4):
        super().__init__({"i": In(stream.Signature(width)), "o": Out(stream.Signature(width))})

    def elaborate(self, platform):
        m = Module()
        m.d.comb += self.i.ready.eq(1)
        with m.If(~self.o.valid | self.o.ready):
            m.d.sync += [self.o.payload.eq(self.i.payload), self.o.valid.eq(self.i.valid)]
        return m


def test_dropping_skid_buffer_fails_its_queue_proof(tmp_path):
    # Whichever property the solver trips first, the trace is a VCD and the property is named.
    result = run_proof(queue_harness(DroppingSkidBuffer(), capacity=2), folder=tmp_path, depth=8)
    assert result.status == "fail", result.describe()
    assert result.prop in ("the k-th unit out is the k-th unit in (none lost, duplicated or reordered)",
                           "occupancy never exceeds the depth", "i.ready is low while full",
                           "o.valid is high exactly while a transfer is held")
    assert result.trace is not None and result.trace.suffix == ".vcd" and result.trace.exists()


def test_dropping_skid_buffer_fails_the_tracked_token(tmp_path):
    # The token argument alone, without the occupancy properties, sees the lost transfer.
    result = run_proof(unit_sequence_harness(DroppingSkidBuffer(), unit=4), folder=tmp_path, depth=8)
    assert result.status == "fail", result.describe()
    assert result.prop == "the k-th unit out is the k-th unit in (none lost, duplicated or reordered)"


def test_dropping_skid_buffer_keeps_the_stream_rules(tmp_path):
    # The rules alone cannot see a lost token: the token proof is what catches it.
    result = run_proof(stream_rules_harness(DroppingSkidBuffer()), folder=tmp_path, depth=8)
    assert result.status == "pass", result.describe()


class CorruptingSkidBuffer(DroppingSkidBuffer):
    """A skid buffer whose output payload changes while stalled."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        flip = Signal()
        m.d.sync += flip.eq(~flip)
        with m.If(self.o.valid & ~self.o.ready):
            m.d.sync += self.o.payload.eq(self.o.payload ^ flip)
        return m


def test_unstable_payload_fails_the_stream_rules(tmp_path):
    result = run_proof(stream_rules_harness(CorruptingSkidBuffer()), folder=tmp_path, depth=8)
    assert result.status == "fail"
    assert result.prop == "o: payload stable while stalled"


def test_planner_with_8k_pages_fails_the_4k_rule(tmp_path, monkeypatch):
    monkeypatch.setattr(rtl.bus.axi_burst_planner, "PAGE_BYTES", 8192)
    harness = burst_planner_harness(address_width=14, data_width=256, max_burst=256, length_width=9)
    result = run_proof(harness, folder=tmp_path, depth=6)
    assert result.status == "fail", result.describe()
    assert result.prop == "no burst crosses a 4 KB boundary"


class NeverValid(wiring.Component):
    """A block whose output can never become valid: its stream rules hold, and check nothing."""

    def __init__(self, *, width=4):
        super().__init__({"i": In(stream.Signature(width)), "o": Out(stream.Signature(width))})

    def elaborate(self, platform):
        m = Module()
        m.d.comb += [self.i.ready.eq(1), self.o.payload.eq(self.i.payload)]
        return m


def test_output_that_never_becomes_valid_fails(tmp_path):
    # Its assertions hold (o.valid is always low), so without the cover task this "passed".
    result = run_proof(stream_rules_harness(NeverValid()), folder=tmp_path, depth=8)
    assert result.status == "fail", result.describe()
    assert result.prop is None and result.covers == {"o: valid & ~ready": None}
    line = result.describe()
    assert "\n" not in line and "o: valid & ~ready" in line and "never exercised" in line


def test_token_proof_of_an_output_that_never_becomes_valid_fails(tmp_path):
    # Nothing ever comes out, so the k-th-unit assertion never fires: the covers of the output's
    # stall and of a checked unit are what make this fail instead of passing vacuously.
    result = run_proof(unit_sequence_harness(NeverValid(), unit=4), folder=tmp_path, depth=8)
    assert result.status == "fail", result.describe()
    assert result.prop is None
    assert sorted(result.uncovered) == ["o: a unit out checked", "o: valid & ~ready"]


def test_environment_that_starves_the_output_fails(tmp_path):
    # A correct block under an over-constrained environment (no input ever offered) is vacuous too.
    def starve(m, dut):
        m.d.comb += Assume(~dut.i.valid, "no input ever")

    harness = stream_rules_harness(DroppingSkidBuffer(), environment=starve)
    result = run_proof(harness, folder=tmp_path, depth=8)
    assert result.status == "fail", result.describe()
    assert result.uncovered == ["o: valid & ~ready"]


def test_a_covered_stream_proof_names_the_first_stall(tmp_path):
    # The skid buffer's output can stall one cycle after the first input: step 1.
    result = run_proof(stream_rules_harness(DroppingSkidBuffer()), folder=tmp_path, depth=8)
    assert result.status == "pass", result.describe()
    assert result.covers == {"o: valid & ~ready": 1} and result.cover_depth == 7
