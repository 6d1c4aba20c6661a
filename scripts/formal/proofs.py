"""Every proof of the formal flow, by name: its harness, mode, depth and suite.

A proof is named ``<block>.<what>`` (``skid_buffer.tokens``); ``neartrain prove BLOCK`` runs
the proofs of a block, and ``docs/formal.md`` lists them all (``neartrain prove --record``).
Proofs marked ``slow`` (deep bounds, k-induction, big blocks) run only in ``make test-full``
and ``make prove``; the others are part of ``make test``.

Every registered block has a stream-rule proof (``<block>.streams``) or an entry in
:data:`NOT_PROVED` with the reason; :func:`check_coverage` holds that. A stream-rule proof
passes only when every output stream of the block stalls within its bound (its cover task),
so each block's bound comes from the step at which its outputs first stall.
"""

from dataclasses import dataclass, field
from typing import Callable

from amaranth.asserts import AnyConst, Initial
from amaranth.hdl import Assume, Mux

from .blocks import axi_reader_harness, axi_writer_harness, burst_planner_harness, credit_harness
from .credited_queue import credited_queue_harness
from .harnesses import queue_harness, unit_sequence_harness
from .streams import stream_rules_harness

__all__ = ["Proof", "PROOFS", "NOT_PROVED", "proofs_of", "check_coverage"]


@dataclass(frozen=True)
class Proof:
    """One SBY run.

    Attributes
    ----------
    name : str
        ``<block>.<what>``, unique.
    block : str
        The registered block (or ``credited_pipeline``, a helper of several blocks).
    claim : str
        The properties, in words, for the docs table.
    build : callable
        Returns the harness (a fresh one per call).
    depth : int
        Bound of the check, or ``k`` of the induction.
    mode : str
        ``"bmc"``, ``"prove"`` or ``"cover"``.
    slow : bool
        Only in ``make test-full`` and ``make prove``.
    expect : str
        The verdict the suite requires: ``"pass"``, or ``"unknown"`` for an induction known
        not to close (kept to show it, and to notice when a stronger harness makes it close).
    params : dict or None
        For a stream-rule proof, the block's parameters (``{}``: its defaults); its harness
        covers every output stream of the block built with them. None for other proofs.
    cover_depth : int or None
        Steps of the cover task beside the proof (None: ``depth - 1``, see
        :func:`.flow.run_proof`).
    """

    name: str
    block: str
    claim: str
    build: Callable = field(repr=False)
    depth: int = 12
    mode: str = "bmc"
    slow: bool = False
    expect: str = "pass"
    params: dict = None
    cover_depth: int = None


def _block(name, **params):
    from rtl.registry import get_block

    return get_block(name).build(params)


def _counted(name, p, q, word):
    """A counted converter in one run: ``start`` in the first cycle only, with a free ``count`` < 64.

    The gearbox counts words; the divisible converter counts narrow transfers, so its unit
    is the narrow side's width.
    """
    if name == "counted_gearbox":
        component = _block(name, input_width=p * word, output_width=q * word, word_width=word)
    else:
        component = _block(name, input_width=p * word, output_width=q * word)
        word, p, q = min(p, q) * word, p // min(p, q), q // min(p, q)
    count = AnyConst(6)

    def environment(m, dut):
        m.d.comb += [dut.start.eq(Initial()), dut.count.eq(count),
                     Assume(~Initial() | ~dut.i.valid, "no input offered with start (documented)")]
        if name == "counted_width_converter":
            m.d.comb += Assume(count != 0, "a run of at least one transfer")

    return unit_sequence_harness(component, unit=word, total=count, keep=(component.start, component.count),
                                 environment=environment,
                                 in_units=lambda taken: Mux(count - taken < p, count - taken, p))


def _no_cancel(m, dut):
    # A cancel drops what is offered, as documented; the rules hold between cancels.
    m.d.comb += Assume(~dut.cancel, "no cancel")


def _start_first(m, dut):
    # `start` empties the converter: documented as "not while transfers flow".
    m.d.comb += [Assume(~dut.start | Initial(), "start only in the first cycle"),
                 Assume(~dut.start | ~dut.i.valid, "no input offered with start")]


# Blocks whose other inputs need the documented environment for their stream rules to hold.
ENVIRONMENTS = {"counted_gearbox": _start_first, "counted_width_converter": _start_first,
                "axi_burst_reader": _no_cancel}

# Registered blocks without a stream-rule proof, and why (never silently skipped).
_NO_STREAM = "no output stream (its outputs are AXI/AXI-Lite ports or plain signals)"
NOT_PROVED = {
    "uart_tx": _NO_STREAM,
    "axi_burst_writer": _NO_STREAM,
    "axi_lite_control": _NO_STREAM,
    "gradient_statistics": _NO_STREAM,
    "adam_updater": _NO_STREAM,
    "sgd_updater": _NO_STREAM,
    "adagrad_updater": _NO_STREAM,
    "aggregation_kernel": _NO_STREAM,
    "topk_dram_scatter": _NO_STREAM,
    "topk_updater": _NO_STREAM,
    "runtime_axi_lite_decoder": _NO_STREAM,
}
_SLOW = "the solver did not finish depth 8 within 60 s"
NOT_PROVED.update({
    "runtime_data_packager": _SLOW,
    "runtime_task_responder": _SLOW,
    "runtime_switch": _SLOW,
    "runtime_cluster": _SLOW,
    "memory_port": _SLOW,
    "gcu_cluster": _SLOW + " (it holds the runtime switch; the GCU's own port is proved: gcu.streams)",
    "ring_cluster": "not run: it holds the runtime switch, whose own proof did not finish depth 8 "
                    "within 60 s (the ring node's port is proved: ring_node.streams)",
    "tiered_cluster": "not run: it holds three or more runtime switches, whose own proof did not finish "
                      "depth 8 within 60 s",
    "sliced_gcu_cluster": "not run: it holds the runtime switch, whose own proof did not finish depth 8 "
                          "within 60 s (each slice is an unchanged GCU, whose port is proved: gcu.streams)",
    "dedupe_unit": "the solver did not finish depth 8 within 200 s (its CAM compares every entry)",
    "embedding_bag": "not run: it holds the dedupe unit, whose own proof did not finish depth 8 within "
                     "200 s, and its o is valid only after the cache's sweep, an HBM read, the fan-out and a "
                     "flush (loss_reduction.streams and embedding_cache.streams stand in for it)",
    "embedding_bag_update": "not run: its one stream, i, goes into the loss reduction, whose o waits on a "
                            "row read from HBM through the cache and written back before its next sum "
                            "(loss_reduction.streams and embedding_cache.streams stand in for it)",
    "topk_axi_decompressor": "its o is the o of the topk_chunk_decompressor inside it, whose input is the "
                             "axi_burst_reader's data stream: topk_chunk_decompressor.streams and "
                             "axi_burst_reader.streams stand in for it (at 32-element chunks its own o did "
                             "not stall within 7 steps, and the solver did not finish step 8 in 150 s: "
                             "the AXI read comes first)",
    "updater_core": "its o is valid 143 cycles (adam) after its first input, beyond any practical depth "
                    "(no stall within 7 steps): credited_pipeline.credits[...] stand in for it (the same "
                    "credited FIFO drives o; their stalls are covered)",
    "topk_fused_updater_core": "its o is the o of the updater_core inside it (see updater_core; its input "
                               "joins the topk_chunk_decompressor's o with the state stream, and a join "
                               "of two streams that keep the rules keeps them): credited_pipeline.credits"
                               "[...] and topk_chunk_decompressor.streams stand in for it",
    "parameter_store": "not run: its o is the data stream of the axi_burst_reader inside it "
                       "(axi_burst_reader.streams stands in for it) beside the read's leaf mask, partition "
                       "and chunk, which change only between reads or at a handshake",
    "parameter_update": "no output stream (`updated` is a valid-only pulse; the parameters leave "
                        "through a read port)",
})

# Stream-rule proofs in the fast suite; the others are slow (measured: see docs/formal.md).
_FAST_STREAMS = {"skid_buffer", "stream_fifo", "width_converter", "axi_burst_planner", "uart_rx",
                 "barrier_table", "chunk_sequencer"}
# The bound of a stream-rule proof. Each harness covers ``valid & ~ready`` on every output
# stream, and the proof fails unless every cover is reached by step ``depth - 2``: the rules
# are checked in the cycle after a stall, which must be inside the bound. Blocks whose
# outputs first stall later get a deeper bound, from that step (docs/formal.md, covered).
_STREAM_DEPTH = 8
_STREAM_DEPTHS = {"fp_mul": 9, "fp_fma": 13, "gcu": 9, "region_unit": 10, "ring_node": 13, "axpby": 19,
                  "runtime_node": 12, "block_fp_ws_array": 30,
                  "block_fp_array": 32}
# Blocks proved at smaller parameters than their defaults, and why: at the defaults, their
# first output is beyond a depth the solver finishes. The stream rules are control logic
# that these parameters only narrow or shorten (the handshake code is the same).
_CLEAR = "at 1024 elements, the scatter buffers are cleared for 64 cycles after reset (i.ready low)"
_STREAM_PARAMS = {
    "fp_div": ({"fmt": "bf16", "bits_per_stage": 2}, 11,
               "the f32 divider's output does not stall within 19 steps (one quotient bit per stage)"),
    "fp_sqrt": ({"fmt": "bf16", "bits_per_stage": 2}, 11,
                "the f32 square root's output does not stall within 19 steps (one root bit per stage)"),
    "aggregation_pipeline": ({"rows": 8, "cols": 8, "features": 1}, 8,
                             "at 64 rows, the clear sweep after reset keeps drain idle beyond 19 steps"),
    "embedding_cache": ({"sets": 2}, 12, "at 64 sets, the sweep after reset outlasts any practical depth"),
    "uart_rx": ({"divisor": 4}, 44, "a byte comes out 9.5 bit times after its start bit: 2 000 cycles "
                                    "at the default 217 per bit, 41 at the least divisor"),
    "topk_scatter": ({"lanes": 2, "banks": 4, "out_lanes": 4, "chunk_size": 16, "queue_depth": 2}, 14,
                     _CLEAR + "; at 8 lanes and 16 banks the solver did not finish step 7 in 20 min, so "
                     "the lanes, banks and queues are narrowed too"),
    "topk_chunk_decompressor": ({"chunk_size": 32}, 8, _CLEAR),
    "reduction_unit": ({"leaves": 2, "chunks": 1, "partitions": 2, "slots": 1}, 25,
                       "a slot is reduced once every leaf sent every chunk: 64 lines at the defaults; "
                       "o first stalls at step 23 even so"),
}
# The systolic arrays at int8 elements: the f16 datapath's first product is too deep. The
# arrays are 2x2 already by default; int8 takes the same command and handshake logic.
_STREAM_PARAMS.update({name: ({"element": "int8"}, depth, "at f16, c does not stall within 7 steps "
                                                 "(os_array: within 19)")
                       for name, depth in (("os_array", 11), ("ws_array", 11), ("tensor_array", 11),
                                           ("sparse_tensor_array", 11), ("tiled_gemm", 13))})
_STREAM_CLAIM = "stream rules on every output stream (inputs assumed to keep them)"


def _stream_setup(name):
    """``(params, depth, claim)`` of the stream-rule proof of block ``name``."""
    params, depth, why = _STREAM_PARAMS.get(name, ({}, _STREAM_DEPTHS.get(name, _STREAM_DEPTH), ""))
    claim = _STREAM_CLAIM
    if params:
        claim += f"; at {', '.join(f'{key}={value}' for key, value in params.items())}: {why}"
    return params, depth, claim


def _stream_proof(name):
    environment = ENVIRONMENTS.get(name)
    params, depth, claim = _stream_setup(name)
    return Proof(f"{name}.streams", name, claim,
                 lambda: stream_rules_harness(_block(name, **params), environment=environment),
                 depth=depth, slow=name not in _FAST_STREAMS, params=params)


# Blocks whose stream rules are also proved for all time by k-induction (slow suite); the rules
# are inductive on their own, so these close at a small k.
_INDUCTION = ("skid_buffer", "stream_fifo", "width_converter", "counted_gearbox", "counted_width_converter",
              "axi_burst_planner", "axi_burst_reader", "uart_rx", "axpby")


def _induction_proof(name):
    environment = ENVIRONMENTS.get(name)
    params, depth, _claim = _stream_setup(name)
    # The rules close at a small k; the cover task goes as deep as the block's bounded proof.
    return Proof(f"{name}.streams-induction", name, "stream rules on every output stream, for all time",
                 lambda: stream_rules_harness(_block(name, **params), environment=environment),
                 depth=_STREAM_DEPTH, mode="prove", slow=True, params=params, cover_depth=depth - 1)


def _queues():
    yield Proof("skid_buffer.tokens", "skid_buffer",
                "tracked token: in order, none lost or duplicated; holds <= 2; i.ready exactly while room; "
                "o.valid exactly while holding",
                lambda: queue_harness(_block("skid_buffer", width=4), capacity=2), depth=12)
    yield Proof("skid_buffer.tokens-deep", "skid_buffer", "as skid_buffer.tokens, deeper",
                lambda: queue_harness(_block("skid_buffer", width=4), capacity=2), depth=24, slow=True)
    for depth, slow, bound in ((2, False, 12), (4, False, 12), (16, True, 20)):
        def build(depth=depth):
            fifo = _block("stream_fifo", width=4, depth=depth)
            return queue_harness(fifo, capacity=depth, level=fifo.level, refill=True, valid_when_held=False)
        yield Proof(f"stream_fifo.tokens[depth={depth}]", "stream_fifo",
                    "tracked token; level == transfers held <= depth; i.ready low while full, else low for "
                    "at most one cycle (output register refill)", build, depth=bound, slow=slow)


def _byte_unit(input_width, output_width, element_width):
    """The unit the byte-sequence check follows: a byte, or for the 1:16 gather of 1024 bits
    (which the solver does not finish byte by byte) a whole element, which implies it since
    the converter moves whole elements, little-endian on both sides."""
    return element_width if output_width // input_width >= 8 else 8


def _converters():
    # Small widths of the same ratios in the fast suite; the widths of the tests are slow.
    for (a, b, e), slow in (((32, 32, 8), False), ((32, 8, 8), False), ((8, 32, 8), False),
                            ((512, 512, 32), True), ((512, 128, 32), True), ((128, 512, 32), True),
                            ((512, 32, 32), True), ((64, 1024, 32), True)):
        yield Proof(f"width_converter.bytes[{a}->{b}]", "width_converter",
                    "the output byte sequence is the input byte sequence",
                    lambda a=a, b=b, e=e: unit_sequence_harness(
                        _block("width_converter", input_width=a, output_width=b, element_width=e),
                        unit=_byte_unit(a, b, e)),
                    # A gather of 16 needs 17 cycles before its first output.
                    depth=18 if b // a >= 8 else 10, slow=slow)
    fast = {(2, 3, 8), (3, 2, 8), (1, 3, 8)}
    for name, configs in (("counted_gearbox", [(2, 3, 8), (3, 2, 8), (2, 3, 32), (3, 2, 32), (4, 6, 16),
                                                (6, 4, 16), (4, 5, 32), (5, 4, 32), (1, 3, 32), (3, 3, 8)]),
                          ("counted_width_converter", [(1, 3, 8), (2, 6, 32), (6, 2, 32), (2, 8, 16),
                                                        (8, 2, 16), (4, 1, 32), (1, 3, 32)])):
        for p, q, word in configs:
            yield Proof(f"{name}.words[{p}x{word}->{q}x{word}]", name,
                        "the words out are the run's words in, in order; nothing taken beyond count",
                        lambda name=name, p=p, q=q, word=word: _counted(name, p, q, word),
                        depth=12, slow=(p, q, word) not in fast)


def _planners():
    # A fifth True sets back_to_back (label -B): a command also taken as the final burst leaves.
    names = ("address_width", "data_width", "max_burst", "length_width", "back_to_back")
    for params, slow in (((13, 256, 16, 9), False), ((12, 1024, 5, 7), False), ((64, 512, 64, 32), False),
                         ((12, 8, 256, 13), True), ((64, 64, 256, 32), True), ((32, 1024, 1, 16), True),
                         ((12, 1024, 5, 7, True), True), ((64, 512, 64, 32, True), True)):
        kwargs = dict(zip(names, params, strict=False))  # back_to_back only where given
        label = "A{address_width}-D{data_width}-M{max_burst}-L{length_width}".format(**kwargs) + (
            "-B" if kwargs.get("back_to_back") else "")
        claim = ("bursts cover each command once, in order; 1..max_burst beats; no 4 KB crossing; "
                 "final on the last; busy and burst.valid exactly while uncovered")
        yield Proof(f"axi_burst_planner.plan[{label}]", "axi_burst_planner", claim,
                    lambda kwargs=kwargs: burst_planner_harness(**kwargs), depth=12, slow=slow)
    yield Proof("axi_burst_planner.plan-induction", "axi_burst_planner",
                "the plan properties, by k-induction",
                lambda: burst_planner_harness(address_width=13, data_width=256, max_burst=16, length_width=9),
                depth=4, mode="prove", slow=True, expect="unknown")


def _dma():
    params = dict(address_width=16, data_width=32, id_width=1, max_burst=4, max_outstanding=2, length_width=6)
    reader = ("AR held until ready, payload stable; arlen + 1 <= max_burst; no 4 KB crossing; R never "
              "refused (credits); <= max_outstanding bursts in flight")
    writer = ("AW and W held until ready, payload stable; awlen + 1 <= max_burst; no 4 KB crossing; wlast on "
              "the awlen + 1-th beat; <= max_outstanding bursts await B")
    # The deep bound is as deep as the solver finishes within `make prove`'s timeout: the
    # writer's steps 12 to 14 took 37, 72 and 172 s, and its step 15 more than 8 min.
    for block, harness, claim, deep in (("axi_burst_reader", axi_reader_harness, reader, 16),
                                        ("axi_burst_writer", axi_writer_harness, writer, 14)):
        yield Proof(f"{block}.axi", block, claim, lambda harness=harness: harness(**params), depth=10)
        yield Proof(f"{block}.axi-deep", block, claim, lambda harness=harness: harness(**params),
                    depth=deep, slow=True)


def _credits():
    for latency, slow in ((1, False), (3, False), (8, True)):
        yield Proof(f"credited_pipeline.credits[latency={latency}]", "credited_pipeline",
                    "credits never under- or overflow (no result dropped or invented); i.ready exactly "
                    "while a credit is left", lambda latency=latency: credit_harness(latency=latency),
                    depth=12 if not slow else 16, slow=slow)
    # The runtime's credited queues (switch input buffers, network receive queues).
    for depth, lag, slow in ((2, 1, False), (2, 0, False), (4, 1, True)):
        yield Proof(f"runtime_queue.credits[depth={depth},lag={lag}]", "runtime_queue",
                    "a sender keeping to its credits never raises the credited queue's overflow flag; "
                    "its write is never refused; level <= depth",
                    lambda depth=depth, lag=lag: credited_queue_harness(depth=depth, lag=lag),
                    depth=16, slow=slow)
    yield Proof("runtime_queue.credits-cover", "runtime_queue", "not vacuous: the sender spends every credit",
                lambda: credited_queue_harness(depth=2, lag=1), depth=16, mode="cover")


def _all():
    from rtl.registry import blocks

    proofs = [_stream_proof(name) for name in blocks() if name not in NOT_PROVED]
    proofs += [_induction_proof(name) for name in _INDUCTION]
    proofs += [*_queues(), *_converters(), *_planners(), *_dma(), *_credits()]
    return {proof.name: proof for proof in proofs}


PROOFS = {}


def proofs_of(selection=None, *, slow=True):
    """The proofs whose name or block is in ``selection`` (all when None), fast ones only unless ``slow``."""
    if not PROOFS:
        PROOFS.update(_all())
    chosen = [proof for proof in PROOFS.values()
              if (selection is None or proof.block in selection or proof.name in selection)
              and (slow or not proof.slow)]
    return chosen


def check_coverage():
    """The registered blocks with neither a stream-rule proof nor a reason in :data:`NOT_PROVED`."""
    from rtl.registry import blocks

    proofs_of()
    return [name for name in blocks()
            if f"{name}.streams" not in PROOFS and name not in NOT_PROVED]
