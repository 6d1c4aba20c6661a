"""Smart-Infinity on N simulated SmartSSDs: one training step's host flow and the devices' updates.

The flow of Smart-Infinity (HPCA 2024), Sections IV-A to IV-C, on a flat float32 parameter vector:

1. the vector is cut into ``devices`` even shards (:func:`golden.compress.even_shard_bounds`); shard
   ``d`` and its optimizer state live on SmartSSD ``d`` (its "SSD": :class:`SmartSSD`), the shard's owner;
2. on the "GPU" the dense gradient is checked for NaN/Inf (a step with any is skipped and counted, as
   a loss scaler does), its global L2 norm is taken for clipping (the clip factor becomes the kernel's
   ``grad_scale``), and with ``topk`` it is compressed by block-wise Top-K
   (:func:`golden.compress.topk_compress`, or :class:`golden.compress.ErrorFeedbackCompressor`);
3. each device's pairs (shard-relative, :func:`golden.compress.shard_pairs`) are encoded into the
   chunked wire stream (:func:`golden.compress.encode_stream`) and sent over the host link, or the
   dense gradient shard without compression;
4. each device loads its shard and state from its SSD into its FPGA memory (the P2P link), runs the
   fused ``topk_updater`` (or the dense ``<optimizer>_updater``) and writes them back; the updated
   parameters go back to the host.

``backend="golden"`` computes step 4 with the NumPy golden models
(:func:`golden.compress.scatter_stream`, :func:`golden.optim.host.reference_update`);
``backend="rtl"`` runs the Verilated kernel (:class:`RtlDevices`: one simulation serves every device
of every step), each device job on its own fresh device memory, and checks every output word of
every device against the golden models on the same inputs (``bit_exact``). Both backends give the
same bits: the golden results are what the rtl backend must return.

Use :class:`SmartSSDArray` from Python; :mod:`scripts.sim.devices.smartssd_torch` wraps it as a
``torch.optim.Optimizer``.
"""

import dataclasses

import numpy as np

from golden.compress import (
    ErrorFeedbackCompressor,
    encode_stream,
    even_shard_bounds,
    group_by_chunk,
    scatter_stream,
    shard_pairs,
    topk_compress,
)
from golden.optim import adagrad_init_state
from golden.optim.host import STATE_NAMES, reference_update
from golden.optim.scalars import OPTIMIZERS

__all__ = ["BACKENDS", "TOPK_KERNEL", "DENSE_KERNEL", "LINKS", "SmartSSD", "StepReport", "SmartSSDArray",
           "SESSIONS", "serve_session", "RtlDevices"]

BACKENDS = ("golden", "rtl")
# The fused kernel's configuration: the one its fast test builds (so a checkout that ran the tests
# has it cached). f16 pair values, as Smart-Infinity sends FP16 gradients; 32-element chunks.
TOPK_KERNEL = {"lanes": 2, "data_width": 128, "ports": "shared", "chunk_elements": 32, "value_format": "f16",
               "max_burst": 4, "max_outstanding": 2}
# The dense updater's configuration: the one ``neartrain demo train`` builds (512-bit port, 1 lane).
DENSE_KERNEL = {"lanes": 1, "chunk_elements": 1024}
# Links whose bytes a step reports, per device: the shared host interconnect both ways, and the card's
# internal P2P path between its SSD and its FPGA's memory both ways.
LINKS = ("host_to_device", "device_to_host", "ssd_to_fpga", "fpga_to_ssd")
_WORD_BYTES = 4


class SmartSSD:
    """One SmartSSD's storage: its parameter shard and optimizer state (float32 arrays), kept on its SSD."""

    def __init__(self, param, kernel, initial_accumulator_value=0.0):
        self.param = np.array(param, np.float32)
        if kernel == "adagrad":
            self.states = {"state_sum": adagrad_init_state(self.param.size, initial_accumulator_value)}
        else:  # Adam's moments start at 0; SGD's buffer is not read at step 1
            self.states = {name: np.zeros(self.param.size, np.float32) for name in STATE_NAMES[kernel]}

    def bits(self):
        """The shard and states as uint32 bits, as they are loaded into the FPGA's memory."""
        return self.param.view(np.uint32), {name: s.view(np.uint32) for name, s in self.states.items()}

    @property
    def stored_bytes(self):
        return self.param.nbytes + sum(s.nbytes for s in self.states.values())


@dataclasses.dataclass
class StepReport:
    """What one :meth:`SmartSSDArray.step` did.

    Attributes
    ----------
    step : int
        The optimizer step run (1-based), or 0 when skipped.
    nonfinite : int
        NaN and Inf elements of the gradient; any skips the step.
    grad_norm : float
        Global L2 norm of the (unclipped) gradient, in float64.
    grad_scale : float
        The factor the devices applied to the gradient (the clip factor, 1.0 without clipping).
    sent : list of int
        Gradient elements sent to each device (pairs with Top-K).
    bit_exact : list of bool or None
        Per device (rtl backend): every output word, the status and the error counters equal golden.
    cycles : list of int or None
        Per device (rtl backend): kernel cycles.
    links : dict of str to list of int
        Bytes per device on each of :data:`LINKS`, and (rtl backend) ``"fpga_dram"``: the kernel's
        measured AXI bytes.
    """

    step: int
    nonfinite: int
    grad_norm: float
    grad_scale: float
    sent: list
    bit_exact: list = None
    cycles: list = None
    links: dict = dataclasses.field(default_factory=dict)

    @property
    def skipped(self):
        return self.step == 0


class SmartSSDArray:
    """N SmartSSDs that own the even shards of a flat parameter vector, and the GPU side of each step.

    Parameters
    ----------
    param : numpy.ndarray
        The flat float32 parameters (copied).
    kernel : {"adam", "sgd", "adagrad"}
        The updater (Adam and AdamW are ``"adam"``, with ``hyper["decoupled"]``).
    hyper : dict
        The golden model's keywords without ``step``.
    devices : int
        Number of SmartSSDs, 1 to ``param.size``.
    topk : float or None
        Kept fraction of Top-K compression in (0, 1], or None for dense gradients.
    error_feedback : bool
        Carry what Top-K did not send into the next step's gradient.
    backend : {"golden", "rtl"}
    max_grad_norm : float or None
        Clip the gradient's global L2 norm to this (torch's ``clip_grad_norm_`` factor
        ``max_norm / (norm + 1e-6)``, applied by the kernel as ``grad_scale``).
    initial_accumulator_value : float
        AdaGrad's initial state.

    Raises
    ------
    ValueError
        Naming the bad argument.
    """

    def __init__(self, param, kernel, hyper, *, devices=1, topk=None, error_feedback=True, backend="golden",
                 max_grad_norm=None, initial_accumulator_value=0.0):
        param = np.asarray(param)
        if param.dtype != np.float32 or param.ndim != 1 or not param.size:
            raise ValueError(f"param must be a non-empty flat float32 array, not {param.dtype} {param.shape}")
        if kernel not in OPTIMIZERS:
            raise ValueError(f"kernel must be one of {', '.join(OPTIMIZERS)}, not {kernel!r}")
        if (isinstance(devices, bool) or not isinstance(devices, (int, np.integer))
                or not 1 <= devices <= param.size):
            raise ValueError(f"devices must be an integer in [1, {param.size}], not {devices!r}")
        if topk is not None and (isinstance(topk, bool) or not 0 < topk <= 1):
            raise ValueError(f"topk must be a kept fraction in (0, 1] or None, not {topk!r}")
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, not {backend!r}")
        if max_grad_norm is not None and not 0 < max_grad_norm < np.inf:
            raise ValueError(f"max_grad_norm must be positive and finite or None, not {max_grad_norm!r}")
        self.kernel, self.hyper, self.backend = kernel, dict(hyper), backend
        self.topk, self.max_grad_norm = topk, max_grad_norm
        self.bounds = even_shard_bounds(param.size, int(devices))
        self.devices = [SmartSSD(param[a:b], kernel, initial_accumulator_value)
                        for a, b in zip(self.bounds[:-1], self.bounds[1:], strict=True)]
        self.value_format = TOPK_KERNEL["value_format"]
        self.compressor = (ErrorFeedbackCompressor(param.size, ratio=topk, value_format=self.value_format)
                           if topk is not None and error_feedback else None)
        self.steps_done = 0
        self.skipped = 0
        self._rtl = None

    def close(self):
        """End the rtl backend's simulation (nothing to do for golden); raise what it raised."""
        if self._rtl is not None:
            rtl, self._rtl = self._rtl, None
            rtl.close()

    @property
    def param(self):
        """The flat float32 parameters, gathered from the devices."""
        return np.concatenate([device.param for device in self.devices])

    def _gradient_jobs(self, grad):
        """Per device: the gradient it receives (wire words or a dense shard) and the elements sent."""
        if self.topk is None:
            return [(grad[a:b], int(b - a)) for a, b in zip(self.bounds[:-1], self.bounds[1:], strict=True)]
        if self.compressor is not None:
            indices, values = self.compressor.compress(grad)
        else:
            indices, values = topk_compress(grad, ratio=self.topk, value_format=self.value_format)
        jobs = []
        shards = shard_pairs(indices, values, shard_bounds=self.bounds)
        for device, (local, local_values) in zip(self.devices, shards, strict=True):
            local, local_values, counts = group_by_chunk(local, local_values, size=device.param.size,
                                                         chunk_size=TOPK_KERNEL["chunk_elements"],
                                                         sort_within_chunk=True)
            words = encode_stream(local, local_values, value_format=self.value_format, counts=counts)
            jobs.append((words, int(local.size)))
        return jobs

    def _golden(self, device, gradient, hyper):
        """Expected raw outputs of ``device``'s update on ``gradient`` (and the scatter's error counters)."""
        param, states = device.bits()
        errors = None
        if self.topk is not None:
            dense, errors = scatter_stream(gradient, device.param.size, value_format=self.value_format,
                                           chunk_size=TOPK_KERNEL["chunk_elements"], sorted_within_chunk=True)
        else:
            dense = gradient
        expected = reference_update(self.kernel, param=param, grad=dense.view(np.uint32), states=states,
                                    hyper=hyper)
        return expected, errors

    def step(self, grad):
        """Run one training step's update with ``grad`` (the flat gradient); returns a :class:`StepReport`.

        Raises
        ------
        ValueError
            If ``grad`` does not match the parameters.
        scripts.sim.runner.SimulationError
            (rtl backend) If the simulation failed.
        """
        grad = np.asarray(grad)
        if grad.dtype != np.float32 or grad.shape != (int(self.bounds[-1]),):
            raise ValueError(f"grad must be a flat float32 array of {self.bounds[-1]} elements, "
                             f"not {grad.dtype} {grad.shape}")
        nonfinite = int(np.count_nonzero(~np.isfinite(grad)))
        norm = float(np.sqrt(np.sum(np.square(grad, dtype=np.float64)))) if not nonfinite else float("nan")
        if nonfinite:  # the loss scaler's rule: no update, no step, nothing sent
            self.skipped += 1
            return StepReport(step=0, nonfinite=nonfinite, grad_norm=norm, grad_scale=0.0,
                              sent=[0] * len(self.devices),
                              links={link: [0] * len(self.devices) for link in LINKS})
        scale = 1.0
        if self.max_grad_norm is not None:
            scale = float(np.float32(min(1.0, self.max_grad_norm / (norm + 1e-6))))
        hyper = dict(self.hyper, step=self.steps_done + 1, grad_scale=scale)
        jobs = self._gradient_jobs(grad)
        golden = [self._golden(device, gradient, hyper) for device, (gradient, _) in zip(self.devices, jobs,
                                                                                         strict=True)]
        report = StepReport(step=self.steps_done + 1, nonfinite=0, grad_norm=norm, grad_scale=scale,
                            sent=[sent for _, sent in jobs])
        report.links = {
            "host_to_device": [int(gradient.nbytes) for gradient, _ in jobs],
            "device_to_host": [device.param.nbytes for device in self.devices],
            "ssd_to_fpga": [device.stored_bytes for device in self.devices],
            "fpga_to_ssd": [device.stored_bytes for device in self.devices],
        }
        if self.backend == "rtl":
            if self._rtl is None:
                self._rtl = RtlDevices(self.kernel, topk=self.topk is not None)
            results = self._rtl.run([dict(zip(("param", "states"), device.bits(), strict=True),
                                          gradient=gradient, hyper=hyper)
                                     for device, (gradient, _) in zip(self.devices, jobs, strict=True)])
            outputs = [result.outputs for result in results]
            report.bit_exact = [_matches(self.kernel, result, expected, errors)
                                for result, (expected, errors) in zip(results, golden, strict=True)]
            report.cycles = [result.cycles for result in results]
            beat = (TOPK_KERNEL if self.topk is not None else {"data_width": 512})["data_width"] // 8
            report.links["fpga_dram"] = [(r.read_beats + r.write_beats) * beat for r in results]
        else:
            outputs = [expected for expected, _ in golden]
        for device, output in zip(self.devices, outputs, strict=True):
            # Training goes on from what the devices returned, whatever the check said.
            device.param = output["param"].view(np.float32).copy()
            device.states = {name: output[name].view(np.float32).copy() for name in STATE_NAMES[self.kernel]}
        self.steps_done += 1
        return report


def _matches(kernel, result, expected, errors):
    """The kernel's run equals golden: every output word, the status, no error, guards intact."""
    names = ("param",) + STATE_NAMES[kernel]
    same = all(np.array_equal(result.outputs[name], expected[name]) for name in names)
    clean = result.error == 0 and result.guards_intact and result.status == int(expected["nonfinite"])
    if errors is not None:
        clean &= result.errors == {name: getattr(errors, name) for name in result.errors}
    return bool(same and clean)


# -------------------------------------------------------------------- the rtl devices
def _own_memory(device):
    """Give ``device`` (an UpdaterDevice) a fresh, empty device memory on every port."""
    from cocotbext.axi.sparse_memory import SparseMemory

    from scripts.sim.devices.updater import MEMORY_SIZE

    device.memory = SparseMemory(MEMORY_SIZE)
    for ram in device.rams.values():
        ram.mem = ram.read_if.mem = ram.write_if.mem = device.memory
    device._next_free = 0


async def serve_session(dut, job):
    """Serve steps until the host hangs up: each request is a list of device jobs, one per SmartSSD
    (``{"param", "states", "gradient", "hyper"}``), answered with one :class:`DeviceResult` each.

    The simulation listens at ``job["address"]`` (a Unix socket, ``job["authkey"]``) so that one
    simulation, built and started once, serves every step of a training run. With ``job["topk"]``
    each gradient is the chunked wire stream for ``topk_updater``, else a dense float32 shard for
    ``<optimizer>_updater``. Every device job gets its own fresh device memory; the kernel keeps
    nothing between runs but its registers, which every run rewrites. Returns the requests served.
    """
    from multiprocessing.connection import Listener

    from scripts.sim import knobs
    from scripts.sim.devices.topk import TopKUpdaterDevice
    from scripts.sim.devices.updater import UpdaterDevice
    from scripts.sim.runner import component_from_env
    from scripts.sim.tb import ClockedTB

    tb = ClockedTB(dut)
    cls = TopKUpdaterDevice if job["topk"] else UpdaterDevice
    device = cls(dut, component_from_env(), tb.clock, rng=knobs.rng(5))
    await tb.reset()
    served = 0
    with Listener(job["address"], family="AF_UNIX", authkey=job["authkey"]) as listener, \
            listener.accept() as connection:  # the simulator waits here (no simulated time passes)
        while True:
            try:
                jobs = connection.recv()
            except EOFError:
                break
            if jobs is None:
                break
            results = []
            for one in jobs:
                _own_memory(device)
                if job["topk"]:
                    results.append(await device.step(one["param"], one["gradient"], one["states"],
                                                     one["hyper"], promised_sorted=True))
                else:
                    results.append(await device.update(one["param"], one["gradient"], one["states"],
                                                       one["hyper"]))
            assert not device.violations, device.violations[:5]
            connection.send(results)
            served += 1
    return served


SESSIONS = {"serve": serve_session}


class RtlDevices:
    """One simulation of the fused ``topk_updater`` (``topk``) or the dense ``<kernel>_updater`` that
    runs every device job of every step (:func:`serve_session`), started in a background thread.

    :func:`scripts.sim.runner.run_cocotb` sets ``os.environ`` for the simulation while it runs (a
    superset of the caller's: the venv's ``bin`` first on PATH and the channel's variables).
    """

    def __init__(self, kernel, *, topk):
        import secrets
        import tempfile
        import threading

        from scripts.sim.devices import run_session

        self._folder = tempfile.TemporaryDirectory(prefix="smartssd-")
        self._address = f"{self._folder.name}/socket"
        self._authkey = secrets.token_bytes(16)
        job = {"address": self._address, "authkey": self._authkey, "topk": topk}
        block, params = (("topk_updater", {"optimizer": kernel, **TOPK_KERNEL}) if topk
                         else (f"{kernel}_updater", DENSE_KERNEL))
        self._outcome = {}

        def simulate():
            try:
                self._outcome["served"] = run_session(block, "smartssd.serve", job, params=params)
            except BaseException as error:  # handed to the caller's thread by _failure
                self._outcome["error"] = error

        self._thread = threading.Thread(target=simulate, name="smartssd-simulation", daemon=True)
        self._thread.start()
        self._connection = None

    def _failure(self):
        self._thread.join()
        error = self._outcome.get("error")
        if error is not None:
            raise error
        raise RuntimeError("the SmartSSD simulation ended before the host hung up")

    def _connect(self):
        import time
        from multiprocessing.connection import Client

        while self._connection is None:  # the first run builds the model: minutes
            if not self._thread.is_alive():
                self._failure()
            try:
                self._connection = Client(self._address, family="AF_UNIX", authkey=self._authkey)
            except (FileNotFoundError, ConnectionRefusedError):
                time.sleep(0.2)
        return self._connection

    def run(self, jobs):
        """One step of every device (``jobs``: ``{"param", "states", "gradient", "hyper"}``)."""
        connection = self._connect()
        try:
            connection.send(jobs)
            return connection.recv()
        except (EOFError, OSError):
            self._failure()

    def close(self):
        """Hang up and wait for the simulation to end; raise what it raised."""
        if self._connection is None and not self._thread.is_alive():
            return
        try:
            self._connect().send(None)
            self._connection.close()
        except OSError:  # the simulation already ended: its outcome says why
            pass
        self._thread.join()
        self._folder.cleanup()
        if "error" in self._outcome:
            raise self._outcome["error"]
