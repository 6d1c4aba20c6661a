"""The network the runtime, collective and dlrm families share: the packet, the interface, the switch.

:mod:`.packet` is the 512-bit packet of the seed (Section 4.4.3) with its check byte (``checksum``,
``sealed``); :mod:`.net_interface` a node's credited virtual channels; :mod:`.switch` the N-port
switch. A family imports these; it imports another family only to compose a block out of it.
"""

from . import net_interface, switch  # noqa: F401  (registers the blocks)
