"""The fused Top-K updater kernel ``topk_updater`` (:mod:`rtl.compress.topk_updater`): cocotb
tests (collected by cocotb) and their pytest runners (at the bottom).

The kernel runs with cocotbext-axi's ``AxiRam`` as device memory on every AXI4 port, the pair port
``m_axi_pairs`` included (pauses on every channel in the stalled variants), and ``AxiLiteMaster``
as the host, through :class:`scripts.sim.devices.topk.TopKUpdaterDevice`. Each run is one
optimizer step whose gradient is a chunked Top-K wire stream in device memory. Expected results
chain the golden models: :func:`golden.compress.scatter_stream` rebuilds the dense f32 gradient and
the error counters, :func:`golden.optim.host.reference_update` applies the step. Checked on raw
bits: every parameter, state and 16-bit copy word, the bytes after every output (guards), the
non-finite status, the five error counters and their sticky bits, the error register, the AXI rules
of every burst, and the traffic: every read burst lies in the parameter, a state or the pair
stream, every write burst in the parameter, a state or the copy, the pair stream is read exactly
once, and the ``read_beats``/``write_beats`` registers equal the beats the monitors saw.

The fast suite runs a 2-lane Adam kernel on a 128-bit bus with 32-element chunks and f16 pair
values; ``-m slow`` adds a 4-lane SGD kernel with separate ports, a 256-bit bus and f32 values,
and the traffic measurement: one Adam step on 16384 elements at 0.1 %, 1 % and 10 % on the
512-bit kernel, against the dense ``adam_updater`` of the same configuration.
"""


import cocotb
import numpy as np
import pytest
from cocotbext.axi.constants import AxiResp

from golden.compress import encode_stream, group_by_chunk, scatter_stream, topk_compress
from golden.compress.registers import ERROR_NAMES, ERROR_PAIRS_READ, ERROR_PAIRS_RESP_SHIFT
from golden.optim.host import COPY_FORMAT_CODES, STATE_NAMES, reference_statistics, reference_update
from golden.optim.registers import ERROR_READ
from golden.optim.vectors import f32_tensor, random_hyper
from scripts.sim import channel, knobs
from scripts.sim.devices.topk import TopKUpdaterDevice
from scripts.sim.runner import component_from_env, run_cocotb
from scripts.sim.tb import ClockedTB
from testbenches.compress.tb import check_rejected, corrupted_stream, random_size, top_k_stream

MODULE = __name__
DEFAULT_RUNS = 8
RATIOS = (0.001, 0.01, 0.1)
CORRUPTIONS = ("out_of_range", "truncated", "excess", "unsorted", "empty_transfer")
TRAFFIC_COPY = "f16"  # the traffic runs write a 2-byte parameter copy, as Smart-Infinity does


def topk_words(rng, n, chunk, ratio, value_format, promised_sorted):
    """A well-formed chunked stream from :func:`golden.compress.topk_compress` of a random gradient.

    Unsorted streams keep a random pair order inside each chunk (``sorted`` must then be 0).
    """
    grad = (rng.standard_normal(n) * np.exp2(rng.integers(-6, 3, n))).astype(np.float32)
    indices, values = topk_compress(grad, ratio=ratio, block=chunk, value_format=value_format)
    if not promised_sorted:
        order = rng.permutation(len(indices))
        indices, values = indices[order], values[order]
    indices, values, counts = group_by_chunk(indices, values, size=n, chunk_size=chunk,
                                             sort_within_chunk=promised_sorted)
    return encode_stream(indices, values, value_format=value_format, counts=counts)


class TB(ClockedTB):
    def __init__(self, dut, stall=0.0, salt=0):
        super().__init__(dut)
        self.component = component_from_env()
        self.params = self.component.parameters
        self.optimizer = self.component.optimizer
        self.states = STATE_NAMES[self.optimizer]
        self.chunk = self.params["chunk_elements"]
        self.value_format = self.params["value_format"]
        self.wire_lanes = self.params["data_width"] // 64
        self.device = TopKUpdaterDevice(dut, self.component, self.clock, stall=stall,
                                        rng=knobs.rng(17 + salt))

    def random_state(self, rng, n):
        param = f32_tensor(rng, n, specials=0.02)
        states = {name: f32_tensor(rng, n, scale=1e-3, positive=name != "exp_avg", specials=0.02)
                  for name in self.states}
        return param, states

    def check_traffic(self, result, words, where, *, mode=0):
        """Reads only in param/states/pairs, writes only in param/states/param16, counters = monitors."""
        reads, writes = result.traffic["read"], result.traffic["write"]
        readable = {"pairs"} | ({"param", *self.states} if mode == 0 else set())
        writable = {"param", "param16", *self.states} if mode == 0 else set()
        assert set(reads) <= readable, f"reads outside {sorted(readable)}: {reads}; {where}"
        assert set(writes) <= writable, f"writes outside {sorted(writable)}: {writes}; {where}"
        stream_beats = -(-len(words) // self.wire_lanes)
        assert reads.get("pairs", 0) == stream_beats, \
            f"{reads.get('pairs', 0)} pair-stream beats read for a {stream_beats}-beat stream; {where}"
        assert result.read_beats == sum(reads.values()), f"read_beats {result.read_beats} != {reads}; {where}"
        assert result.write_beats == sum(writes.values()), \
            f"write_beats {result.write_beats} != {writes}; {where}"
        assert not self.device.violations, f"{self.device.violations[:3]}; {where}"

    async def check_step(self, rng, n, words, promised_sorted, *, variant, label, copy_format=None):
        hyper = random_hyper(rng, self.optimizer, variant)
        copy_format = copy_format or COPY_FORMAT_CODES[(variant + variant // 3) % 3]
        param, states = self.random_state(rng, n)
        dense, errors = scatter_stream(words, n, value_format=self.value_format, chunk_size=self.chunk,
                                       sorted_within_chunk=promised_sorted)
        expected = reference_update(self.optimizer, param=param, grad=dense.view(np.uint32), states=states,
                                    hyper=hyper, grad_format="f32", copy_format=copy_format)
        result = await self.device.step(param, words, states, hyper, promised_sorted=promised_sorted,
                                        copy_format=copy_format)
        where = (f"topk_updater {self.optimizer} {self.params} {label} n={n} words={len(words)} "
                 f"sorted={promised_sorted} copy={copy_format} hyper={hyper}; {knobs.describe(DEFAULT_RUNS)}")
        names = ["param", *self.states] + ([] if copy_format == "none" else ["param16"])
        result.assert_outputs_equal(expected, names, where)
        wanted = {name: getattr(errors, name) for name in ERROR_NAMES}
        assert result.errors == wanted, f"error counters {result.errors}, golden {wanted}; {where}"
        assert result.pairs_status == int(errors.status), f"pairs_status {result.pairs_status:#x}; {where}"
        assert result.guards_intact, f"bytes after an output tensor were overwritten; {where}"
        assert result.status == int(expected["nonfinite"]), f"run_status {result.status}; {where}"
        assert result.error == 0, f"error register {result.error:#x}; {where}"
        self.check_traffic(result, words, where)
        return result

    async def check_statistics(self, rng, n, ratio, label):
        """A statistics step of ``n`` elements at Top-K ``ratio``: exact counts and sums, no writes."""
        # Values with every corner class (NaN, Inf, subnormals) so that the counts are not zero.
        words, *_ = top_k_stream(rng, n, self.chunk, ratio, self.value_format, True)
        dense, _ = scatter_stream(words, n, value_format=self.value_format, chunk_size=self.chunk,
                                  sorted_within_chunk=True)
        param, states = self.random_state(rng, n)
        result = await self.device.step(param, words, states, random_hyper(rng, self.optimizer),
                                        promised_sorted=True, mode=1)
        expected = reference_statistics(dense.view(np.uint32), "f32")
        got = (result.nan_count, result.inf_count, result.accumulator)
        want = (expected.nan_count, expected.inf_count, expected.accumulator)
        where = f"{label} n={n}; {knobs.describe()}"
        assert got == want, f"{[hex(v) for v in got]} != golden {[hex(v) for v in want]}; {where}"
        assert result.outputs["param"].tobytes() == param.tobytes(), f"param changed; {where}"
        assert result.error == 0, f"error {result.error:#x}; {where}"
        self.check_traffic(result, words, where, mode=1)


def stream_for(rng, run, n, tb):
    """Run ``run`` of a sequence: well-formed Top-K streams and corrupted ones, alternately."""
    if run % 2 == 0:
        ratio = RATIOS[run // 2 % len(RATIOS)]
        promised_sorted = run // 2 % 2 == 0
        words = topk_words(rng, n, tb.chunk, ratio, tb.value_format, promised_sorted)
        return words, promised_sorted, {"run": run, "ratio": ratio}
    kind = CORRUPTIONS[run // 2 % len(CORRUPTIONS)]
    words, promised_sorted = corrupted_stream(rng, kind, n, tb.chunk, tb.value_format)
    return words, promised_sorted, {"run": run, "kind": kind}


@cocotb.test()
@cocotb.parametrize(stall=[0.0, 0.3])
async def steps_match_golden(dut, stall):
    """Well-formed (0.1 %, 1 %, 10 %, sorted and not) and malformed streams: every bit, counter, burst."""
    salt = int(stall * 10)
    tb = TB(dut, stall, salt)
    await tb.reset()
    rng = knobs.rng(60 + salt)
    runs = knobs.vectors(DEFAULT_RUNS, limit=80)
    # Both stall patterns together see every corruption and both sorted promises at every ratio.
    for run in range(runs):
        n = random_size(rng, tb.chunk, int(rng.integers(1, 5)))
        words, promised_sorted, label = stream_for(rng, run + (runs if stall else 0), n, tb)
        await tb.check_step(rng, n, words, promised_sorted, variant=run + 4 * salt, label=label)


@cocotb.test()
async def statistics_of_the_decompressed_gradient(dut):
    """Statistics mode: NaN/Inf counts and the exact sum of squares of the scattered gradient; no writes."""
    tb = TB(dut, 0.2, 5)
    await tb.reset()
    rng = knobs.rng(71)
    for ratio in (0.1, 0.5):
        await tb.check_statistics(rng, random_size(rng, tb.chunk, 3), ratio, f"statistics ratio={ratio}")


@cocotb.test()
async def bus_errors_end_cleanly(dut):
    """SLVERR on the pair stream, DECERR on the parameter: error bits and codes, done, next run clean."""
    tb = TB(dut, 0.2, 7)
    await tb.reset()
    rng = knobs.rng(81)
    n = 2 * tb.chunk + 5
    cases = [("pairs", AxiResp.SLVERR, ERROR_PAIRS_READ, ERROR_PAIRS_RESP_SHIFT),
             ("param", AxiResp.DECERR, ERROR_READ, 8)]
    for run, (buffer, resp, bit, shift) in enumerate(cases):
        words = topk_words(rng, n, tb.chunk, 0.1, tb.value_format, True)
        param, states = tb.random_state(rng, n)
        beat_bytes = tb.params["data_width"] // 8
        beats = -(-len(words) // tb.wire_lanes) if buffer == "pairs" else n * 4 // beat_bytes
        result = await tb.device.step(param, words, states, random_hyper(rng, tb.optimizer),
                                      promised_sorted=True, copy_format="f16",
                                      faults={buffer: (resp, int(rng.integers(0, beats)), 1)})
        where = f"fault on {buffer}: error register {result.error:#x}; {knobs.describe()}"
        assert result.error & bit and (result.error >> shift) & 3 == int(resp), where
        other = ERROR_READ if buffer == "pairs" else ERROR_PAIRS_READ
        assert not result.error & other, where
        assert not tb.device.violations, f"{tb.device.violations[:3]}; {where}"
        clean = random_size(rng, tb.chunk, 2)
        await tb.check_step(rng, clean, topk_words(rng, clean, tb.chunk, 0.01, tb.value_format, False), False,
                            variant=run, label={"after": buffer})


@cocotb.test(skip=not channel.has_job())
async def traffic(dut):
    """One Adam step on 16384 elements at each ratio the caller passes as the job: the bytes each
    buffer moved (the reply)."""
    tb = TB(dut)
    await tb.reset()
    rng = knobs.rng(91)
    n, results = 16384, []
    for ratio in channel.job():
        words = topk_words(rng, n, tb.chunk, ratio, tb.value_format, True)
        result = await tb.check_step(rng, n, words, True, variant=0, label={"ratio": ratio},
                                     copy_format=TRAFFIC_COPY)
        results.append({"ratio": ratio, "n": n, "words": len(words), "cycles": result.cycles,
                        "read_beats": result.read_beats, "write_beats": result.write_beats,
                        "beat_bytes": tb.params["data_width"] // 8, "traffic": result.traffic})
        dut._log.info("traffic: %s", results[-1])
    channel.reply(results)


@cocotb.test()
async def reset_mid_run(dut):
    """Reset while bursts are open, in an update and a statistics step; the next steps equal golden.

    The reset is the kernel's and its memory's and host's (``dut.rst``), as AXI requires; it
    rises at a random cycle at which a read burst is open, the pair port's included (an update
    and a statistics step), or a write burst with W beats on the bus (an update step), under
    pauses on every AXI channel. Then
    (``UpdaterDevice.reset_during_run``) no AXI valid may rise, nor the interrupt, until the next
    start, and the kernel must report idle within a bound. The next step must equal golden:
    update (``TB.check_step``) every output word and counter, the traffic (the pair stream read
    exactly once, ``read_beats``/``write_beats`` equal to the monitors', so no burst of the cut
    step came back); statistics the exact sums of the scattered gradient (its buckets held the
    cut step's partial sums), no writes; within the device's cycle bound.
    """
    tb = TB(dut, 0.3, 11)
    await tb.reset()
    rng = knobs.rng(101)
    device = tb.device
    # An update step cut in its reads, a statistics step (its buckets then hold partial sums),
    # an update step cut in the W data of a write burst.
    rounds = [(0, device.read_burst_open, (1, 40)), (1, device.read_burst_open, (1, 40)),
              (0, device.write_burst_open, (1, 150))]
    for round_, (mode, until, after) in enumerate(rounds):
        # Dense enough that a statistics step, which reads the pair stream only, lasts.
        n = random_size(rng, tb.chunk, 8)
        words = topk_words(rng, n, tb.chunk, 0.5, tb.value_format, True)
        param, states = tb.random_state(rng, n)
        cut = device.step(param, words, states, random_hyper(rng, tb.optimizer), promised_sorted=True,
                          copy_format="f16", mode=mode)
        await device.reset_during_run(tb, rng, cut, after=after, until=until)
        n = random_size(rng, tb.chunk, int(rng.integers(1, 4)))
        label = {"round": round_, "mode": mode, "after": "reset"}
        if mode == 0:
            words, promised_sorted, _ = stream_for(rng, round_, n, tb)
            await tb.check_step(rng, n, words, promised_sorted, variant=round_, label=label)
        else:
            await tb.check_statistics(rng, n, 0.5, f"statistics {label}")


# ---- pytest runners ----

FAST = {"optimizer": "adam", "lanes": 2, "data_width": 128, "ports": "shared", "chunk_elements": 32,
        "value_format": "f16", "max_burst": 4, "max_outstanding": 2}
CASES = [
    FAST,
    pytest.param({"optimizer": "sgd", "lanes": 4, "data_width": 256, "ports": "separate",
                  "chunk_elements": 64, "value_format": "f32", "max_burst": 8, "max_outstanding": 3},
                 marks=pytest.mark.slow),
]
# The paper's 512-bit bundle, one lane (traffic does not depend on the lanes), 1024-element chunks.
TRAFFIC = {"lanes": 1, "data_width": 512, "chunk_elements": 1024}


def _id(params):
    return "{optimizer}-L{lanes}-W{data_width}-{ports}-S{chunk_elements}-{value_format}".format(**params)


@pytest.mark.parametrize("params", CASES, ids=_id)
@pytest.mark.parametrize("testcase", ["steps_match_golden", "statistics_of_the_decompressed_gradient",
                                      "bus_errors_end_cleanly"])
def test_topk_updater(params, testcase):
    run_cocotb("topk_updater", MODULE, params=params, testcase=testcase)


@pytest.mark.parametrize("params", CASES, ids=_id)
def test_topk_updater_reset(params):
    """Reset in the middle of update and statistics steps, with bursts open (``reset_mid_run``)."""
    run_cocotb("topk_updater", MODULE, params=params, testcase="reset_mid_run")


def measure_traffic():
    """Measured bytes per parameter of one Adam step, fused against dense; returns the table rows."""
    from golden.optim.host import STATE_NAMES
    from golden.optim.vectors import f32_tensor, gradient_tensor, random_hyper
    from scripts.sim.devices import updater as device

    fused = run_cocotb("topk_updater", MODULE, params={"optimizer": "adam", **TRAFFIC}, testcase="traffic",
                       job=(0.001, 0.01, 0.1)).reply
    rng = knobs.rng(92)
    n = fused[0]["n"]
    jobs = []
    for grad_format in ("f32", "f16"):
        jobs.append({"kind": "update", "param": f32_tensor(rng, n),
                     "grad": gradient_tensor(rng, n, grad_format),
                     "states": {name: f32_tensor(rng, n, scale=1e-3, positive=name != "exp_avg")
                                for name in STATE_NAMES["adam"]},
                     "hyper": random_hyper(rng, "adam", 0), "grad_format": grad_format, "copy_format": "f16"})
    dense = device.run_jobs("adam", jobs, **TRAFFIC)
    beat = TRAFFIC["data_width"] // 8
    rows = []
    for job, result in zip(jobs, dense, strict=True):
        grad_beats = -(-n * (4 if job["grad_format"] == "f32" else 2) // beat)
        rows.append({"kernel": f"adam_updater (dense, {job['grad_format']} gradient)", "ratio": None, "n": n,
                     "read_bytes": result.read_beats * beat, "write_bytes": result.write_beats * beat,
                     "gradient_bytes": grad_beats * beat, "cycles": result.cycles})
    for run in fused:
        reads, writes = run["traffic"]["read"], run["traffic"]["write"]
        rows.append({"kernel": "topk_updater (fused)", "ratio": run["ratio"], "n": n,
                     "read_bytes": run["read_beats"] * beat, "write_bytes": run["write_beats"] * beat,
                     "gradient_bytes": (reads.get("stray", 0) + writes.get("stray", 0)) * beat,
                     "pair_bytes": reads.get("pairs", 0) * beat, "words": run["words"],
                     "cycles": run["cycles"]})
    return rows


@pytest.mark.slow
def test_traffic_against_dense():
    """Fused: 0 dense-gradient bytes; param/state/copy bytes exactly the dense kernel's."""
    rows = measure_traffic()
    dense, fused = rows[0], rows[2:]
    state_read = dense["read_bytes"] - dense["gradient_bytes"]
    for row in fused:
        assert row["gradient_bytes"] == 0, row
        assert row["read_bytes"] - row["pair_bytes"] == state_read, (row, dense)
        assert row["write_bytes"] == dense["write_bytes"], (row, dense)
    for row in rows:
        print(row["kernel"], row["ratio"], {k: (round(v / row["n"], 4) if k.endswith("bytes") else v)
                                            for k, v in row.items() if k not in ("kernel", "ratio")})


@pytest.mark.filterwarnings("ignore::amaranth.hdl._ir.UnusedElaboratable")
def test_parameters_are_validated():
    from rtl.compress.topk_updater import TopKUpdaterKernel

    check_rejected(TopKUpdaterKernel, [
        ({"lanes": 32}, "lanes"),
        ({"data_width": 512, "chunk_elements": 16}, "chunk_elements"),  # 16 banks need chunks of 32
        ({"data_width": 64, "chunk_elements": 48}, "chunk_elements must be a power of two"),
        ({"value_format": "bf16"}, "value_format"),
        ({"data_width": 96}, "data_width"),
    ])


def test_register_map_extends_the_dense_kernel():
    """Every dense register but the gradient's, in the same order, plus the pair stream's."""
    from rtl.compress.topk_updater import TopKUpdaterKernel
    from rtl.optim.updater_kernel import UpdaterKernel

    kernels = [UpdaterKernel(optimizer="sgd", data_width=64, chunk_elements=16),
               TopKUpdaterKernel(optimizer="sgd", data_width=64, chunk_elements=16)]
    for kernel in kernels:
        kernel._MustUse__silence = True
    dense, fused = ([entry["name"] for entry in k.register_map()] for k in kernels)
    kept = [name for name in dense if name not in ("grad_address", "grad_format")]
    assert [name for name in fused if name in dense] == kept
    extra = {"pairs_address", "pairs_words", "sorted", "pairs_status", "out_of_range", "chunk_violation",
             "unsorted", "excess_pairs", "missing"}
    assert set(fused) - set(dense) == extra
    assert np.all([entry["width"] == 40 for entry in kernels[1].register_map() if entry["name"] == "missing"])
    assert "m_axi_pairs" in kernels[1].signature.members and "m_axi_grad" not in kernels[1].signature.members
