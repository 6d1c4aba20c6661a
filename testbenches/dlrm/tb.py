"""Pieces the DLRM testbenches share. The embedding cache's bench (HBM model, drivers, golden LRU),
:class:`CacheTB`, is the host device's (:mod:`scripts.sim.devices.dlrm`), which ``bench_dlrm``
drives too; it is named here for the tests."""

from collections import OrderedDict

import numpy as np

from scripts.sim import knobs
from scripts.sim.devices.dlrm import BASE, LINE_BYTES, CacheTB, zipf_rows
from scripts.sim.runner import component_from_env, params_from_env
from scripts.sim.stream import StreamSink, StreamSource, never, random_pauses, stream_layout
from scripts.sim.tb import ClockedTB

__all__ = ["CacheTB", "zipf_rows", "LINE_BYTES", "BASE", "check_counters", "StalledTB", "ordered_dict_lru"]


def ordered_dict_lru(rows, *, sets, ways):
    """Hit flags of a per-set LRU of ``ways`` rows kept in ``OrderedDict`` (most recent last)."""
    cache = [OrderedDict() for _ in range(sets)]
    flags = []
    for row in (int(r) for r in rows):
        entries = cache[row % sets]
        hit = row in entries
        if hit:
            entries.move_to_end(row)
        else:
            if len(entries) == ways:
                entries.popitem(last=False)
            entries[row] = None
        flags.append(hit)
    return np.array(flags, dtype=bool)


def check_counters(dut, expected):
    """The DUT's counter outputs named in ``expected`` (a name-to-count dict) hold the golden counts."""
    counters = {name: int(getattr(dut, name).value) for name in expected}
    assert counters == expected, f"counters {counters} != golden {expected}; {knobs.describe()}"


class StalledTB(ClockedTB):
    """A DLRM stream unit's testbench: each stream it opens waits on a ``stall`` fraction of the
    cycles (a source's gaps, a sink's backpressure), from its own generator seeded by ``salt``.

    A subclass opens its streams (:meth:`stream_source`, :meth:`stream_sink`, one seed offset
    each), names its output ``sink`` with its scoreboard ``board``, the golden counters
    ``expected`` and a cycle bound (:meth:`bound`); :meth:`check` checks all three.
    """

    def __init__(self, dut, *, stall=0.0, salt=0):
        super().__init__(dut)
        self.component = component_from_env()
        self.params = params_from_env()
        self.lines = self.component.lines
        self.stall, self.salt = stall, salt

    def _pauses(self, offset):
        return random_pauses(knobs.rng(self.salt + offset), self.stall) if self.stall else never()

    def stream_source(self, port, offset):
        return StreamSource(self.dut, port, self.clock, stream_layout(self.component, port),
                            pause=self._pauses(offset))

    def stream_sink(self, port, offset):
        return StreamSink(self.dut, port, self.clock, stream_layout(self.component, port),
                          backpressure=self._pauses(offset))

    def bound(self):
        """The cycles the expected output may take to arrive."""
        raise NotImplementedError

    async def check(self):
        """Every expected output item within :meth:`bound` cycles, and the counters the golden's."""
        await self.expect_from(self.sink, self.board, cycles=self.bound())
        check_counters(self.dut, self.expected)
