"""Event-level model of the FCsN runtime protocol: the decisions of every handler, per node.

One function per hardware unit, each deciding exactly what the unit decides (the RTL unit's
test compares against it), and :class:`Cluster`, which runs them for N nodes until every
task has executed:

* :func:`classify` (task classifier): integrity, type, node ids, kernel id; a packet that
  fails is dropped with a reason;
* :func:`respond` (task responder): slot mask, range, rows, columns; which slots are local
  (their ``row`` is owned here); a task from the network that is not wholly local is dropped
  (``misrouted``: forwarding is one hop, see below);
* :func:`split` (task splitter + packager): the local slots become the kernel-bound task; the
  other slots are grouped by owner, in order of their first slot, one sealed packet per owner;
* :func:`detect` (RDMA detector): a task whose range is neither local nor present is frozen,
  and the first such task of a range emits one RDMA request for the whole range;
* :func:`serve` (RDMA responder + data packager): one data packet per line of the range;
* :func:`accept_data` (data handler): stores an expected line; the ``last`` line of a range
  makes it present, which releases the frozen tasks (in arrival order);
* :func:`spawn` (task spawner): Spawn_MEM entries with the header filled in.

Forwarding is one hop. The spawner's task enters its own node's responder, which sends each
group of remote slots straight to that group's owner, where all of it is local. A task from
the network therefore never emits a task (the seed forwards "the rest" and may split again at
the next node; one hop is what makes the deadlock argument in ``docs/runtime.md`` acyclic).

Ownership (runtime registers, the same on every node): output row ``r`` belongs to node
``(r >> home_shift) & (nodes - 1)``; data range ``g`` (lines ``g*block .. g*block + block - 1``,
the last one clipped at ``rows``) to node ``(g >> range_shift) & (nodes - 1)``. Line ``l`` of
the global data space is row ``l`` of the dense operand; its owner stores it and a node that
fetched it keeps it (no eviction: the data memory spans the whole space).

Order. Each node issues tasks to its kernel in the order they reach its RDMA detector (the
freeze queue is in order and a task bypasses it only when it is empty). Tasks of one spawner
to one node keep their order on the network (one path, FIFOs). So when every output row's
items come from a single spawner, each row is updated in that spawner's order, whatever the
timing, and :class:`Cluster` predicts float results bit for bit (:attr:`Result.order_exact`).
"""

from collections import defaultdict
from dataclasses import dataclass, field, replace

from .packet import DATA, ITEMS, MAX_NODES, RDMA, TASK, Packet, checksum, decode, encode, set_field
from .tables import COUNTERS, DROP_REASONS

__all__ = ["Config", "DROP_REASONS", "COUNTERS", "classify", "respond", "split", "detect_request", "serve",
           "spawn", "Cluster", "Result"]


@dataclass(frozen=True)
class Config:
    """The cluster's runtime configuration (registers of every node, and the kernel set).

    Parameters
    ----------
    nodes : int
        1, 2, 4, 8 or 16.
    rows : int
        Lines of the global data space (rows of the dense operand, and output rows).
    block : int
        Lines per data range (the seed's column block of 20).
    home_shift, range_shift : int
        Ownership of rows and ranges (module docstring).
    kernels : frozenset of int
        Kernel ids present on every node (others are rejected).
    replicated : bool
        B is replicated: the host loaded every line into every node (the ``replicated``
        register), so every range is present everywhere and no node fetches one. Ownership
        (:meth:`range_owner`) still names the range's owner (the ``remote`` header bit).
    """

    nodes: int
    rows: int
    block: int = 20
    home_shift: int = 0
    range_shift: int = 0
    kernels: frozenset = frozenset({2, 5, 6})
    replicated: bool = False

    def __post_init__(self):
        if self.nodes not in (1, 2, 4, 8, 16) or self.nodes > MAX_NODES:
            raise ValueError(f"nodes must be 1, 2, 4, 8 or 16, not {self.nodes}")
        if not 1 <= self.block <= 255:
            raise ValueError(f"block must be in 1..255, not {self.block}")
        if not 1 <= self.rows <= 1 << 24 or self.ranges > 1024:
            raise ValueError(f"rows must be in 1..2**24 with at most 1024 ranges, not {self.rows}")

    @property
    def ranges(self):
        return -(-self.rows // self.block)

    def home(self, row):
        return (row >> self.home_shift) & (self.nodes - 1)

    def range_owner(self, index):
        return (index >> self.range_shift) & (self.nodes - 1)

    def holds(self, node, index):
        """Whether ``node`` holds data range ``index`` before any fetch."""
        return self.replicated or self.range_owner(index) == node

    def range_lines(self, index):
        """``(first, lines)`` of data range ``index``."""
        first = index * self.block
        return first, min(self.block, self.rows - first)


def classify(word, vc, node, config):
    """The classifier's verdict on a flit: ``"task"``, ``"rdma"``, ``"data"`` or ``"drop_<reason>"``.

    Checks in this order (the first failure is the counted reason): the checksum (``check``);
    the type (``type``: 3, or not the flit's channel); the node ids (``node``: ``dst`` is not
    this node, or ``src`` is not below ``nodes``); the kernel id of a task (``task_id``: not
    in ``config.kernels``).
    """
    packet = decode(word)
    if checksum(word):
        return "drop_check"
    if packet.ptype == 3 or packet.ptype != vc:
        return "drop_type"
    if packet.dst != node or packet.src >= config.nodes:
        return "drop_node"
    if packet.ptype == TASK and packet.task_id not in config.kernels:
        return "drop_task_id"
    return {TASK: "task", RDMA: "rdma", DATA: "data"}[packet.ptype]


def respond(packet, node, config, *, from_network):
    """The task responder: ``(local_mask, owners)`` or ``"drop_<reason>"``.

    Checks in order: the slot mask is not 0 (``task_mask``); the range is below
    ``config.ranges`` (``task_range``); every occupied slot's row is below ``rows``
    (``task_row``); every occupied slot's column lies in the range (``task_col``); a task from
    the network is wholly local (``misrouted``). ``owners`` lists the owner of each slot
    (None for empty slots).
    """
    mask = packet.occupied
    if not mask:
        return "drop_task_mask"
    if packet.range >= config.ranges:
        return "drop_task_range"
    first, lines = config.range_lines(packet.range)
    slots = [(slot, item) for slot, item in enumerate(packet.slots) if item is not None]
    if any(item.row >= config.rows for _, item in slots):
        return "drop_task_row"
    if any(not first <= item.col < first + lines for _, item in slots):
        return "drop_task_col"
    owners = [None if item is None else config.home(item.row) for item in packet.slots]
    local = sum(1 << slot for slot, _ in slots if owners[slot] == node)
    if from_network and local != mask:
        return "drop_misrouted"
    return local, owners


def _masked(packet, mask):
    return tuple(item if mask >> slot & 1 else None for slot, item in enumerate(packet.slots))


def split(packet, node, config, local, owners):
    """The splitter and packager: ``(kernel_task or None, [network packets as ints])``.

    The kernel-bound task keeps the header except ``dst`` (this node), ``remote`` (its range
    is not owned here) and ``check`` (0: it never leaves the node); slots outside the local
    mask are emptied. Each remote group is a sealed task packet from this node to its owner.
    """
    kernel_task = None
    if local:
        kernel_task = replace(packet, dst=node, remote=int(config.range_owner(packet.range) != node),
                              slots=_masked(packet, local), mask=local, check=0)
    remote = []
    pending = packet.occupied & ~local
    while pending:
        first_slot = (pending & -pending).bit_length() - 1
        owner = owners[first_slot]
        group = sum(1 << slot for slot in range(ITEMS) if pending >> slot & 1 and owners[slot] == owner)
        remote.append(encode(replace(packet, dst=owner, src=node,
                                     remote=int(config.range_owner(packet.range) != owner),
                                     slots=_masked(packet, group), mask=group, check=None)))
        pending &= ~group
    return kernel_task, remote


def detect_request(packet, node, config):
    """The RDMA request a node sends for ``packet``'s range (its first miss of that range)."""
    first, lines = config.range_lines(packet.range)
    return encode(Packet(RDMA, task_id=packet.task_id, dst=config.range_owner(packet.range), src=node,
                         range=packet.range, first=first, lines=lines))


def serve(packet, node, config, memory):
    """The RDMA responder and data packager: data packets as ints, or ``"drop_rdma_range"``.

    The request must name a range below ``config.ranges`` owned by this node, and lines
    ``first .. first + lines - 1`` (at least one) inside it. ``memory`` maps a line to its
    448-bit value (missing lines read 0).
    """
    if packet.range >= config.ranges or config.range_owner(packet.range) != node:
        return "drop_rdma_range"
    first, lines = config.range_lines(packet.range)
    if packet.lines == 0 or packet.first < first or packet.first + packet.lines > first + lines:
        return "drop_rdma_range"
    end = packet.first + packet.lines
    return [encode(Packet(DATA, task_id=packet.task_id, dst=packet.src, src=node, range=packet.range,
                          line=line, last=int(line == end - 1), data=memory.get(line, 0)))
            for line in range(packet.first, end)]


def spawn(entry, node, config, task_id):
    """The spawner's task from a Spawn_MEM entry (an int): type, id, ``dst = src = node``, check 0.

    Only the entry's ``range`` and task payload are used (its other header fields are replaced).
    """
    packet = decode(set_field(entry, 0, 2, TASK))
    return replace(packet, ptype=TASK, task_id=task_id, dst=node, src=node,
                   remote=int(config.range_owner(packet.range) != node), check=0)


@dataclass
class Result:
    """What :meth:`Cluster.run` predicts.

    Attributes
    ----------
    counters : list of dict
        Per node, every name of :data:`COUNTERS`.
    issued : list of list of Packet
        Per node, the kernel-bound tasks in an order the node may issue them (spawner by
        spawner); the RTL's multiset of issued tasks equals this.
    requests : list of set
        Per node, the ranges it fetched.
    order_exact : bool
        Every output row's items came from one spawner, so a row's update order is fixed.
    """

    counters: list
    issued: list
    requests: list
    order_exact: bool


@dataclass
class Cluster:
    """The protocol on ``config.nodes`` nodes: spawn lists in, per-node decisions and counts out.

    Parameters
    ----------
    config : Config
    memory : dict of int -> int
        The global data space (line -> 448-bit value), as loaded: each line lives at its owner.
    """

    config: Config
    memory: dict = field(default_factory=dict)

    def node_memory(self, node):
        """Lines held by ``node`` before any fetch."""
        return {line: value for line, value in self.memory.items()
                if self.config.holds(node, line // self.config.block)}

    def run(self, spawn_lists, task_id, injected=None):
        """Spawn ``spawn_lists[n]`` (entries, ints) on every node with ``task_id`` and run to quiescence.

        ``injected`` maps a node to flits ``(vc, word)`` arriving from outside (bad input tests);
        they are classified after the spawned work.
        """
        config = self.config
        nodes = config.nodes
        counters = [dict.fromkeys(COUNTERS, 0) for _ in range(nodes)]
        issued = [[] for _ in range(nodes)]
        requested = [set() for _ in range(nodes)]
        homes = defaultdict(set)
        if task_id not in config.kernels:
            return Result(counters, issued, requested, True)

        def execute(node, packet):
            counters[node]["issued"] += 1
            counters[node]["completed"] += 1
            issued[node].append(packet)
            if not config.holds(node, packet.range) and packet.range not in requested[node]:
                requested[node].add(packet.range)
                self._rdma(counters, node, decode(detect_request(packet, node, config)))

        def arrive_task(node, packet):
            verdict = respond(packet, node, config, from_network=True)
            if isinstance(verdict, str):
                counters[node][verdict] += 1
                return
            execute(node, split(packet, node, config, *verdict)[0])

        for source in range(nodes):
            for entry in spawn_lists[source]:
                packet = spawn(entry, source, config, task_id)
                counters[source]["spawned"] += 1
                verdict = respond(packet, source, config, from_network=False)
                if isinstance(verdict, str):
                    counters[source][verdict] += 1
                    continue
                local, owners = verdict
                kernel_task, remote = split(packet, source, config, local, owners)
                for item in packet.slots:
                    if item is not None:
                        homes[item.row].add(source)
                if kernel_task is not None:
                    execute(source, kernel_task)
                for word in remote:
                    sent = decode(word)
                    counters[source]["tx_task"] += 1
                    counters[sent.dst]["rx_task"] += 1
                    arrive_task(sent.dst, sent)

        for node, flits in (injected or {}).items():
            for vc, word in flits:
                verdict = classify(word, vc, node, config)
                if verdict.startswith("drop_"):
                    counters[node][verdict] += 1
                    continue
                counters[node][f"rx_{verdict}"] += 1
                packet = decode(word)
                if verdict == "task":
                    arrive_task(node, packet)
                elif verdict == "rdma":
                    served = serve(packet, node, config, self.memory)
                    if isinstance(served, str):
                        counters[node][served] += 1
                        continue
                    if packet.range in requested[packet.src]:
                        raise ValueError("an injected request for a range its source fetched itself: "
                                         "whether the replies are expected depends on timing")
                    # The replies reach a node that asked nothing: its data handler drops them.
                    counters[node]["served"] += 1
                    counters[node]["tx_data"] += len(served)
                    counters[packet.src]["rx_data"] += len(served)
                    counters[packet.src]["drop_data_unsolicited"] += len(served)
                else:
                    if packet.range in requested[node]:
                        raise ValueError("an injected data packet for a range the node fetched: "
                                         "whether it is expected depends on timing")
                    counters[node]["drop_data_unsolicited"] += 1
        order_exact = all(len(sources) == 1 for sources in homes.values())
        return Result(counters, issued, requested, order_exact)

    def _rdma(self, counters, node, request):
        owner = request.dst
        counters[node]["tx_rdma"] += 1
        counters[owner]["rx_rdma"] += 1
        counters[owner]["served"] += 1
        counters[owner]["tx_data"] += request.lines
        counters[node]["rx_data"] += request.lines
