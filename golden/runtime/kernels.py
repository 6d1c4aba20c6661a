"""What the kernels attached to the runtime leave in each node's output memory.

A data line (448 bits) holds ``features`` 32-bit words, word *f* in bits ``32 f .. 32 f + 31``.
Each node has an output memory of ``rows`` lines (global row addresses; a node only ever
writes the rows it owns). The kernels execute the tasks a node issues, in issue order, and
each task's occupied slots in slot order:

* **1, dense GEMM (float32):** the task's runnable slots, in slot order, are the rows of
  ``A`` (``M x K``, row *i* the first ``K`` words of ``OUT[row_i]``); ``W`` (``K x N``) is ``K``
  lines of B from line ``col`` (line ``col + k`` holds row *k*, words ``0 .. N - 1``), with ``col``
  and the shape ``value = K | N << 8`` of the first runnable slot (the host gives every slot of a
  task the same ``col`` and ``value``). ``OUT[row_i]`` becomes row *i* of
  :func:`golden.systolic.gemm` ``(A, W, element="f32")`` (per output a chain of rounded products
  added in increasing ``k``, the ``tiled_gemm``'s order), words past ``N`` zero. The rows are
  read before any is written, so ``OUT[row] = OUT[row] W`` in place (a GCN's combination);
* **2, sparse x dense (integer):** ``OUT[row] = (OUT[row] + value * B[col]) mod 2**32`` per
  word (unsigned 32-bit wrap-around; the result is independent of the order);
* **5, activation (ReLU):** every word of ``OUT[row]`` whose sign bit is set becomes 0
  (float32 ReLU on bit patterns: negatives and -0 become +0, so do NaNs with the sign set);
* **6, aggregation (float32):** ``S[row] = fl(S[row] + fl(a * B[col]))`` per word, each
  operation one binary32 round-to-nearest-even (NumPy float32; subnormals kept), ``a`` the
  slot's ``value`` as a float32 bit pattern, into sums ``S`` that start at +0 (the aggregation
  pipeline's own memory); before the next task of another kernel, and at the end, ``S`` replaces
  the whole output memory and restarts at +0 (the pipeline's drain). Infinities follow IEEE
  754; every NaN result is the canonical quiet NaN ``0x7FC00000`` (the FP units never propagate a
  NaN's payload or sign). Nothing counts non-finite values: a NaN or an infinity in B or in a
  weight is data, not an error.

**Refused slots** (the kernels' ``range_errors`` and ``bank_errors``, see :func:`refused`): a
slot whose row is not below ``rows``, or, for kernels 2 and 6 (they read B), whose column is not
below ``rows``, is skipped; so is a GEMM slot whose ``K`` or ``N`` is not in ``1 .. features``
or whose ``W`` lines ``col .. col + K - 1`` are not all below ``rows``; so is an aggregation
slot whose row is not in its output bank (``row mod 4`` differs from the slot).

A line carries at most :data:`LINE_WORDS` = 14 words: ``features`` outside 1 .. 14 is refused.

``B[col]`` is line ``col`` of the global data space (a node reads a remote line only after
fetching it, and lines are never written during a run, so every node sees the same B).
"""

import numpy as np

from golden.aggregate.pipeline import canonical_nan
from golden.systolic import gemm

from .packet import ITEMS, LINE_BITS
from .tables import KERNEL_COUNTERS

__all__ = ["line_words", "words_line", "execute", "refused", "check_features", "gemm_value", "GEMM", "SPMM",
           "ACTIVATION", "AGGREGATION", "SUPPORTED", "LINE_WORDS", "KERNEL_COUNTERS"]

GEMM, SPMM, ACTIVATION, AGGREGATION = 1, 2, 5, 6
SUPPORTED = (GEMM, SPMM, ACTIVATION, AGGREGATION)
LINE_WORDS = LINE_BITS // 32
_MASK32 = (1 << 32) - 1


def check_features(features):
    """``features`` as an int, or a ValueError when a 448-bit line cannot carry that many 32-bit words."""
    if isinstance(features, bool) or not isinstance(features, (int, np.integer)) \
            or not 1 <= features <= LINE_WORDS:
        raise ValueError(f"features must be an integer from 1 to {LINE_WORDS} (32-bit words in a "
                         f"{LINE_BITS}-bit line), not {features!r}")
    return int(features)


def gemm_value(k, n):
    """A GEMM slot's ``value``: the shape ``K x N`` of its ``W``."""
    return k | n << 8


def refused(task, slot, item, rows, features=LINE_WORDS):
    """The counter that ``item`` (in ``slot`` of ``task``) counts in when the kernels skip it, or None."""
    if item.row >= rows or (task.task_id != ACTIVATION and item.col >= rows):
        return "range_errors"
    if task.task_id == GEMM:
        k, n = item.value & 0xFF, item.value >> 8 & 0xFF
        if not (1 <= k <= features and 1 <= n <= features) or item.col + k > rows:
            return "range_errors"
    if task.task_id == AGGREGATION and item.row % ITEMS != slot:
        return "bank_errors"
    return None


def line_words(value, features):
    """The first ``features`` 32-bit words of a line (an int) as uint32."""
    return np.array([(value >> (32 * index)) & _MASK32 for index in range(features)], dtype=np.uint32)


def words_line(words):
    """A line (int) from 32-bit words, word 0 lowest."""
    line = 0
    for index, word in enumerate(np.asarray(words, dtype=np.uint32)):
        line |= int(word) << (32 * index)
    return line


def execute(issued, memory, *, rows, features, out=None, errors=None):
    """Run every node's issued tasks; returns the output memories (per node, rows x features uint32).

    Parameters
    ----------
    issued : list of list of golden.runtime.packet.Packet
        Per node, the tasks in issue order (:attr:`golden.runtime.protocol.Result.issued`).
    memory : dict of int -> int
        The global data space (line -> 448-bit int).
    rows, features : int
    out : list of numpy.ndarray, optional
        Initial output memories (copied); zeros by default.
    errors : list, optional
        Receives, per node, ``{name: count}`` of the refused slots (:data:`KERNEL_COUNTERS`).
    """
    features = check_features(features)
    nodes = len(issued)
    result = [np.zeros((rows, features), np.uint32) if out is None else np.array(out[node], dtype=np.uint32)
              for node in range(nodes)]
    lines = {}

    def b_row(col):
        if col not in lines:
            lines[col] = line_words(memory.get(col, 0), features)
        return lines[col]

    for node, tasks in enumerate(issued):
        target = result[node]
        counts = dict.fromkeys(KERNEL_COUNTERS, 0)
        sums = None  # the aggregation pipeline's memory, when it holds results
        for task in tasks:
            if sums is not None and task.task_id != AGGREGATION:
                target[:] = canonical_nan(sums.view(np.float32)).view(np.uint32)  # the drain
                sums = None
            if sums is None and task.task_id == AGGREGATION:
                sums = np.zeros_like(target)
            runnable = []
            for slot, item in enumerate(task.slots):
                if item is None:
                    continue
                reason = refused(task, slot, item, rows, features)
                if reason is not None:
                    counts[reason] += 1
                    continue
                if task.task_id == GEMM:
                    runnable.append(item)
                elif task.task_id == SPMM:
                    product = (b_row(item.col).astype(np.uint64) * np.uint64(item.value)) & np.uint64(_MASK32)
                    target[item.row] = ((target[item.row].astype(np.uint64) + product) & np.uint64(_MASK32)
                                        ).astype(np.uint32)
                elif task.task_id == ACTIVATION:
                    target[item.row] = np.where(target[item.row] >> 31, np.uint32(0), target[item.row])
                elif task.task_id == AGGREGATION:
                    weight = np.array([item.value], np.uint32).view(np.float32)[0]
                    with np.errstate(all="ignore"):
                        product = b_row(item.col).view(np.float32) * weight
                        sums[item.row] = (sums[item.row].view(np.float32) + product).view(np.uint32)
                else:
                    raise ValueError(f"no golden kernel for task id {task.task_id}")
            if runnable:
                _gemm(target, runnable, b_row)
        if sums is not None:
            target[:] = canonical_nan(sums.view(np.float32)).view(np.uint32)
        if errors is not None:
            errors.append(counts)
    return result


def _gemm(target, items, b_row):
    """Kernel 1 on the runnable ``items`` of one task (module docstring), in place in ``target``."""
    k, n = items[0].value & 0xFF, items[0].value >> 8 & 0xFF
    w = np.array([b_row(items[0].col + index)[:n] for index in range(k)], dtype=np.uint32)
    a = np.array([target[item.row][:k] for item in items], dtype=np.uint32)
    product = gemm(a, w, element="f32")
    for index, item in enumerate(items):
        target[item.row] = 0
        target[item.row][:n] = product[index]
