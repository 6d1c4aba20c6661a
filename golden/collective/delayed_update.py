"""One step of delayed-update training in the global control unit: reduce, then Adam, in place.

The dissertation's GCU (Section 7.3.3) updates the parameters with the reduced gradient while
the leaves already compute the next iteration's gradients on the previous parameters (delayed
parameter update), and then broadcasts the new parameters on request.

Order of operations, per binary32 element of a partition line (round to nearest even):

1. ``s`` = the leaves' gradients summed in leaf-id order, exactly as
   :func:`golden.collective.reduce_leaf_order` (``g[0] + (-0.0)``, then ``+ g[1]``, ...);
2. one step of :func:`golden.optim.adam` (Adam, or AdamW with ``decoupled``) on ``s`` with
   ``grad_scale = 1 / leaves`` rounded to binary32: the optimizer's own first operation,
   ``g = s * grad_scale``, turns the sum into the mean gradient, so that the step is the one
   ``torch.optim.Adam`` takes on the mean of the leaves' gradients.

The parameters and both moments are stored as lines of 14 words, like the gradients.
"""

import numpy as np

from ..optim import adam
from .reduction import reduce_leaf_order

__all__ = ["delayed_update_step", "mean_scale"]


def mean_scale(leaves):
    """``grad_scale`` that turns a sum of ``leaves`` gradients into their mean (binary32 ``1 / leaves``)."""
    return float(np.float32(1.0) / np.float32(leaves))


def delayed_update_step(gradients, param, exp_avg, exp_avg_sq, *, step, lr, betas, eps, weight_decay,
                        decoupled=False):
    """The GCU's step: returns ``(param, exp_avg, exp_avg_sq)`` after one update, as raw uint32 bits.

    Parameters
    ----------
    gradients : numpy.ndarray
        uint32 bits, shape ``(leaves, ...)``: every leaf's gradient of the same elements.
    param, exp_avg, exp_avg_sq : numpy.ndarray
        uint32 bits of the stored state, of the shape of one leaf's gradient.
    step, lr, betas, eps, weight_decay, decoupled
        As :func:`golden.optim.adam` (``grad_scale`` is ``1 / leaves``).
    """
    gradients = np.asarray(gradients, np.uint32)
    total = reduce_leaf_order(gradients).view(np.float32)

    def f32(bits):
        return np.ascontiguousarray(bits, np.uint32).view(np.float32)

    new = adam(f32(param), total, f32(exp_avg), f32(exp_avg_sq), step=step, lr=lr, betas=betas, eps=eps,
               weight_decay=weight_decay, decoupled=decoupled, grad_scale=mean_scale(len(gradients)))
    return tuple(np.asarray(value, np.float32).view(np.uint32) for value in new)
