"""Python device API of the updater kernel: run optimizer steps of the Verilated RTL on NumPy arrays.

The kernel (``adam_updater``, ``sgd_updater`` or ``adagrad_updater``) is simulated by
Verilator under cocotb, with cocotbext-axi's ``AxiRam`` as device memory on every AXI4
port (all ports see one address space) and ``AxiLiteMaster`` as the host. The host side
does what a driver would: copy the tensors into device memory, write the registers
(addresses, ``n``, the host scalars of :func:`golden.optim.step_scalars`, formats), start
the kernel, wait for its interrupt, and read back the tensors and the status registers.

From Python (pytest, scripts) use :func:`run_jobs`, or :func:`update` and
:func:`statistics` for a single step; each call builds (or reuses) the simulation and
returns NumPy arrays (:func:`run_session` instead runs a coroutine of the caller's own,
for loops that alternate host work and kernel runs, such as ``neartrain demo train``)::

    from scripts.sim import updater_device as device
    result = device.update("adam", param, grad, {"exp_avg": m, "exp_avg_sq": v},
                           hyper=dict(step=1, lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                                      weight_decay=0.0), lanes=2, copy_format="bf16")
    result.outputs["param"], result.outputs["param16"], result.cycles, result.status

Arrays are raw bits: ``uint32`` for binary32 tensors, ``uint16`` for 16-bit gradients and
the parameter copy (``np.float32`` arrays may be passed and are viewed as bits). Inside a
cocotb test, :class:`UpdaterDevice` (:mod:`scripts.sim.updater_driver`, re-exported here with
:class:`DeviceResult`, :func:`open_session` and :func:`close_session`) offers the same
operations as coroutines.
"""

from scripts.sim.updater_driver import (
    ADDRESS_BASE,
    GUARD_BYTE,
    GUARD_BYTES,
    MEMORY_SIZE,
    DeviceResult,
    UpdaterDevice,
    close_session,
    open_session,
)

__all__ = ["DeviceResult", "UpdaterDevice", "run_jobs", "run_session", "open_session", "close_session",
           "update", "statistics", "MEMORY_SIZE",
           "ADDRESS_BASE", "GUARD_BYTES", "GUARD_BYTE"]


# -------------------------------------------------------------------- synchronous API
def run_jobs(optimizer, jobs, **kernel_params):
    """Run ``jobs`` on the ``<optimizer>_updater`` kernel in one simulation; returns their results.

    Parameters
    ----------
    optimizer : {"adam", "sgd", "adagrad"}
    jobs : list of dict
        ``{"kind": "update", "param", "grad", "states": {name: array}, "hyper": {...},
        "grad_format", "copy_format", "stall"}`` or ``{"kind": "statistics", "grad",
        "grad_format", "stall"}``; ``hyper`` holds the golden model's keywords with
        ``step``; ``stall`` is the pause probability on every AXI channel.
    **kernel_params
        Kernel parameters (``lanes``, ``data_width``, ``ports``, ``chunk_elements``, ...).

    Returns
    -------
    list of DeviceResult
    """
    from scripts.sim.runner import run_cocotb

    return run_cocotb(f"{optimizer}_updater", "scripts.sim.updater_job", params=kernel_params,
                      testcase="run_jobs", job=jobs).reply


def run_session(optimizer, module, payload, **kernel_params):
    """Run the cocotb test ``session`` of ``module`` on the ``<optimizer>_updater`` kernel.

    For work that must alternate host computation and kernel runs (a training loop: the
    next gradient depends on the parameters the kernel just wrote), which :func:`run_jobs`
    cannot express because its jobs are fixed in advance. The module's ``session`` test
    calls :func:`open_session` for the device and ``payload``, and :func:`close_session`
    with its result. It shares :func:`run_jobs`'s Verilator build.

    Parameters
    ----------
    optimizer : {"adam", "sgd", "adagrad"}
    module : str
        The dotted name of the cocotb module holding the ``session`` test.
    payload : object
        Any picklable argument.
    **kernel_params
        Kernel parameters, as for :func:`run_jobs`.

    Returns
    -------
    object
        What the session passed to :func:`close_session` (pickled back from the simulation).

    Raises
    ------
    scripts.sim.runner.SimulationError
        If the session raises, or the AXI burst monitors saw a protocol violation.
    """
    from scripts.sim.runner import run_cocotb

    return run_cocotb(f"{optimizer}_updater", module, params=kernel_params, testcase="session",
                      job=payload).reply


def update(optimizer, param, grad, states, hyper, *, grad_format="f32", copy_format="none", stall=0.0,
           **kernel_params):
    """One update step on the simulated kernel; returns a :class:`DeviceResult`."""
    job = {"kind": "update", "param": param, "grad": grad, "states": states, "hyper": hyper,
           "grad_format": grad_format, "copy_format": copy_format, "stall": stall}
    return run_jobs(optimizer, [job], **kernel_params)[0]


def statistics(optimizer, grad, *, grad_format="f32", stall=0.0, **kernel_params):
    """Statistics mode on the simulated kernel; returns a :class:`DeviceResult`."""
    job = {"kind": "statistics", "grad": grad, "grad_format": grad_format, "stall": stall}
    return run_jobs(optimizer, [job], **kernel_params)[0]
