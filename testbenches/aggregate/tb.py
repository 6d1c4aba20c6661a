"""The aggregation pipeline's testbench: clock, reset, the host driver and the golden checks.

The driver is :class:`scripts.sim.devices.aggregate.AggregationDevice` (the one the GCN demo uses);
this class adds stall patterns, graphs and packet streams for the tests, and the check of a
job's OUT bits and counters against :func:`golden.aggregate.execute`.
"""

import numpy as np

from golden.aggregate import GraphSpec, PacketFormat, execute, generate, issue_cycles, live_slots, spawn
from scripts.sim import knobs
from scripts.sim.devices.aggregate import AggregationDevice
from scripts.sim.runner import component_from_env, resolved_params_from_env
from scripts.sim.stream import never, random_pauses
from scripts.sim.tb import ClockedTB

__all__ = ["TB", "special_features", "small_graph"]


def special_features(rng, rows, features, *, specials=True):
    """Random binary32 B rows; with ``specials``, some NaN, infinities, subnormals and signed zeros."""
    values = (rng.standard_normal((rows, features)) * 10.0 ** rng.integers(-3, 4, (rows, features)))
    values = values.astype(np.float32)
    if specials and rows * features >= 8:
        picks = rng.choice(rows * features, 6, replace=False)
        flat = values.reshape(-1)
        flat[picks] = np.array([np.nan, np.inf, -np.inf, 1e-40, -0.0, 3e38], np.float32)
    return values


def small_graph(nodes, edges, seed, max_degree=None):
    """A seeded power-law graph (:func:`golden.aggregate.generate`) without self-loops."""
    default = min(nodes - 1, max(4, nodes // 4, 3 * edges // nodes + 1))
    spec = GraphSpec("test", nodes, edges, 0, 0, max_degree or default, False)
    return generate(spec, seed=seed)


class TB(ClockedTB):
    """Testbench of one ``aggregation_pipeline`` build."""

    def __init__(self, dut):
        super().__init__(dut)
        self.component = component_from_env()
        self.params = resolved_params_from_env()
        self.lanes, self.features = self.params["lanes"], self.params["features"]
        self.weighted, self.b_banks = self.params["weighted"], self.params["b_banks"]
        self.capacity_rows, self.capacity_cols = self.params["rows"], self.params["cols"]
        self.format = PacketFormat(self.lanes, self.params["row_bits"], self.params["col_bits"],
                                   self.weighted)
        self.device = AggregationDevice(dut, self.component, self.clock)
        assert self.component.hazard_window == _golden_window(), "RTL and golden hazard windows differ"

    def stall(self, idle, backpressure, salt):
        """Random valid gaps on both input streams and random backpressure on ``drain`` (30 %)."""
        self.device.packets.set_pause_generator(random_pauses(knobs.rng(salt + 1), 0.3) if idle else never())
        self.device.loads.set_pause_generator(random_pauses(knobs.rng(salt + 2), 0.3) if idle else never())
        self.device.drained.set_backpressure_generator(
            random_pauses(knobs.rng(salt + 3), 0.3) if backpressure else never())

    def spawn(self, adjacency):
        """The spawner's packets for this build (lanes, weighted, B banks, hazard window)."""
        return spawn(adjacency, lanes=self.lanes, weighted=self.weighted, b_banks=self.b_banks,
                     window=self.component.hazard_window)

    async def run_job(self, packets, features, n_rows, *, relu=False, what="job", check_stalls=False):
        """Load B, stream ``packets``, drain ``n_rows`` rows; check bits and counters against the golden.

        Returns the drained OUT (uint32) and the counters (deltas over this job).
        """
        before = self.device.counters()
        self.device.configure(n_rows, len(features))
        await self.device.wait_run()
        await self.device.load_b(features.view(np.uint32))
        self.device.transfer_cycles.clear()
        await self.device.send(self.format.encode(packets))
        out = await self.device.drain(n_rows, relu=relu)
        after = self.device.counters()
        counters = {name: (after[name] - before[name]) % (1 << 32) for name in after}
        expected, golden_counters = execute(packets, features, n_rows=n_rows, weighted=self.weighted,
                                            b_banks=self.b_banks)
        if relu:
            expected = np.where(np.signbit(expected), np.float32(0), expected)
        mismatch = np.argwhere(out != expected.view(np.uint32))
        if mismatch.size:
            row, feature = mismatch[0]
            raise AssertionError(
                f"{what} {self.params}: OUT[{row}, {feature}] = {out[row, feature]:#010x}, expected "
                f"{expected.view(np.uint32)[row, feature]:#010x} ({len(mismatch)} mismatches); "
                f"{knobs.describe()}")
        for name in ("packets", "nonzeros", "header_errors", "range_errors", "bank_errors"):
            register = {"packets": "packet_count", "nonzeros": "nonzero_count"}.get(name, name)
            assert counters[register] == getattr(golden_counters, name), (
                f"{what}: {register} = {counters[register]}, golden {getattr(golden_counters, name)}; "
                f"{knobs.describe()}")
        live, _ = live_slots(packets, n_rows=n_rows, n_cols=len(features), weighted=self.weighted,
                             b_banks=self.b_banks)
        times = issue_cycles(packets, window=self.component.hazard_window, live=live)
        model_stalls = int(times[-1] + 1 - len(packets)) if len(packets) else 0
        if check_stalls:
            assert counters["stall_cycles"] == model_stalls, (
                f"{what}: {counters['stall_cycles']} stall cycles, cycle model {model_stalls}; "
                f"{knobs.describe()}")
        else:
            assert counters["stall_cycles"] <= model_stalls, (counters, model_stalls)
        return out, counters


def _golden_window():
    from golden.aggregate import HAZARD_WINDOW

    return HAZARD_WINDOW
