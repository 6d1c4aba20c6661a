"""The small NumPy model that ``neartrain demo train`` trains: an MLP classifier on spiral data.

Not a golden model: it only produces the gradients that the optimizer (the RTL updater or
the software one) consumes. Everything is deterministic from a seed and computed in the
dtype of the parameter vector (float32 for training, float64 for the gradient check).

The parameters live in one flat vector, the layout the updater kernel sees: for each layer
``W`` (``fan_in x fan_out``, C order) then ``b``. Layers are ``tanh`` except the last,
which feeds a softmax cross-entropy loss averaged over the batch (the whole data set:
full-batch training, so a loss curve is a property of the optimizer alone).
"""

import numpy as np

__all__ = ["DEFAULT_SIZES", "spiral", "MLP"]

DEFAULT_SIZES = (2, 32, 32, 3)


def spiral(*, classes=3, points_per_class=100, noise=0.2, seed=0):
    """The classic interleaved-spirals data set.

    Parameters
    ----------
    classes, points_per_class : int
        Number of arms and points per arm.
    noise : float
        Standard deviation of the angular noise.
    seed : int

    Returns
    -------
    x : numpy.ndarray
        float32 ``(classes * points_per_class, 2)`` inputs, in [-1, 1].
    y : numpy.ndarray
        int64 labels in ``[0, classes)``.
    """
    rng = np.random.default_rng([seed, 101])
    radius = np.tile(np.linspace(0.0, 1.0, points_per_class), classes)
    labels = np.repeat(np.arange(classes), points_per_class)
    angle = (labels * 4.0 + radius * 4.0 + rng.normal(0.0, noise, radius.size))
    x = np.stack([radius * np.sin(angle), radius * np.cos(angle)], axis=1)
    return x.astype(np.float32), labels.astype(np.int64)


class MLP:
    """A fully connected ``tanh`` network with a softmax cross-entropy head, on a flat parameter vector.

    Parameters
    ----------
    sizes : tuple of int
        Layer widths, input first, classes last (at least two entries).
    """

    def __init__(self, sizes=DEFAULT_SIZES):
        if len(sizes) < 2 or any(int(s) < 1 for s in sizes):
            raise ValueError(f"sizes must be at least two positive widths, not {sizes!r}")
        self.sizes = tuple(int(s) for s in sizes)
        self.shapes = []
        for fan_in, fan_out in zip(self.sizes[:-1], self.sizes[1:], strict=True):
            self.shapes += [(fan_in, fan_out), (fan_out,)]
        self.size = sum(int(np.prod(shape)) for shape in self.shapes)

    def init(self, seed=0, dtype=np.float32):
        """torch.nn.Linear's default initialisation: ``U(-1/sqrt(fan_in), 1/sqrt(fan_in))`` for W and b."""
        rng = np.random.default_rng([seed, 202])
        parts = []
        for shape in self.shapes:
            fan_in = self.sizes[len(parts) // 2]
            bound = 1.0 / np.sqrt(fan_in)
            parts.append(rng.uniform(-bound, bound, int(np.prod(shape))))
        return np.concatenate(parts).astype(dtype)

    def unflatten(self, flat):
        """Views of ``flat`` as ``[W1, b1, W2, b2, ...]``."""
        if flat.shape != (self.size,):
            raise ValueError(f"expected a flat vector of {self.size} parameters, not shape {flat.shape}")
        views, start = [], 0
        for shape in self.shapes:
            count = int(np.prod(shape))
            views.append(flat[start:start + count].reshape(shape))
            start += count
        return views

    def _forward(self, flat, x):
        weights = self.unflatten(flat)
        activations = [x.astype(flat.dtype)]
        for layer in range(len(self.sizes) - 1):
            z = activations[-1] @ weights[2 * layer] + weights[2 * layer + 1]
            activations.append(z if layer == len(self.sizes) - 2 else np.tanh(z))
        return weights, activations

    @staticmethod
    def _softmax(logits):
        shifted = logits - logits.max(axis=1, keepdims=True)
        e = np.exp(shifted)
        return shifted, e / e.sum(axis=1, keepdims=True)

    def loss(self, flat, x, y):
        """Mean cross-entropy (a Python float)."""
        _, activations = self._forward(flat, x)
        shifted, _ = self._softmax(activations[-1])
        log_norm = np.log(np.exp(shifted).sum(axis=1))
        return float(np.mean(log_norm - shifted[np.arange(len(y)), y]))

    def accuracy(self, flat, x, y):
        _, activations = self._forward(flat, x)
        return float(np.mean(activations[-1].argmax(axis=1) == y))

    def loss_and_grad(self, flat, x, y):
        """Mean cross-entropy and its gradient (a flat vector of ``flat``'s dtype), by backpropagation."""
        weights, activations = self._forward(flat, x)
        shifted, probabilities = self._softmax(activations[-1])
        rows = np.arange(len(y))
        log_norm = np.log(np.exp(shifted).sum(axis=1))
        loss = float(np.mean(log_norm - shifted[rows, y]))
        delta = probabilities
        delta[rows, y] -= 1
        delta /= len(y)
        grads = [None] * len(weights)
        for layer in reversed(range(len(self.sizes) - 1)):
            grads[2 * layer] = activations[layer].T @ delta
            grads[2 * layer + 1] = delta.sum(axis=0)
            if layer:
                # d tanh(z) / dz = 1 - tanh(z)^2, and activations[layer] is tanh(z) of that layer.
                delta = (delta @ weights[2 * layer].T) * (1 - activations[layer] ** 2)
        grad = np.concatenate([g.ravel() for g in grads]).astype(flat.dtype)
        return loss, grad
