"""Device-DRAM traffic per parameter and step of the update, with and without Top-K decompression.

Smart-Infinity's Table I counts system-interconnect traffic per step with Adam, in bytes for ``M``
parameters: the gradient offload drops from ``2M`` (float16 gradients) with SmartUpdate to
``c% x 2M`` with SmartComp, where ``c`` is the size of the index-value pairs relative to the dense
gradient (:func:`compressed_fraction`; the paper's default ``c = 2 %`` is a 1 % selection with
indices as wide as values). The optimizer states no longer cross the interconnect at all: they move
between the SmartSSD's flash and its FPGA's DRAM. This module counts what the near-data kernel then
moves through that DRAM, i.e. the beats its AXI masters issue; the flash <-> DRAM P2P copies are left
out because they do not depend on how the gradient is decompressed.

Modes
-----
``"dense"``
    No compression: the updater reads a dense gradient plus the optimizer traffic.
``"zero_fill_scatter"``
    The paper's decompressor (Section V-B): zero-fill the dense gradient buffer, read the pairs and
    scatter them into it, then let the updater read it back plus the optimizer traffic. targets.md
    quotes this at about 36 bytes or more with 28 bytes of state: that is this mode with
    ``param_copy_bytes=4`` (4 zero-fill + 4 read-back + 28 state, plus the scatter's own bytes).
``"fused"``
    The pairs stream (chunked wire format, :mod:`golden.compress.layout`) straight into the updater,
    which merges them with its sequential pass over the state: 0 bytes of dense gradient.
"""

import dataclasses

__all__ = ["MODES", "OPTIMIZER_STATE_ARRAYS", "DramTraffic", "dram_traffic", "dram_bytes_per_parameter",
           "compressed_fraction"]

MODES = ("dense", "zero_fill_scatter", "fused")

# float32 arrays the updater reads and writes back per parameter, the master parameter included
# (Section V-A; SGD and AdaGrad are the Section VII-F variants).
OPTIMIZER_STATE_ARRAYS = {"sgd": 1, "sgd_momentum": 2, "adagrad": 2, "adam": 3, "adamw": 3}

_STATE_BYTES = 4  # float32


@dataclasses.dataclass(frozen=True)
class DramTraffic:
    """DRAM bytes per parameter and step, split by stream.

    Attributes
    ----------
    gradient_read : float
        Dense-gradient bytes read: the updater's read (dense and zero-fill modes) plus the scatter's
        read-modify-write reads.
    gradient_write : float
        Dense-gradient bytes written: zero-fill plus scatter writes.
    pair_read : float
        Index-value pair and chunk-header bytes read.
    state_read : float
        Optimizer state and master-parameter bytes read.
    state_write : float
        Optimizer state, master-parameter and parameter-copy bytes written.
    """

    gradient_read: float = 0.0
    gradient_write: float = 0.0
    pair_read: float = 0.0
    state_read: float = 0.0
    state_write: float = 0.0

    @property
    def read(self):
        """All bytes read."""
        return self.gradient_read + self.pair_read + self.state_read

    @property
    def write(self):
        """All bytes written."""
        return self.gradient_write + self.state_write

    @property
    def dense_gradient(self):
        """Bytes of dense gradient moved either way (0 in the fused mode)."""
        return self.gradient_read + self.gradient_write

    @property
    def total(self):
        """All bytes moved."""
        return self.read + self.write


def _check_nonnegative(**named):
    for name, value in named.items():
        if value < 0:
            raise ValueError(f"{name} must be >= 0, not {value!r}")


def dram_traffic(mode, *, ratio=0.01, value_bytes=4, index_bytes=4, optimizer="adam",
                 dense_gradient_bytes=4, param_copy_bytes=2, accumulate=True, scatter_access_bytes=4,
                 chunk_size=None, header_bytes=8):
    """DRAM traffic of one update step, per parameter, split by stream (see the module docstring).

    ``ratio`` is a pair density; for an exact cross-check with a simulation pass the realised
    ``len(indices) / size`` (Top-K rounds each block's count up). The defaults match the wire format
    (8-byte pair words, also for float16 values) and targets.md's 30-byte dense Adam step.

    Parameters
    ----------
    mode : {"dense", "zero_fill_scatter", "fused"}
        The update path.
    ratio : float, optional
        Pairs per parameter, in [0, 1]; unused in the dense mode.
    value_bytes, index_bytes : int, optional
        Bytes of a pair's value and index in DRAM, >= 0.
    optimizer : str, optional
        A key of :data:`OPTIMIZER_STATE_ARRAYS`.
    dense_gradient_bytes : int, optional
        Bytes of a dense gradient element, >= 0 (4: the scatter produces float32).
    param_copy_bytes : int, optional
        Bytes of the low-precision parameter copy written for the GPU, >= 0 (2 for float16).
    accumulate : bool, optional
        Zero-fill mode: scatter-add reads each destination before writing it (True), or the paper's
        plain overwrite (False).
    scatter_access_bytes : int, optional
        Zero-fill mode: bytes one random scatter access costs, >= 0; 4 for byte-exact accounting, or
        the bus width in bytes (64) to count one full AXI beat per access.
    chunk_size : int, optional
        Fused mode: chunk length, >= 1, to add one header per chunk; None leaves headers out.
    header_bytes : int, optional
        Fused mode: bytes per chunk header, >= 0.

    Returns
    -------
    DramTraffic
        The per-stream byte counts.

    Raises
    ------
    ValueError
        If ``mode`` or ``optimizer`` is unknown, ``ratio`` is outside [0, 1], a byte count is negative
        or ``chunk_size`` is below 1.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
    if optimizer not in OPTIMIZER_STATE_ARRAYS:
        raise ValueError(f"optimizer must be one of {sorted(OPTIMIZER_STATE_ARRAYS)}, not {optimizer!r}")
    if not 0 <= ratio <= 1:
        raise ValueError(f"ratio must be in [0, 1], not {ratio!r}")
    _check_nonnegative(value_bytes=value_bytes, index_bytes=index_bytes,
                       dense_gradient_bytes=dense_gradient_bytes, param_copy_bytes=param_copy_bytes,
                       scatter_access_bytes=scatter_access_bytes, header_bytes=header_bytes)
    if chunk_size is not None and chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1 or None, not {chunk_size!r}")
    state_bytes = OPTIMIZER_STATE_ARRAYS[optimizer] * _STATE_BYTES
    state = dict(state_read=state_bytes, state_write=state_bytes + param_copy_bytes)
    pair_read = ratio * (value_bytes + index_bytes)
    if mode == "dense":
        return DramTraffic(gradient_read=dense_gradient_bytes, **state)
    if mode == "fused":
        headers = 0.0 if chunk_size is None else header_bytes / chunk_size
        return DramTraffic(pair_read=pair_read + headers, **state)
    scatter_bytes = ratio * scatter_access_bytes
    return DramTraffic(
        gradient_read=dense_gradient_bytes + (scatter_bytes if accumulate else 0.0),
        gradient_write=dense_gradient_bytes + scatter_bytes,
        pair_read=pair_read,
        **state,
    )


def dram_bytes_per_parameter(mode, *, ratio=0.01, value_bytes=4, index_bytes=4, optimizer="adam", **options):
    """Total DRAM bytes per parameter and step: ``dram_traffic(...).total``.

    Parameters
    ----------
    mode : {"dense", "zero_fill_scatter", "fused"}
        The update path.
    ratio : float, optional
        Pairs per parameter, in [0, 1].
    value_bytes, index_bytes : int, optional
        Bytes of a pair's value and index.
    optimizer : str, optional
        A key of :data:`OPTIMIZER_STATE_ARRAYS`.
    **options
        The remaining keywords of :func:`dram_traffic`.

    Returns
    -------
    float
        Bytes per parameter.

    Raises
    ------
    ValueError
        As :func:`dram_traffic`.
    """
    return dram_traffic(mode, ratio=ratio, value_bytes=value_bytes, index_bytes=index_bytes,
                        optimizer=optimizer, **options).total


def compressed_fraction(ratio, *, value_bytes=2, index_bytes=2, dense_gradient_bytes=2):
    """The ``c`` of Table I: compressed gradient bytes over dense gradient bytes.

    Parameters
    ----------
    ratio : float
        Kept fraction, in [0, 1].
    value_bytes, index_bytes : int, optional
        Bytes per pair value and index, >= 0.
    dense_gradient_bytes : int, optional
        Bytes per dense gradient element, >= 1 (2: the float16 gradients of Table I's ``2M``).

    Returns
    -------
    float
        ``ratio * (value_bytes + index_bytes) / dense_gradient_bytes``; 0.02 for the paper's default.

    Raises
    ------
    ValueError
        If ``ratio`` is outside [0, 1] or a byte count is out of range.
    """
    if not 0 <= ratio <= 1:
        raise ValueError(f"ratio must be in [0, 1], not {ratio!r}")
    _check_nonnegative(value_bytes=value_bytes, index_bytes=index_bytes)
    if dense_gradient_bytes < 1:
        raise ValueError(f"dense_gradient_bytes must be >= 1, not {dense_gradient_bytes!r}")
    return ratio * (value_bytes + index_bytes) / dense_gradient_bytes
