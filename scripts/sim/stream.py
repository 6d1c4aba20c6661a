"""cocotb drivers and monitors for ``amaranth.lib.stream`` ports.

Amaranth flattens a stream port ``x`` into the Verilog ports ``x__payload``,
``x__valid`` and ``x__ready``; a structured payload becomes one flat vector whose fields
sit at the offsets of its ``data.Layout``. :class:`StreamSource` drives such a port and
:class:`StreamSink` consumes one, in the style of cocotbext-axi's stream classes:

* the source keeps ``valid`` raised, with the payload stable, until the transfer, and
  inserts idle cycles only between transfers, as chosen by an idle generator;
* the sink drives ``ready`` from a backpressure generator (True means "not ready").

A stream declared ``always_ready=True`` (a valid-only event) has no ``__ready`` port: every
cycle with ``valid`` is a transfer. Both classes find this out from the top level and then
neither read nor drive ``ready`` (a sink ignores its backpressure generator).

Payloads are Python ints, or dicts (nested for nested layouts) packed with
:func:`pack` and unpacked with :func:`unpack` against the component's own layout.
"""

import itertools
from collections import deque

import cocotb
from amaranth.hdl import Shape
from amaranth.lib import data
from cocotb.triggers import Event, RisingEdge

__all__ = ["pack", "unpack", "StreamSource", "StreamSink", "random_pauses", "never", "stream_layout",
           "ready_port"]


class _AlwaysReady:
    """The ``ready`` of an ``always_ready`` stream: reads 1, and writes to it are ignored."""

    @property
    def value(self):
        return 1

    @value.setter
    def value(self, _value):
        pass


def ready_port(dut, name):
    """``<name>__ready`` of ``dut``, or a stand-in that reads 1 for an ``always_ready`` stream (no port)."""
    try:
        return getattr(dut, f"{name}__ready")
    except AttributeError:
        return _AlwaysReady()


def pack(layout, value):
    """Pack ``value`` (int, dict of fields, or list of array elements) into an int for ``layout``."""
    if isinstance(value, int):
        return value
    if isinstance(layout, data.StructLayout):
        word = 0
        for name, field in layout:
            if name in value:
                inner = pack(field.shape, value[name])
                word |= (inner & ((1 << field.width) - 1)) << field.offset
        return word
    if isinstance(layout, data.ArrayLayout):
        width = Shape.cast(layout.elem_shape).width
        word = 0
        for index, element in enumerate(value):
            word |= (pack(layout.elem_shape, element) & ((1 << width) - 1)) << (index * width)
        return word
    raise TypeError(f"cannot pack {value!r} into {layout!r}")


def unpack(layout, word):
    """Unpack an int into a dict (struct) or list (array) following ``layout``; plain shapes stay ints."""
    if isinstance(layout, data.StructLayout):
        return {name: unpack(field.shape, (word >> field.offset) & ((1 << field.width) - 1))
                for name, field in layout}
    if isinstance(layout, data.ArrayLayout):
        width = Shape.cast(layout.elem_shape).width
        mask = (1 << width) - 1
        return [unpack(layout.elem_shape, (word >> (index * width)) & mask) for index in range(layout.length)]
    return word


def stream_layout(component, port):
    """The payload shape of stream ``port`` of an Amaranth ``component`` (from its signature).

    A ``data.Struct`` class comes back as its layout, which :func:`pack` and :func:`unpack` read.
    """
    shape = component.signature.members[port].signature.members["payload"].shape
    if isinstance(shape, type) and issubclass(shape, data.View):
        return data.Layout.cast(shape)
    return shape


def never():
    """A pause generator that never pauses: full rate."""
    return itertools.repeat(False)


def random_pauses(rng, probability):
    """A pause generator that pauses each cycle with ``probability``, from a NumPy generator."""
    while True:
        yield bool(rng.random() < probability)


class _StreamEnd:
    """What a source and a sink of the stream port ``name`` share: its signals, clock and layout."""

    def __init__(self, dut, name, clock, layout):
        self._payload = getattr(dut, f"{name}__payload")
        self._valid = getattr(dut, f"{name}__valid")
        self._ready = ready_port(dut, name)
        self._clock = clock
        self._layout = layout


class StreamSource(_StreamEnd):
    """Drives the stream port ``name`` of ``dut``: ``<name>__payload``, ``__valid``, ``__ready`` (if any).

    Parameters
    ----------
    dut : cocotb handle of the top level
    name : str
        Port name as in the component's signature.
    clock : cocotb handle
    layout : data.Layout or None
        Payload layout, for dict or list items; None means items are ints.
    pause : iterator of bool, optional
        Idle generator; True inserts an idle cycle before the next transfer.
    """

    def __init__(self, dut, name, clock, layout=None, pause=None):
        super().__init__(dut, name, clock, layout)
        self._pause = pause if pause is not None else never()
        self._queue = deque()
        self._active = None
        self._idle = Event()
        self._idle.set()
        self.sent = 0
        self._valid.value = 0
        self._task = cocotb.start_soon(self._run())

    def clear(self):
        """Drop every queued item and the one on the port, and lower ``valid`` now (for a reset)."""
        self._queue.clear()
        self._active = None
        self._valid.value = 0
        self._idle.set()

    def set_pause_generator(self, pause):
        self._pause = pause if pause is not None else never()

    def send_nowait(self, item):
        self._queue.append(item if self._layout is None else pack(self._layout, item))
        self._idle.clear()

    def send_many(self, items):
        for item in items:
            self.send_nowait(item)

    async def wait_idle(self):
        """Wait until every queued item has been transferred."""
        await self._idle.wait()

    async def _run(self):
        while True:
            await RisingEdge(self._clock)
            if self._active is not None and self._ready.value:
                # The transfer happened at this edge: valid and ready were both high before it.
                self._active = None
                self.sent += 1
            if self._active is None:
                if self._queue and not next(self._pause):
                    self._active = self._queue.popleft()
                    self._payload.value = self._active
                    self._valid.value = 1
                else:
                    self._valid.value = 0
                    if not self._queue:
                        self._idle.set()


class StreamSink(_StreamEnd):
    """Consumes the stream port ``name`` of ``dut``, driving ``ready`` from a backpressure generator.

    Received items are ints, or unpacked dicts/lists when ``layout`` is given.
    """

    def __init__(self, dut, name, clock, layout=None, backpressure=None):
        super().__init__(dut, name, clock, layout)
        self._backpressure = backpressure if backpressure is not None else never()
        self.queue = deque()
        self._arrived = Event()
        self.received = 0
        self.cycles_valid_not_ready = 0
        self._ready.value = 0
        self._task = cocotb.start_soon(self._run())

    def set_backpressure_generator(self, backpressure):
        self._backpressure = backpressure if backpressure is not None else never()

    def empty(self):
        return not self.queue

    def clear(self):
        """Forget every item received so far (for a reset)."""
        self.queue.clear()

    async def recv(self):
        while not self.queue:
            self._arrived.clear()
            await self._arrived.wait()
        return self.queue.popleft()

    async def _run(self):
        while True:
            await RisingEdge(self._clock)
            if self._ready.value and self._valid.value:
                word = int(self._payload.value)
                self.queue.append(word if self._layout is None else unpack(self._layout, word))
                self.received += 1
                self._arrived.set()
            self._ready.value = 0 if next(self._backpressure) else 1
