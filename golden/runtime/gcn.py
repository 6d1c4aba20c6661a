"""A two-layer GCN forward pass on the cluster: the host's job and its golden run.

``logits = Â relu(Â (X W1)) W2`` as :func:`golden.aggregate.gcn_forward` computes it, bit for bit,
on ``nodes`` runtime nodes, in five kernel runs (each one ``Kernel_Start`` of every node on its
own window of Spawn_MEM):

1. ``gemm1`` (kernel 1): every node multiplies its own output rows (``X``, loaded there by the
   host) by ``W1``, in place;
2. ``aggregate1`` (kernel 6): ``Â (X W1)``, with ``X W1`` replicated as B into every node first;
3. ``relu`` (kernel 5) on every node's rows;
4. ``gemm2`` (kernel 1): the rows times ``W2``, in place;
5. ``aggregate2`` (kernel 6): ``Â (H W2)``, ``H W2`` replicated as B first.

Between the GEMMs and the aggregations the host reads the new rows back from their homes and
writes them as B lines into every node (the ``replicated`` flow; :data:`REPLICATE_BEFORE`).

**Rows.** The aggregation tasks are :func:`golden.aggregate.spawn`'s packets (the order
:func:`~golden.aggregate.aggregate` sums in), cut per home node and per data range: output rows
are the spawner's physical rows (bank ``row mod 4``), homed at node ``(row >> 2) mod nodes``;
every row's terms are spawned by its home, in the spawner's order, so the sums are
``gcn_forward``'s. B line ``c`` is row ``c`` of the dense matrix (unpermuted). ``W1`` and ``W2``
live in the data space after the physical rows (line ``w_line[i] + k`` holds row ``k``), in every
node; GEMM tasks name them in ``col`` and their shape in ``value``
(:func:`golden.runtime.kernels.gemm_value`). Every stage's tasks are spawned at their rows' home:
with B replicated, no task and no data crosses the network.
"""

from dataclasses import dataclass

import numpy as np

from golden.aggregate.spawner import spawn

from .kernels import ACTIVATION, AGGREGATION, GEMM, LINE_WORDS, SPMM, execute, gemm_value, words_line
from .packet import ITEMS, TASK, Item, Packet, encode
from .protocol import Cluster, Config

__all__ = ["GCN_KERNELS", "STAGES", "REPLICATE_BEFORE", "GcnJob", "gcn_job", "gcn_golden"]

GCN_KERNELS = frozenset({GEMM, SPMM, ACTIVATION, AGGREGATION})
# (stage, kernel id, layer)
STAGES = (("gemm1", GEMM, 1), ("aggregate1", AGGREGATION, 1), ("relu", ACTIVATION, 1), ("gemm2", GEMM, 2),
          ("aggregate2", AGGREGATION, 2))
# The stages before which the host replicates the rows as B.
REPLICATE_BEFORE = ("aggregate1", "aggregate2")


@dataclass
class GcnJob:
    """What the host loads and runs (module docstring).

    Attributes
    ----------
    config : Config
        ``rows`` = physical rows plus the lines of W1 and W2; B replicated.
    spawn : list of list of int
        Per node, its Spawn_MEM entries, stage after stage (both aggregations run the same ones).
    windows : dict
        Stage name -> per node ``(first, count)`` in its Spawn_MEM.
    memory : dict of int -> int
        The W lines (every node holds them; the B lines come from the stages).
    x : numpy.ndarray
        The input features, float32, in their physical output rows (``physical_rows x features``).
    physical_of_row : numpy.ndarray
        Physical output row of every row of ``Â``.
    n, features, widths
        Rows of ``Â``; words per line; ``(F_in, hidden, classes)``.
    """

    config: Config
    spawn: list
    windows: dict
    memory: dict
    x: np.ndarray
    physical_of_row: np.ndarray
    n: int
    features: int
    widths: tuple

    @property
    def physical_rows(self):
        return self.x.shape[0]

    def stage_lists(self, stage):
        """Per node, the Spawn_MEM entries of ``stage``."""
        return [entries[first:first + count]
                for entries, (first, count) in zip(self.spawn, self.windows[stage], strict=True)]

    def b_lines(self, physical):
        """The B lines (line -> 448-bit int) of dense rows held in physical rows ``physical`` (uint32)."""
        rows = np.asarray(physical, np.uint32)[self.physical_of_row]
        return {line: words_line(rows[line]) for line in range(self.n)}

    def rows(self, physical):
        """The ``n`` rows of ``Â`` (unpermuted) from physical rows, the first ``width`` words as float32."""
        return np.asarray(physical, np.uint32)[self.physical_of_row].view(np.float32)


def _row_tasks(physical_rows, col, value, block):
    """One task per group of 4 physical rows (slot i: row 4 j + i), all with ``col`` and ``value``."""
    return [(row >> 2, Packet(TASK, range=col // block,
                              slots=tuple(Item(row + slot, col, value) for slot in range(ITEMS))))
            for row in range(0, physical_rows, ITEMS)]


def _aggregation_tasks(spawned, block):
    """``spawned``'s packets cut per (home group of 4 rows, data range), in packet order."""
    packets = spawned.packets
    tasks = []
    for index in range(packets.rows.shape[0]):
        groups = {}
        for slot in range(ITEMS):
            if not packets.mask[index] >> slot & 1:
                continue
            row, col = int(packets.rows[index, slot]), int(packets.cols[index, slot])
            value = int(np.float32(packets.values[index, slot]).view(np.uint32))
            groups.setdefault((row >> 2, col // block), [None] * ITEMS)[slot] = Item(row, col, value)
        tasks += [(group, Packet(TASK, range=block_index, slots=tuple(slots)))
                  for (group, block_index), slots in groups.items()]
    return tasks


def gcn_job(normalised, x, w1, w2, *, nodes, block=255):
    """The :class:`GcnJob` of ``gcn_forward(normalised, x, w1, w2)`` on ``nodes`` nodes.

    ``block`` (lines per data range, at most 255) only cuts the aggregation packets (a task's
    columns lie in one range): B is replicated, so no range is ever fetched.
    """
    n = normalised.shape[0]
    f_in, hidden = w1.shape
    classes = w2.shape[1]
    features = max(f_in, hidden, classes)
    if features > LINE_WORDS or x.shape != (n, f_in) or w2.shape[0] != hidden:
        raise ValueError(f"X ({x.shape}), W1 ({w1.shape}) and W2 ({w2.shape}) must chain, each at most "
                         f"{LINE_WORDS} wide (one line per row)")
    spawned = spawn(normalised, lanes=ITEMS, weighted=True)
    physical_rows = spawned.n_rows
    w_line = (physical_rows, physical_rows + f_in)
    config = Config(nodes=nodes, rows=physical_rows + f_in + hidden, block=block, home_shift=2,
                    kernels=GCN_KERNELS, replicated=True)
    memory = {}
    for first, w in zip(w_line, (w1, w2), strict=True):
        for k, row in enumerate(np.ascontiguousarray(w, np.float32).view(np.uint32)):
            memory[first + k] = words_line(row)
    stage_tasks = {
        "gemm1": _row_tasks(physical_rows, w_line[0], gemm_value(f_in, hidden), block),
        "aggregate1": _aggregation_tasks(spawned, block),
        "relu": _row_tasks(physical_rows, 0, 0, block),
        "gemm2": _row_tasks(physical_rows, w_line[1], gemm_value(hidden, classes), block),
    }
    spawn_lists = [[] for _ in range(nodes)]
    windows = {}
    for stage, tasks in stage_tasks.items():
        windows[stage] = []
        mine = [[] for _ in range(nodes)]
        for group, task in tasks:
            mine[group % nodes].append(encode(task, sealed=False))
        for node in range(nodes):
            windows[stage].append((len(spawn_lists[node]), len(mine[node])))
            spawn_lists[node] += mine[node]
    windows["aggregate2"] = windows["aggregate1"]  # the same tasks, on the new B
    placed = np.zeros((physical_rows, features), np.float32)
    placed[spawned.physical_of_row, :f_in] = x
    return GcnJob(config, spawn_lists, windows, memory, placed, spawned.physical_of_row, n, features,
                  (f_in, hidden, classes))


def gcn_golden(job):
    """Run ``job`` on :class:`golden.runtime.protocol.Cluster` and :func:`golden.runtime.kernels.execute`.

    Returns ``(outputs, results)``: per stage the physical rows gathered from their homes (uint32,
    ``physical_rows x features``), and per stage the protocol's :class:`~golden.runtime.protocol.Result`.
    """
    config = job.config
    rows = config.rows
    out = [np.zeros((rows, job.features), np.uint32) for _ in range(config.nodes)]
    x = job.x.view(np.uint32)
    for row in range(job.physical_rows):
        out[config.home(row)][row] = x[row]
    memory = dict(job.memory)
    outputs, results = {}, {}
    previous = None
    for stage, task_id, _ in STAGES:
        if stage in REPLICATE_BEFORE:
            memory.update(job.b_lines(outputs[previous]))
        result = Cluster(config, memory).run(job.stage_lists(stage), task_id)
        out = execute(result.issued, memory, rows=rows, features=job.features, out=out)
        outputs[stage] = np.array([out[config.home(row)][row] for row in range(job.physical_rows)], np.uint32)
        results[stage] = result
        previous = stage
    return outputs, results
