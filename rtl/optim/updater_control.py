"""The updater kernel's control side: its AXI4-Lite registers, the run's state machine, its status.

Pieces of :class:`~rtl.optim.updater_kernel.UpdaterKernel`'s elaboration, added to the
kernel's own module (no block of their own, so the kernel's Verilog keeps one hierarchy).
"""

import types

from amaranth.hdl import Cat, Const, Mux, Signal

from .gradient_statistics import ACCUMULATOR_WIDTH
from .updater_datapath import any_of

__all__ = ["MODE_UPDATE", "MODE_STATISTICS", "STATUS_NONFINITE", "ERROR_READ", "ERROR_WRITE",
           "ERROR_READ_RESP_SHIFT", "ERROR_WRITE_RESP_SHIFT",
           "kernel_arguments", "kernel_status", "run_control", "drive_status"]

MODE_UPDATE, MODE_STATISTICS = 0, 1
STATUS_NONFINITE = 1 << 0
ERROR_READ, ERROR_WRITE = 1 << 0, 1 << 1
ERROR_READ_RESP_SHIFT, ERROR_WRITE_RESP_SHIFT = 8, 10
_SUM_WORDS = -(-ACCUMULATOR_WIDTH // 64)


# ---------------------------------------------------------------------- register map
def kernel_arguments(spec, buffers, data_width):
    """The argument registers ``(name, width, description)`` of a kernel of optimizer ``spec``.

    ``buffers`` names the tensors in device memory, each with a 64-bit address register.
    """
    kinds = {"param16": "16-bit copy", "grad": "gradient, in grad_format"}
    args = [(f"{name}_address", 64, f"byte address of {name} ({kinds.get(name, 'binary32')}), "
                                     f"{data_width // 8}-byte aligned")
            for name in buffers]
    args.append(("n", 32, "element count (0 to 2**32 - 1)"))
    args += [(name, 32, f"host scalar {name} (binary32 bits, golden.optim.step_scalars)")
             for name in spec.scalars]
    args += [("mode", 32, "0 update, 1 gradient statistics"),
             ("grad_format", 32, "gradient format: 0 f32, 1 f16, 2 bf16"),
             ("copy_format", 32, "16-bit parameter copy: 0 none, 1 f16, 2 bf16")]
    descriptions = {"first_step": "1 at SGD step 1 (the buffer becomes the gradient and is not read)",
                    "nesterov": "1 for Nesterov momentum"}
    args += [(flag, 32, descriptions[flag]) for flag in spec.flags]
    return args


def kernel_status():
    """The status registers ``(name, width, description)`` of the dense kernel."""
    status = [
        ("run_status", 32, "bit 0: a gradient element was NaN or Inf (update mode; sticky for the run)"),
        ("error", 32, "bit 0 read error, bit 1 write error (SLVERR/DECERR); bits 9:8 first read "
                      "response, bits 11:10 first write response"),
        ("cycles", 64, "clock cycles of the last run, start to done"),
        ("read_beats", 64, "AXI read data beats of the last run, all ports"),
        ("write_beats", 64, "AXI write data beats of the last run, all ports"),
        ("nan_count", 32, "statistics mode: NaN gradient elements"),
        ("inf_count", 32, "statistics mode: infinite gradient elements"),
    ]
    for word in range(_SUM_WORDS):
        low, high = 64 * word, min(64 * word + 63, ACCUMULATOR_WIDTH - 1)
        status.append((f"sum_of_squares_{word}", 64,
                       f"statistics mode: bits {low}..{high} of the exact sum of squares in units of "
                       f"2**-298 ({ACCUMULATOR_WIDTH} bits)"))
    return status


# ---------------------------------------------------------------------- run control
def _ceil_shift(value, count):
    shift = count.bit_length() - 1
    return (value + (count - 1)) >> shift


def _tail_strobe(n, elements_per_beat, bytes_per_element, data_width):
    tail = n[:elements_per_beat.bit_length() - 1]
    ones = Const(-1, data_width // 8)
    return Mux(tail == 0, ones, (Const(1, data_width // 8 + 1) << (tail * bytes_per_element)) - 1)


def _tail_mask(lane_tail, lanes):
    return Mux(lane_tail == 0, Const(-1, lanes), (Const(1, lanes + 1) << lane_tail) - 1)


def run_control(m, control, stats, *, lanes, data_width):
    """Add the run's state machine, IDLE -> LOAD (latch counts) -> RUN -> [DRAIN] -> IDLE, to ``m``.

    At ``ap_start`` it latches the run's counts from ``n``: lane vectors (``transfers``, with
    the last one's lane mask ``last_mask``), 32- and 16-bit beats and their tail strobes. It
    drives ``control``'s ``done``, ``ready`` and ``idle`` and ``stats.drain``.

    Returns
    -------
    types.SimpleNamespace
        The run's signals: ``args`` and ``control`` (the register block), ``n``,
        ``statistics_mode``, ``transfers``, ``last_mask``, ``beats32``, ``beats16``,
        ``strobe32``, ``strobe16``, ``begin`` (a one-cycle pulse that starts every sub-block),
        ``running`` and ``finished`` (to be driven by the caller: nothing of the run is left).
    """
    dw = data_width
    per_beat32, per_beat16 = dw // 32, dw // 16
    args = control.args
    n = args.n
    statistics_mode = args.mode[0]
    transfers = Signal(32)
    beats32, beats16 = Signal(32), Signal(32)
    strobe32, strobe16 = Signal(dw // 8), Signal(dw // 8)
    last_mask = Signal(lanes)
    begin = Signal()        # one-cycle pulse that starts every sub-block
    running = Signal()
    finished = Signal()

    power_of_two = not lanes & (lanes - 1)
    lane_tail = n[:lanes.bit_length() - 1] if lanes > 1 else Const(0, 1)
    # Run states, compared rather than switched on (a six-way Verilog case would be incomplete).
    # Any other lane count divides n by lanes first, in divide_state (power-of-two kernels
    # have no such state, so their Verilog is as before).
    idle_state, begin_state, run_state, check_state, drain_state, done_state = range(6)
    divide_state = 6
    state = Signal(range(6 if power_of_two else 7))
    m.d.comb += [begin.eq(state == begin_state),
                 running.eq((state == run_state) | (state == check_state) | (state == drain_state)),
                 control.done.eq(state == done_state), control.ready.eq(state == done_state)]
    loads = [beats32.eq(_ceil_shift(n, per_beat32)),
             beats16.eq(_ceil_shift(n, per_beat16)),
             strobe32.eq(_tail_strobe(n, per_beat32, 4, dw)),
             strobe16.eq(_tail_strobe(n, per_beat16, 2, dw))]
    if not power_of_two:
        # Restoring division, one quotient bit per cycle: the dividend shifts out of the
        # top of `transfers` while the quotient shifts in at the bottom; 32 steps, then a
        # cycle that rounds up and sets the last lane vector's mask.
        remainder = Signal(range(2 * lanes))
        steps = Signal(range(33))
        trial = Signal(range(2 * lanes))
        m.d.comb += trial.eq(Cat(transfers[31], remainder))
    with m.If(state == idle_state):
        with m.If(control.start):
            if power_of_two:
                m.d.sync += [state.eq(begin_state), transfers.eq(_ceil_shift(n, lanes)), *loads,
                             last_mask.eq(_tail_mask(lane_tail, lanes))]
            else:
                m.d.sync += [state.eq(divide_state), transfers.eq(n), remainder.eq(0), steps.eq(0),
                             *loads]
    if not power_of_two:
        with m.Elif(state == divide_state):
            with m.If(steps == 32):
                m.d.sync += [transfers.eq(transfers + (remainder != 0)),
                             last_mask.eq(_tail_mask(remainder, lanes)), state.eq(begin_state)]
            with m.Else():
                bit = trial >= lanes
                m.d.sync += [remainder.eq(Mux(bit, trial - lanes, trial)),
                             transfers.eq(Cat(bit, transfers[:31])), steps.eq(steps + 1)]
    with m.Elif(state == begin_state):
        m.d.sync += state.eq(run_state)
    with m.Elif(state == run_state):
        with m.If(finished):
            m.d.sync += state.eq(check_state)
    with m.Elif(state == check_state):
        m.d.comb += stats.drain.eq(statistics_mode)
        m.d.sync += state.eq(Mux(statistics_mode, drain_state, done_state))
    with m.Elif(state == drain_state):
        with m.If(stats.done):
            m.d.sync += state.eq(done_state)
    with m.Else():
        m.d.sync += state.eq(idle_state)
    # The statistics unit zeroes its buckets after a reset: no start until it has.
    m.d.comb += control.idle.eq(~running & ~begin & ~stats.busy if power_of_two else
                                ~running & ~begin & ~stats.busy & (state != divide_state))
    return types.SimpleNamespace(args=args, control=control, n=n, statistics_mode=statistics_mode,
                                 transfers=transfers, last_mask=last_mask, beats32=beats32,
                                 beats16=beats16, strobe32=strobe32, strobe16=strobe16, begin=begin,
                                 running=running, finished=finished)


# ---------------------------------------------------------------------- status
def drive_status(m, status, *, core, stats, update, memory_ports, errors, error_flags, counters):
    """Drive the status registers ``status`` from the run's results.

    ``errors`` holds the memory ports' ``"read"`` and ``"write"`` error flags, ``error_flags``
    the gradient source's bits of ``error``, ``counters`` the ``cycles``, ``read_beats`` and
    ``write_beats`` of the run.
    """
    def first_resp(kind):
        ports = list(memory_ports.values())
        resp = Const(0, 2)
        for port in reversed(ports):
            resp = Mux(getattr(port, f"{kind}_error"), getattr(port, f"{kind}_resp"), resp)
        return resp

    read_beats, write_beats, cycles = counters
    m.d.comb += [
        status.run_status.eq(core.nonfinite & update),
        status.error.eq(Cat(any_of(errors["read"]), any_of(errors["write"]), Const(0, 6),
                            first_resp("read"), first_resp("write")) | error_flags),
        status.cycles.eq(cycles), status.read_beats.eq(read_beats), status.write_beats.eq(write_beats),
        status.nan_count.eq(stats.nan_count), status.inf_count.eq(stats.inf_count),
    ]
    for word in range(_SUM_WORDS):
        register = getattr(status, f"sum_of_squares_{word}")
        m.d.comb += register.eq(stats.accumulator[64 * word:64 * word + 64])
