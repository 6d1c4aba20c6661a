"""The packet codec: golden.runtime.packet against an independent byte-level reading of the packet.

No simulation. That ``rtl.net.packet`` states the same layout is checked in
``testbenches/test_design_constants.py`` (section ``# runtime``).
"""

import functools
import operator

from golden.runtime import packet as golden
from scripts.sim import knobs


def _random_packet(rng):
    ptype = int(rng.integers(0, 3))
    common = {"task_id": int(rng.integers(0, 7)), "dst": int(rng.integers(0, 16)),
              "src": int(rng.integers(0, 16)), "range": int(rng.integers(0, 1024)),
              "remote": int(rng.integers(0, 2))}
    if ptype == golden.TASK:
        slots = tuple(golden.Item(int(rng.integers(0, 1 << 24)), int(rng.integers(0, 1 << 24)),
                                  int(rng.integers(0, 1 << 32))) if rng.random() < 0.7 else None
                      for _ in range(golden.ITEMS))
        return golden.Packet(golden.TASK, slots=slots, **common)
    if ptype == golden.RDMA:
        return golden.Packet(golden.RDMA, first=int(rng.integers(0, 1 << 24)),
                             lines=int(rng.integers(0, 256)), **common)
    return golden.Packet(golden.DATA, line=int(rng.integers(0, 1 << 24)), last=int(rng.integers(0, 2)),
                         data=int(rng.integers(0, 1 << 62)) << 380 | int(rng.integers(0, 1 << 62)), **common)


def _bytes_xor(word):
    return functools.reduce(operator.xor, word.to_bytes(64, "little"), 0)


def test_encode_decode_round_trip_and_seal():
    rng = knobs.rng(1)
    for _ in range(knobs.vectors(2000)):
        packet = _random_packet(rng)
        word = golden.encode(packet)
        assert 0 <= word < 1 << 512
        assert _bytes_xor(word) == 0, knobs.describe()
        decoded = golden.decode(word)
        again = golden.encode(decoded)
        assert again == word, knobs.describe()
        # Field positions read straight from the bytes, independently of the codec.
        assert word & 3 == packet.ptype and (word >> 13) & 0x3FF == packet.range
        if packet.ptype == golden.TASK:
            mask = sum(1 << slot for slot, item in enumerate(packet.slots) if item is not None)
            assert (word >> 32) & 0xF == mask
            for slot, item in enumerate(packet.slots):
                if item is not None:
                    base = 64 + 80 * slot
                    assert ((word >> base) & 0xFFFFFF, (word >> (base + 24)) & 0xFFFFFF,
                            (word >> (base + 48)) & 0xFFFFFFFF) == (item.row, item.col, item.value)


def test_checksum_catches_every_single_bit_error():
    rng = knobs.rng(2)
    word = golden.encode(_random_packet(rng))
    for bit in range(512):
        assert golden.checksum(word ^ (1 << bit)) != 0
    for _ in range(50):
        assert golden.checksum(golden.seal(int(rng.integers(0, 1 << 62)) << 100)) == 0
