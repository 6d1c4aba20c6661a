"""golden.runtime against oracles it does not share code with.

* Packet counts: an independent count from the task slots with NumPy and sets (who executes
  what, which node needs which remote range, how many lines each range has).
* Results: the integer sparse x dense kernel against ``scipy.sparse`` (exact, modulo 2**32),
  the float32 aggregation against ``scipy.sparse`` in float64 within the recursive-sum bound,
  ReLU against ``numpy.maximum`` on float32.
* Hand-made cases for the responder, splitter and RDMA responder decisions.
"""

import numpy as np
import pytest
import scipy.sparse as sp

from golden.runtime import kernels as gk
from golden.runtime import packet as gp
from golden.runtime.protocol import Cluster, Config, classify, respond, serve, split
from scripts.sim import knobs


def scenario(rng, config, packets_per_node, *, task_id=2, value_bits=12, single_spawner=False):
    """Random spawn lists: packets of 1..4 items in one range each; rows anywhere (or per spawner)."""
    spawn = [[] for _ in range(config.nodes)]
    for node in range(config.nodes):
        for _ in range(packets_per_node):
            index = int(rng.integers(0, config.ranges))
            first, lines = config.range_lines(index)
            slots = []
            for _ in range(gp.ITEMS):
                if rng.random() < 0.3:
                    slots.append(None)
                    continue
                row = int(rng.integers(0, config.rows))
                if single_spawner:  # rows r with r mod nodes == node, so each row has one spawner
                    row -= row % config.nodes
                    row += node
                    if row >= config.rows:
                        row = node
                slots.append(gp.Item(row, int(rng.integers(first, first + lines)),
                                     int(rng.integers(0, 1 << value_bits))))
            if all(item is None for item in slots):
                slots[0] = gp.Item(node, first, 1)
            spawn[node].append(gp.encode(gp.Packet(gp.TASK, range=index, slots=tuple(slots)), sealed=False))
    return spawn


def oracle_counts(config, spawn):
    """Expected counters, from the slots alone."""
    nodes = config.nodes
    counts = [dict.fromkeys(("tx_task", "rx_task", "tx_rdma", "rx_rdma", "tx_data", "rx_data", "issued",
                             "served"), 0) for _ in range(nodes)]
    needs = set()
    for source in range(nodes):
        for word in spawn[source]:
            packet = gp.decode(word)
            rows = np.array([item.row for item in packet.slots if item is not None])
            owners = set(((rows >> config.home_shift) & (nodes - 1)).tolist())
            for owner in owners:
                counts[owner]["issued"] += 1
                if owner != source:
                    counts[source]["tx_task"] += 1
                    counts[owner]["rx_task"] += 1
                data_node = (packet.range >> config.range_shift) & (nodes - 1)
                if data_node != owner:
                    needs.add((owner, packet.range))
    for node, index in needs:
        owner = (index >> config.range_shift) & (nodes - 1)
        lines = min(config.block, config.rows - index * config.block)
        counts[node]["tx_rdma"] += 1
        counts[owner]["rx_rdma"] += 1
        counts[owner]["served"] += 1
        counts[owner]["tx_data"] += lines
        counts[node]["rx_data"] += lines
    return counts


def random_memory(rng, config, features, bits=12):
    return {line: gk.words_line(rng.integers(0, 1 << bits, features)) for line in range(config.rows)}


@pytest.mark.parametrize("nodes", [1, 2, 4, 8, 16])
def test_counts_and_integer_results_match_oracles(nodes):
    rng = knobs.rng(nodes)
    for trial in range(4):
        config = Config(nodes=nodes, rows=int(rng.integers(40, 400)), block=int(rng.choice([4, 20, 32])),
                        home_shift=int(rng.integers(0, 5)), range_shift=int(rng.integers(0, 3)))
        spawn = scenario(rng, config, knobs.vectors(60, limit=200))  # packets per node, Python cluster model
        features = 3
        memory = random_memory(rng, config, features)
        result = Cluster(config, memory).run(spawn, task_id=gk.SPMM)
        expected = oracle_counts(config, spawn)
        for node in range(nodes):
            got = {name: result.counters[node][name] for name in expected[node]}
            assert got == expected[node], f"node {node} trial {trial}; {knobs.describe()}"
            assert result.counters[node]["completed"] == result.counters[node]["issued"]
        out = gk.execute(result.issued, memory, rows=config.rows, features=features)
        # Gather each row from its owner, compare with scipy.sparse (exact in int64, then mod 2**32).
        triples = [(item.row, item.col, item.value) for words in spawn for word in words
                   for item in gp.decode(word).slots if item is not None]
        rows, cols, values = (np.array(column, dtype=np.int64) for column in zip(*triples, strict=True))
        a = sp.coo_matrix((values, (rows, cols)), shape=(config.rows, config.rows)).tocsr()
        b = np.array([gk.line_words(memory[line], features) for line in range(config.rows)], dtype=np.int64)
        reference = (a @ b) % (1 << 32)
        gathered = np.array([out[config.home(row)][row] for row in range(config.rows)], dtype=np.int64)
        assert np.array_equal(gathered, reference), knobs.describe()
        for node in range(nodes):  # nothing outside a node's own rows is written
            others = [row for row in range(config.rows) if config.home(row) != node]
            assert not out[node][others].any()


def test_float_aggregation_within_bound_of_float64():
    rng = knobs.rng(3)
    config = Config(nodes=4, rows=300, block=20, home_shift=2)
    spawn = scenario(rng, config, 200, single_spawner=True)
    features = 5
    b = rng.standard_normal((config.rows, features)).astype(np.float32)
    memory = {line: gk.words_line(b[line].view(np.uint32)) for line in range(config.rows)}
    for words in spawn:
        for index, word in enumerate(words):  # weights as float32 bit patterns
            packet = gp.decode(word)
            # An aggregation slot holds rows of its own output bank (row mod 4): move each item
            # there, leaving out one that finds its slot taken.
            slots = [None] * gp.ITEMS
            for item in packet.slots:
                if item is not None and slots[item.row % gp.ITEMS] is None:
                    slots[item.row % gp.ITEMS] = gp.Item(item.row, item.col, int(
                        np.float32(rng.standard_normal()).view(np.uint32)))
            words[index] = gp.encode(gp.Packet(gp.TASK, range=packet.range, slots=tuple(slots)), sealed=False)
    result = Cluster(config, memory).run(spawn, task_id=gk.AGGREGATION)
    assert result.order_exact
    errors = []
    out = gk.execute(result.issued, memory, rows=config.rows, features=features, errors=errors)
    assert errors == [dict.fromkeys(gk.KERNEL_COUNTERS, 0)] * config.nodes
    triples = [(item.row, item.col, np.uint32(item.value).view(np.float32))
               for words in spawn for word in words for item in gp.decode(word).slots if item is not None]
    rows, cols, values = zip(*triples, strict=True)
    a = sp.coo_matrix((np.array(values, np.float64), (rows, cols)), shape=(config.rows, config.rows)).tocsr()
    reference = a @ b.astype(np.float64)
    gathered = np.array([out[config.home(row)][row] for row in range(config.rows)]).view(np.float32)
    degree = np.bincount(np.array(rows), minlength=config.rows)[:, None]
    u = 2.0 ** -24
    bound = (degree * u / (1 - degree * u)) * (abs(a) @ np.abs(b.astype(np.float64))) + degree * 2.0 ** -149
    assert np.all(np.abs(gathered - reference) <= bound), knobs.describe()


def test_replicated_b_fetches_nothing_and_changes_no_result():
    """B in every node: no RDMA request, line or served range anywhere; the same tasks run at the same
    nodes with the same results; every node holds every line before the start."""
    rng = knobs.rng(5)
    owned = Config(nodes=4, rows=200, block=20, home_shift=2)
    replicated = Config(nodes=4, rows=200, block=20, home_shift=2, replicated=True)
    spawn = scenario(rng, owned, 60)
    memory = {line: int(rng.integers(0, 1 << 32)) for line in range(owned.rows)}
    fetching = Cluster(owned, memory).run(spawn, task_id=gk.SPMM)
    assert sum(c["tx_rdma"] for c in fetching.counters) > 0  # the scenario does fetch when B is owned
    result = Cluster(replicated, memory).run(spawn, task_id=gk.SPMM)
    for name in ("tx_rdma", "rx_rdma", "tx_data", "rx_data", "served"):
        assert [c[name] for c in result.counters] == [0] * 4, name
    for name in ("tx_task", "rx_task", "spawned", "issued", "completed"):
        assert [c[name] for c in result.counters] == [c[name] for c in fetching.counters], name
    assert result.requests == [set()] * 4
    assert [sorted(map(gp.encode, tasks)) for tasks in result.issued] == [
        sorted(map(gp.encode, tasks)) for tasks in fetching.issued]
    assert all(Cluster(replicated, memory).node_memory(node) == memory for node in range(4))


def test_relu_matches_numpy_maximum():
    rng = knobs.rng(4)
    values = np.concatenate([rng.standard_normal(60).astype(np.float32),
                             np.array([0.0, -0.0, np.inf, -np.inf], np.float32)])
    out = [values.view(np.uint32).reshape(16, 4).copy()]
    task = gp.Packet(gp.TASK, task_id=gk.ACTIVATION, slots=tuple(gp.Item(row) for row in (0, 3, 7, 15)))
    result = gk.execute([[task]], {}, rows=16, features=4, out=out)[0].view(np.float32)
    expected = values.reshape(16, 4).copy()
    expected[[0, 3, 7, 15]] = np.maximum(expected[[0, 3, 7, 15]], np.float32(0.0))
    assert np.array_equal(result, expected)  # by value: -0 equals +0
    assert not np.signbit(result[[0, 3, 7, 15]]).any()  # ReLU leaves +0, never -0
    untouched = [row for row in range(16) if row not in (0, 3, 7, 15)]
    assert np.array_equal(result[untouched].view(np.uint32), values.reshape(16, 4)[untouched].view(np.uint32))


def test_responder_splitter_and_server_decisions():
    config = Config(nodes=4, rows=100, block=20, home_shift=1)  # row r -> node (r >> 1) & 3
    items = (gp.Item(2, 41, 5), gp.Item(8, 42, 6), gp.Item(4, 43, 7), gp.Item(10, 40, 8))  # owners 1, 0, 2, 1
    packet = gp.Packet(gp.TASK, task_id=2, dst=0, src=0, range=2, slots=items)
    local, owners = respond(packet, 0, config, from_network=False)
    assert (local, owners) == (0b0010, [1, 0, 2, 1])
    kernel_task, remote = split(packet, 0, config, local, owners)
    assert kernel_task.mask == 0b0010 and kernel_task.slots == (None, items[1], None, None)
    groups = [gp.decode(word) for word in remote]
    assert [(g.dst, g.mask, g.src, g.remote) for g in groups] == [(1, 0b1001, 0, 1), (2, 0b0100, 0, 0)]
    assert all(gp.checksum(word) == 0 for word in remote)
    assert respond(packet, 1, config, from_network=True) == "drop_misrouted"
    def verdict(index, item):
        slots = (item,) + (None,) * 3 if item is not None else (None,) * 4
        return respond(gp.Packet(gp.TASK, range=index, slots=slots), 0, config, from_network=False)

    assert verdict(3, gp.Item(1, 0)) == "drop_task_col"  # range 3 is lines 60..79
    assert verdict(3, None) == "drop_task_mask"
    assert verdict(3, gp.Item(100, 60)) == "drop_task_row"
    assert verdict(5, gp.Item(1, 60)) == "drop_task_range"  # 5 ranges: 0..4
    assert verdict(3, gp.Item(99, 79)) == (0, [1, None, None, None])
    # Range 4 belongs to node 0 (range_shift 0): lines 80..99.
    request = gp.Packet(gp.RDMA, dst=0, src=3, range=4, first=80, lines=20)
    served = serve(request, 0, config, {line: line * 3 for line in range(100)})
    assert [gp.decode(word).line for word in served] == list(range(80, 100))
    assert [gp.decode(word).last for word in served] == [0] * 19 + [1]
    assert gp.decode(served[5]).data == 85 * 3 and gp.decode(served[0]).dst == 3
    assert serve(request, 1, config, {}) == "drop_rdma_range"
    assert serve(gp.Packet(gp.RDMA, range=4, first=79, lines=2), 0, config, {}) == "drop_rdma_range"
    assert serve(gp.Packet(gp.RDMA, range=5, first=100, lines=1), 1, config, {}) == "drop_rdma_range"
    word = gp.encode(gp.Packet(gp.DATA, dst=0, src=1, range=3))
    assert classify(word, gp.DATA, 0, config) == "data"
    assert classify(word, gp.RDMA, 0, config) == "drop_type"
    assert classify(word ^ 1 << 300, gp.DATA, 0, config) == "drop_check"
    assert classify(word, gp.DATA, 2, config) == "drop_node"


def test_features_a_line_cannot_carry_are_refused():
    """A data line (448 bits) carries 1 to 14 32-bit words: more, none, or 64-bit words are a ValueError.

    With 15 features the model used to predict word 14 from B while its own ``serve`` sent the
    line without it (the issue's case: ``ones((40, 15))``, 2 nodes, ``home_shift=0``).
    """
    from golden.runtime.workload import sparse_dense_workload

    rng = knobs.rng(6)
    adjacency = sp.random(40, 40, density=0.1, random_state=np.random.RandomState(6), format="coo")
    for dense in (np.ones((40, 15), np.float32), np.ones((40, 0), np.float32), np.ones((40, 7)),
                  np.ones((40, 4), np.int64), np.ones(40, np.float32)):
        with pytest.raises(ValueError, match="words|32-bit|n x F"):
            sparse_dense_workload(adjacency, dense, nodes=2, home_shift=0)
    for features in (0, 15, 2.0, True):
        with pytest.raises(ValueError, match="features"):
            gk.execute([[]], {}, rows=4, features=features)
    # 14 words: every word the model predicts is a word serve() sends.
    dense = rng.standard_normal((40, 14)).astype(np.float32)
    workload = sparse_dense_workload(adjacency, dense, nodes=2, home_shift=0)
    config = workload.config
    owner = config.range_owner(0)
    served = serve(gp.Packet(gp.RDMA, dst=owner, src=1 - owner, range=0, first=0, lines=config.block), owner,
                   config, workload.memory)
    for word in served:
        line = gp.decode(word)
        assert np.array_equal(gk.line_words(line.data, 14), dense[line.line].view(np.uint32))


def test_refused_slots_are_skipped_and_counted():
    """Rows past ``rows``, columns past ``rows`` (kernels that read B), aggregation rows of another bank."""
    one = int(np.float32(1.0).view(np.uint32))
    memory = {line: gk.words_line([int(np.float32(line + 1).view(np.uint32))]) for line in range(8)}
    tasks = [
        gp.Packet(gp.TASK, task_id=gk.SPMM,
                  slots=(gp.Item(8, 0, 1), gp.Item(1, 8, 1), gp.Item(2, 1, 3), None)),
        gp.Packet(gp.TASK, task_id=gk.AGGREGATION,
                  slots=(gp.Item(1, 0, one), gp.Item(5, 2, one), gp.Item(1 << 23, 0, one),
                         gp.Item(7, 3, one))),
        gp.Packet(gp.TASK, task_id=gk.ACTIVATION, slots=(gp.Item(0, 1 << 20), gp.Item(9, 0), None, None)),
    ]
    errors = []
    out = gk.execute([tasks], memory, rows=8, features=1, errors=errors)[0]
    assert errors == [{"range_errors": 4, "bank_errors": 1}]
    expected = np.zeros((8, 1), np.uint32)
    expected[5] = np.float32(3.0).view(np.uint32)  # B[2] = 3.0
    expected[7] = np.float32(4.0).view(np.uint32)
    # The aggregation's drain replaced the whole memory: SpMM's row 2 (2 * 3) is gone, as in the RTL.
    assert np.array_equal(out, expected)


def test_aggregation_nan_and_infinity_are_canonical():
    """NaN results are the canonical quiet NaN 0x7FC00000 whatever their cause; infinities follow IEEE."""
    f32 = {"qnan-": 0xFFC00000, "snan": 0x7F800001, "payload": 0x7FC12345, "inf": 0x7F800000,
           "-inf": 0xFF800000, "one": 0x3F800000, "zero": 0}
    memory = {line: gk.words_line([f32[name]]) for line, name in enumerate(f32)}
    col = {name: line for line, name in enumerate(f32)}
    cases = [  # (weight, B line, expected bits)
        (f32["zero"], col["inf"], 0x7FC00000),  # 0 * inf (x86 gives the negative default NaN 0xFFC00000)
        (f32["one"], col["snan"], 0x7FC00000),  # a signalling NaN is quieted and loses its payload
        (f32["one"], col["payload"], 0x7FC00000),
        (f32["one"], col["qnan-"], 0x7FC00000),  # the sign of a NaN is not kept
        (f32["one"], col["inf"], 0x7F800000),
        (f32["one"], col["-inf"], 0xFF800000),
        (f32["payload"], col["one"], 0x7FC00000),  # a NaN weight
    ]
    rows = 4 * len(cases)
    tasks = [gp.Packet(gp.TASK, task_id=gk.AGGREGATION,
                       slots=(gp.Item(4 * index, col_, weight), None, None, None))
             for index, (weight, col_, _) in enumerate(cases)]
    # inf + -inf in row 1: the sum is NaN.
    for name in ("inf", "-inf"):
        tasks.append(gp.Packet(gp.TASK, task_id=gk.AGGREGATION,
                               slots=(None, gp.Item(1, col[name], f32["one"]), None, None)))
    out = gk.execute([tasks], memory, rows=rows, features=1)[0][:, 0]
    assert [int(out[4 * index]) for index in range(len(cases))] == [bits for _, _, bits in cases]
    assert int(out[1]) == 0x7FC00000  # inf + -inf
    # ReLU keeps the canonical NaN (its sign bit is 0) and zeroes -inf.
    relu = [gp.Packet(gp.TASK, task_id=gk.ACTIVATION, slots=(gp.Item(0), gp.Item(1), None, None)),
            gp.Packet(gp.TASK, task_id=gk.ACTIVATION, slots=(gp.Item(20), None, None, None))]
    again = gk.execute([relu], {}, rows=rows, features=1, out=[out[:, None]])[0][:, 0]
    assert [int(again[0]), int(again[1]), int(again[20])] == [0x7FC00000, 0x7FC00000, 0]
