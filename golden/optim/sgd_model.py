"""Bit-exact model of the SGD (momentum, dampening, Nesterov, weight decay) updater.

It follows torch's ``_single_tensor_sgd`` (torch 2.13, ``foreach=False``, ``maximize=False``)
operation for operation. The scalars ``k[...]`` come from :func:`golden.optim.step_scalars`
``("sgd", ...)``; each line is one binary32 round-to-nearest-even operation and ``fma`` is a
fused multiply-add with one rounding (torch's fused ``add(alpha=)`` kernel)::

    g = grad * k.grad_scale                          # unscale (exact when grad_scale == 1)
    if k.weight_decay != 0:                          # grad.add(param, alpha=wd)
        g = fma(param, k.weight_decay, g)
    if k.momentum != 0:
        if step == 1:                                # torch: buf = clone(grad)
            buf = g
        else:                                        # buf.mul_(momentum).add_(g, alpha=1 - dampening)
            b = momentum_buffer * k.momentum
            buf = fma(g, k.one_minus_dampening, b)
        if nesterov:                                 # g.add(buf, alpha=momentum)
            g = fma(buf, k.momentum, g)
        else:
            g = buf
    p = fma(g, k.neg_lr, param)                      # param.add_(g, alpha=-lr)

At step 1 the buffer input is ignored (the RTL selects ``g`` instead of the multiply-add;
it must not compute ``0 * buf + g``, which would turn -0 into +0 and a stale NaN into the
output). With ``momentum == 0`` no buffer is read or written and the input buffer is
returned unchanged. Outputs have NaNs replaced by the canonical quiet NaN 0x7FC00000.
"""

from . import _float32 as binary32
from .scalars import step_scalars

__all__ = ["sgd"]


@binary32.ieee_quiet
def sgd(param, grad, momentum_buffer, *, step, lr, momentum, dampening, weight_decay, nesterov,
        grad_scale=1.0):
    """One SGD step with torch semantics, bit-exact.

    The operation order is the one in the module docstring.

    Parameters
    ----------
    param, grad : numpy.ndarray
        float32 arrays of one shape; not modified.
    momentum_buffer : numpy.ndarray or None
        float32 momentum buffer of the same shape, or None. Ignored at step 1 and when
        ``momentum == 0``; required otherwise.
    step : int
        1-based step number, >= 1 (step 1 initialises the buffer to the gradient).
    lr : float
        Learning rate, >= 0.
    momentum : float
        >= 0; 0 disables the buffer.
    dampening : float
        Finite; the buffer adds ``(1 - dampening) * g``.
    weight_decay : float
        L2 coefficient, >= 0.
    nesterov : bool
        Nesterov momentum; needs ``momentum > 0`` and ``dampening == 0``.
    grad_scale : float, optional
        Multiplier applied to the gradient first (``1 / combined_scale``), in (0, inf).

    Returns
    -------
    tuple
        New ``(param, momentum_buffer)``: float32 arrays, except that with ``momentum == 0``
        the buffer is a copy of the input buffer (or None if None was given).

    Raises
    ------
    ValueError
        If an array is not float32, the shapes differ, the buffer is missing after step 1
        with momentum, or a hyper-parameter is out of range.
    """
    param, grad = binary32.checked_arrays(param=param, grad=grad)
    k = step_scalars("sgd", step=step, lr=lr, momentum=momentum, dampening=dampening,
                     weight_decay=weight_decay, nesterov=nesterov, grad_scale=grad_scale)
    uses_buffer = k["momentum"] != 0 and step > 1
    if uses_buffer and momentum_buffer is None:
        raise ValueError("momentum_buffer must be a float32 array after step 1 when momentum > 0, not None")
    if momentum_buffer is not None:
        binary32.checked_arrays(param=param, momentum_buffer=momentum_buffer)
    g = grad * k["grad_scale"]
    if k["weight_decay"] != 0:
        g = binary32.fma(param, k["weight_decay"], g)
    if k["momentum"] == 0:
        buf = None if momentum_buffer is None else momentum_buffer.copy()
    else:
        if uses_buffer:
            b = momentum_buffer * k["momentum"]
            buf = binary32.fma(g, k["one_minus_dampening"], b)
        else:
            buf = g.copy()
        g = binary32.fma(buf, k["momentum"], g) if nesterov else buf
        buf = binary32.canonical_nan(buf)
    p = binary32.fma(g, k["neg_lr"], param)
    return binary32.canonical_nan(p), buf
