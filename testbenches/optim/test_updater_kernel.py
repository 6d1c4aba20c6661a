"""The updater kernels (``adam_updater``, ``sgd_updater``, ``adagrad_updater``): cocotb tests (collected
by cocotb) and their pytest runners (at the bottom).

The kernel runs with cocotbext-axi's ``AxiRam`` as device memory on every AXI4 port (pause
generators on every channel in the stalled variants) and ``AxiLiteMaster`` as the host,
through :class:`scripts.sim.devices.updater.UpdaterDevice`. Checked against
``golden.optim`` (via ``golden.optim.host``), on raw bits:

* update mode: random tensors, hyper-parameters, element counts (not multiples of the
  lanes or the beat, several chunks), gradient and copy formats; every output word, the
  16-bit copy, the untouched bytes after every output tensor, the non-finite status and
  a clean error register; every AXI burst obeys the AXI rules;
* statistics mode: NaN and Inf counts and the exact 586-bit sum of squares, and no writes;
* non-finite status: a clean gradient gives 0, one Inf among them gives 1;
* bus errors: SLVERR or DECERR on a read or a write sets the error register and the run
  still ends (with a done interrupt), and the next run is clean;
* reset in the middle of a run (of the kernel and of its memory and host models, as AXI
  requires) while bursts are open: the bus goes idle and the next run equals golden.

The fast suite covers both port modes and all three lanes-to-beats conversions (split,
equal, gather), and lane counts that are not powers of two (3 and 6: the gearbox and a 1:3
converter), on a 64-bit bus with small chunks, and one run of 10**5 Adam elements under random
stalls on every AXI channel on a 4-lane, 512-bit kernel with the DSP-frugal product options;
the 512-bit, 16-lane configurations and the million-element runs (also stalled) are slow.
"""

import cocotb
import numpy as np
import pytest
from cocotbext.axi.constants import AxiResp

from golden.optim.host import GRAD_FORMAT_CODES, STATE_NAMES, reference_statistics, reference_update
from golden.optim.registers import ERROR_READ, ERROR_WRITE
from golden.optim.vectors import VARIANTS, f32_tensor, gradient_tensor, random_hyper
from rtl.optim.updater_kernel import AdamUpdater
from scripts.sim import knobs
from scripts.sim.devices import updater as updater_device
from scripts.sim.devices.updater import UpdaterDevice
from scripts.sim.runner import component_from_env, run_cocotb
from scripts.sim.tb import ClockedTB

MODULE = __name__
DEFAULT_VECTORS = 8  # chunks' worth of elements per run, at most


class TB(ClockedTB):
    def __init__(self, dut, stall=0.0):
        super().__init__(dut)
        self.component = component_from_env()
        self.params = self.component.parameters
        self.optimizer = self.component.optimizer
        self.states = STATE_NAMES[self.optimizer]
        self.device = UpdaterDevice(dut, self.component, self.clock, stall=stall, rng=knobs.rng(17))

    def random_inputs(self, rng, n, grad_format, specials=0.05):
        tensors = {"param": f32_tensor(rng, n, specials=specials),
                   "grad": gradient_tensor(rng, n, grad_format, specials=specials)}
        states = {name: f32_tensor(rng, n, scale=1e-3, positive=name != "exp_avg", specials=specials)
                  for name in self.states}
        return tensors, states

    async def check_update(self, rng, n, *, grad_format, copy_format, hyper=None, specials=0.05, label="",
                           variant=None):
        hyper = hyper or random_hyper(rng, self.optimizer, variant)
        tensors, states = self.random_inputs(rng, n, grad_format, specials)
        result = await self.device.update(tensors["param"], tensors["grad"], states, hyper,
                                          grad_format=grad_format, copy_format=copy_format)
        expected = reference_update(self.optimizer, param=tensors["param"], grad=tensors["grad"],
                                    states=states, hyper=hyper, grad_format=grad_format,
                                    copy_format=copy_format)
        where = (f"{self.optimizer} kernel {self.params} {label} n={n} grad={grad_format} copy={copy_format} "
                 f"hyper={hyper}; {knobs.describe(DEFAULT_VECTORS)}")
        names = ["param", *self.states] + ([] if copy_format == "none" else ["param16"])
        result.assert_outputs_equal(expected, names, where)
        assert result.guards_intact, f"bytes after an output tensor were overwritten; {where}"
        assert result.status == int(expected["nonfinite"]), f"status {result.status}; {where}"
        assert result.error == 0, f"error register {result.error:#x}; {where}"
        assert not self.device.violations, f"{self.device.violations[:3]}; {where}"
        return result


def element_counts(rng, params, runs):
    """Counts that are not multiples of the lanes or the beat and span up to a few chunks."""
    chunk = params["chunk_elements"]
    most = max(2, knobs.vectors(DEFAULT_VECTORS, limit=64) * chunk)  # chunks per run, for every run
    counts = [int(rng.integers(1, most)) for _ in range(runs - 1)]
    return counts + [chunk + params["lanes"] + 1]  # one chunk and a partial lane vector


@cocotb.test()
@cocotb.parametrize(stall=[0.0, 0.3])
async def update_matches_golden(dut, stall):
    """Random runs; every output bit, the guards, the status and the AXI rules."""
    tb = TB(dut, stall)
    await tb.reset()
    rng = knobs.rng(int(stall * 10))
    # Variants 0-5 over the two stall patterns: every control decision of the model, and
    # every gradient format and copy format at least once each.
    first = 3 if stall else 0
    for run, n in enumerate(element_counts(rng, tb.params, 3)):
        variant = first + run
        await tb.check_update(rng, n, grad_format=GRAD_FORMAT_CODES[variant % 3],
                              copy_format=("none", "f16", "bf16")[(variant + variant // 3) % 3],
                              label=f"run {run}", variant=variant)


@cocotb.test()
async def statistics_mode_matches_golden(dut):
    """Statistics mode in every gradient format: counts and the exact accumulator; nothing written."""
    tb = TB(dut, 0.2)
    await tb.reset()
    rng = knobs.rng(31)
    for grad_format in GRAD_FORMAT_CODES:
        n = int(rng.integers(1, 2 * tb.params["chunk_elements"]))
        grad = gradient_tensor(rng, n, grad_format, specials=0.2)
        result = await tb.device.statistics(grad, grad_format=grad_format)
        expected = reference_statistics(grad, grad_format)
        got = (result.nan_count, result.inf_count, result.accumulator)
        want = (expected.nan_count, expected.inf_count, expected.accumulator)
        assert got == want, (f"statistics {grad_format} n={n}: {[hex(v) for v in got]} != golden "
                             f"{[hex(v) for v in want]}; {knobs.describe(DEFAULT_VECTORS)}")
        assert result.write_beats == 0 and result.error == 0, (result.write_beats, result.error)


@cocotb.test()
async def nonfinite_status(dut):
    """Clean gradient: status 0; the same with one Inf (f32) or one NaN (bf16): status 1."""
    tb = TB(dut)
    await tb.reset()
    rng = knobs.rng(41)
    n = tb.params["lanes"] * 5 + 3
    hyper = random_hyper(rng, tb.optimizer)
    clean = await tb.check_update(rng, n, grad_format="f32", copy_format="none", hyper=hyper, specials=0.0)
    assert clean.status == 0
    tensors, states = tb.random_inputs(rng, n, "f32", specials=0.0)
    for grad_format, poison in (("f32", 0x7F80_0000), ("bf16", 0x7FC1)):
        grad = gradient_tensor(rng, n, grad_format, specials=0.0)
        grad[int(rng.integers(n))] = poison
        result = await tb.device.update(tensors["param"], grad, states, hyper, grad_format=grad_format)
        assert result.status == 1, f"{grad_format} gradient with a non-finite element: status {result.status}"


@cocotb.test()
async def bus_errors_end_cleanly(dut):
    """SLVERR/DECERR on a read and on a write: error bits and codes set, done raised, next run clean."""
    tb = TB(dut, 0.2)
    await tb.reset()
    rng = knobs.rng(51)
    n = 2 * tb.params["chunk_elements"] + 5
    hyper = random_hyper(rng, tb.optimizer)
    cases = [("grad", AxiResp.SLVERR, ERROR_READ, 8), ("param", AxiResp.DECERR, ERROR_READ, 8),
             ("param16", AxiResp.SLVERR, ERROR_WRITE, 10)]
    for tensor, resp, bit, shift in cases:
        tensors, states = tb.random_inputs(rng, n, "f32")
        beats = max(1, n * (2 if tensor == "param16" else 4) // (tb.params["data_width"] // 8))
        # A write fault on the first beat leaves most of the run's write commands taken by the
        # writer and then discarded: the next run must not trip over their leftovers.
        first = 0 if bit == ERROR_WRITE else int(rng.integers(0, beats))
        result = await tb.device.update(tensors["param"], tensors["grad"], states, hyper, copy_format="f16",
                                        faults={tensor: (resp, first, 1)})
        assert result.error & bit, f"fault on {tensor}: error register {result.error:#x}"
        code = (result.error >> shift) & 3
        assert code == int(resp), f"fault on {tensor}: error register {result.error:#x}"
        assert not tb.device.violations, tb.device.violations[:3]
        await tb.check_update(rng, int(rng.integers(1, n)), grad_format="f32", copy_format="bf16",
                              label=f"after a {tensor} fault")


@cocotb.test()
async def reset_mid_run(dut):
    """Reset while bursts are open, in update and statistics runs; the next runs equal golden.

    The reset is the kernel's and its memory's and host's (``dut.rst``), as AXI requires; it
    rises at a random cycle at which a read burst is open (an update run and a statistics run)
    or a write burst with W beats on the bus (an update run), under pauses on every AXI
    channel. Then (``UpdaterDevice.reset_during_run``) no AXI valid may rise, nor the
    interrupt, until the next start, and the kernel must report idle within a bound. The
    next run of the same mode must equal golden (update: every output word, guards, status,
    error register, and ``read_beats``/``write_beats`` equal to the beats the monitors saw,
    so no burst of the cut run came back; statistics: the exact sums, which start from the
    buckets the cut run had filled), within its cycle bound.
    """
    tb = TB(dut, 0.3)
    await tb.reset()
    rng = knobs.rng(71)
    chunk = tb.params["chunk_elements"]
    device = tb.device
    # An update run cut in its reads, a statistics run (its buckets then hold partial sums),
    # an update run cut in the W data of a write burst.
    rounds = [("update", device.read_burst_open, (1, 40)), ("statistics", device.read_burst_open, (1, 40)),
              ("update", device.write_burst_open, (1, 150))]
    for round_, (mode, until, after) in enumerate(rounds):
        n = 8 * chunk + tb.params["lanes"] + 1
        tensors, states = tb.random_inputs(rng, n, "f32", specials=0.1)
        if mode == "update":
            cut = device.update(tensors["param"], tensors["grad"], states, random_hyper(rng, tb.optimizer),
                                copy_format="f16")
        else:
            cut = device.statistics(tensors["grad"])
        await device.reset_during_run(tb, rng, cut, after=after, until=until)
        label = f"round {round_}: {mode} run after a reset"
        marks = [len(monitor.bursts) for monitor in tb.device.monitors]
        if mode == "update":
            variant = int(rng.integers(0, 6))
            result = await tb.check_update(rng, int(rng.integers(1, n)), label=label, variant=variant,
                                           grad_format=GRAD_FORMAT_CODES[variant % 3],
                                           copy_format=("none", "f16", "bf16")[variant // 3 % 3])
        else:
            grad = gradient_tensor(rng, int(rng.integers(1, n)), "f32", specials=0.2)
            result = await tb.device.statistics(grad)
            expected = reference_statistics(grad, "f32")
            got = (result.nan_count, result.inf_count, result.accumulator)
            want = (expected.nan_count, expected.inf_count, expected.accumulator)
            assert got == want, (f"{label}: {[hex(v) for v in got]} != golden {[hex(v) for v in want]}; "
                                 f"{knobs.describe(DEFAULT_VECTORS)}")
        seen = tb.device.beats_since(marks)
        counted = {"read": result.read_beats, "write": result.write_beats}
        assert counted == seen, f"{label}: beat counters {counted}, monitors {seen}; {knobs.describe()}"
        assert not tb.device.violations, f"{label}: {tb.device.violations[:3]}; {knobs.describe()}"


# ---- pytest runners ----

SMALL = {"data_width": 64, "chunk_elements": 16, "max_burst": 4, "max_outstanding": 2}
CASES = [
    ("sgd", {"lanes": 2, "ports": "shared", **SMALL}),
    # Separate ports at a power of two: the 6-lane case below covers separate ports (make test-full).
    pytest.param("adagrad", {"lanes": 4, "ports": "separate", **SMALL}, marks=pytest.mark.slow),
    # Lane counts that are not powers of two: 3 lanes against 2- and 4-word beats (gearboxes
    # both ways); 6 lanes against 2-word beats (a 1:3 converter) and 4-half-word beats (a gearbox).
    ("sgd", {"lanes": 3, "ports": "shared", **SMALL, "chunk_elements": 24}),
    # make test-full only since CI ran over its 45 minutes (171 s of a core in a cold run).
    pytest.param("adagrad", {"lanes": 6, "ports": "separate", **SMALL, "chunk_elements": 24},
                 marks=pytest.mark.slow),
    pytest.param("adam", {"lanes": 1, "ports": "shared", **SMALL}, marks=pytest.mark.slow),
    pytest.param("adam", {"lanes": 16, "ports": "shared"}, marks=pytest.mark.slow),
    # Read and write phases for one-bus DRAM (docs/optim.md, On the SmartSSD's DDR4): every test
    # of the kernel (stalls, statistics, errors, resets) with the phase gates on the port.
    pytest.param("adam", {"lanes": 2, "ports": "shared", **SMALL, "rw_phases": True}, marks=pytest.mark.slow),
    pytest.param("adam", {"lanes": 4, "ports": "separate", "data_width": 512, "chunk_elements": 64},
                 marks=pytest.mark.slow),
]


def _id(value):
    return value if isinstance(value, str) else "-".join(f"{k}={v}" for k, v in value.items())


@pytest.mark.parametrize("optimizer,params", CASES, ids=_id)
def test_updater_kernel(optimizer, params):
    run_cocotb(f"{optimizer}_updater", MODULE, params=params)


# Pause probabilities of the memory model on every AXI channel (AR, R, AW, W, B), by variant.
STALLS = (0.1, 0.3, 0.5)
# The fast suite's stalled run: 4 lanes fill the shared 512-bit port (a quarter of the 1-lane
# kernel's cycles for the same elements), with the DSP-frugal product options of `make sweep`.
FAST_STALLED = {"lanes": 4, "dsp_tile": 24, "lut_bits": 7}


def _check_many_elements(optimizer, total, **kernel_params):
    """``total`` elements through the kernel in one simulation, under random stalls, bit-exact.

    One step per control variant of ``VARIANTS[optimizer]``, cycling through the gradient
    formats (f32, f16, bf16), the copy formats (none, f16, bf16) and the pause
    probabilities :data:`STALLS` of every AXI channel; 10 % of every tensor is IEEE specials
    and another 10 % random encodings, and each length is not a multiple of the chunk or
    the beat.
    """
    rng = knobs.rng(61)
    variants = len(VARIANTS[optimizer])
    formats = ("f32", "f16", "bf16")
    copies = ("bf16", "none", "f16")
    jobs, expected = [], []
    for variant in range(variants):
        n = -(-total // variants) + (variant % 3)
        hyper = random_hyper(rng, optimizer, variant)
        grad_format, copy_format = formats[variant % 3], copies[(variant // 3 + variant) % 3]
        param, grad = f32_tensor(rng, n), gradient_tensor(rng, n, grad_format)
        states = {name: f32_tensor(rng, n, scale=1e-3, positive=name != "exp_avg")
                  for name in STATE_NAMES[optimizer]}
        jobs.append({"kind": "update", "param": param, "grad": grad, "states": states, "hyper": hyper,
                     "grad_format": grad_format, "copy_format": copy_format,
                     "stall": STALLS[(variant // 2) % len(STALLS)]})
        expected.append(reference_update(optimizer, param=param, grad=grad, states=states, hyper=hyper,
                                         grad_format=grad_format, copy_format=copy_format))
    results = updater_device.run_jobs(optimizer, jobs, **kernel_params)
    checked = 0
    for variant, (job, result, reference) in enumerate(zip(jobs, results, expected, strict=True)):
        where = (f"variant {variant} ({job['grad_format']} gradient, {job['copy_format']} copy, "
                 f"stall {job['stall']})")
        for name in ("param", *STATE_NAMES[optimizer]):
            differ = np.flatnonzero(result.outputs[name] != reference[name])
            assert differ.size == 0, (f"{name}, {where}: {differ.size} of {len(job['param'])} elements "
                                      f"differ, first at {differ[:1]}; {knobs.describe(total)}")
        if job["copy_format"] == "none":
            assert result.outputs["param16"] is None, f"{where}; {knobs.describe(total)}"
        else:
            assert np.array_equal(result.outputs["param16"], reference["param16"]), \
                f"param16, {where}; {knobs.describe(total)}"
        assert result.status == int(reference["nonfinite"]) and result.error == 0, \
            f"{where}; {knobs.describe(total)}"
        assert result.guards_intact, f"{where}; {knobs.describe(total)}"
        checked += len(job["param"])
    assert checked >= total


@pytest.mark.slow
@pytest.mark.parametrize("optimizer", ["adam", "sgd", "adagrad"])
def test_million_elements(optimizer):
    """At least 10**6 elements per optimizer through the kernel under random stalls, bit-exact.

    The registry's kernel (1 lane, one shared 512-bit port, 1024-element chunks, the
    configuration ``make run`` checks), with every AXI channel paused at random
    (:func:`_check_many_elements`). The element count is ``NEARTRAIN_VECTORS`` (default
    10**6) split over the variants.
    """
    _check_many_elements(optimizer, knobs.vectors(1_000_000))


def test_stalled_elements():
    """The fast suite's long stalled run: 10**4 Adam elements (``NEARTRAIN_VECTORS``) under
    random stalls on every AXI channel, on FAST_STALLED's kernel (see :func:`_check_many_elements`);
    the million-element runs of every optimizer are under ``slow``."""
    # 10**4 since CI ran over its 45 minutes (3 * 10**4 was 195 s of a core in a cold run).
    _check_many_elements("adam", knobs.vectors(10_000), **FAST_STALLED)


@pytest.mark.parametrize("option,value", [("dsp_tile", 4), ("dsp_tile", 65), ("lut_bits", -1),
                                          ("lut_bits", 25)])
def test_product_options_are_validated(option, value):
    """A product option out of range names itself (the core and its units take the same values)."""
    with pytest.raises(ValueError, match=option):
        AdamUpdater(**{option: value})
