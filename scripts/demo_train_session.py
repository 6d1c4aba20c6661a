"""The RTL half of ``neartrain demo train``: a cocotb session on the updater kernel.

:func:`scripts.demo_train.run_demo` runs this module's ``session`` test through
:func:`scripts.sim.updater_device.run_session`; it trains every mode of the payload on the
simulated kernel, checking each step against ``golden.optim``.
"""

import cocotb
import numpy as np

from golden.optim.host import STATE_NAMES, reference_update
from scripts.demo_train import _GradientPipeline, _initial_states, _problem
from scripts.sim.updater_driver import close_session, open_session

__all__ = ["rtl_session"]


@cocotb.test()
async def session(dut):
    """Train the payload's modes on the kernel; hand the runs back to the host."""
    device, payload = await open_session(dut)
    close_session(device, await rtl_session(device, payload))


async def rtl_session(device, payload):
    """Train every mode of ``payload`` on the simulated kernel (inside the simulation).

    Returns a list (one entry per mode) of dicts: ``loss`` (before each step, then the final),
    ``params`` (float32 parameters after each step), ``cycles``, ``sent``, ``bit_exact``
    (new parameters, states and status equal golden.optim), ``clean`` (no error bit, guard
    bytes intact), ``accuracy`` (final).
    """
    kernel, hyper, steps = payload["kernel"], payload["hyper"], payload["steps"]
    model, x, y, initial = _problem(payload["seed"])
    runs = []
    for mode in payload["modes"]:
        param = initial.copy()
        states = _initial_states(kernel, model.size)
        pipeline = _GradientPipeline(mode, model.size)
        run = {"loss": [], "params": [], "cycles": [], "sent": [], "bit_exact": [], "clean": []}
        for step in range(1, steps + 1):
            loss, grad = model.loss_and_grad(param, x, y)
            dense, sent = pipeline(grad)
            step_hyper = dict(hyper, step=step)
            result = await device.update(param, dense, states, step_hyper)
            expected = reference_update(kernel, param=param.view(np.uint32), grad=dense.view(np.uint32),
                                        states={k: v.view(np.uint32) for k, v in states.items()},
                                        hyper=step_hyper)
            names = ("param",) + STATE_NAMES[kernel]
            same = all(np.array_equal(result.outputs[name], expected[name]) for name in names)
            run["bit_exact"].append(same and result.status == int(expected["nonfinite"]))
            run["clean"].append(result.error == 0 and result.guards_intact)
            # Training continues from the kernel's outputs, whatever the check said.
            param = result.outputs["param"].view(np.float32)
            states = {name: result.outputs[name].view(np.float32) for name in STATE_NAMES[kernel]}
            run["loss"].append(loss)
            run["params"].append(param.copy())
            run["cycles"].append(result.cycles)
            run["sent"].append(sent)
        run["loss"].append(model.loss(param, x, y))
        run["accuracy"] = model.accuracy(param, x, y)
        runs.append(run)
    return runs
