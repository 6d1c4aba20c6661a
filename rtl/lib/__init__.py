"""Generic primitives every rtl family may use: counters, streams, a CAM and pipelining pieces.

Imports only amaranth. A piece belongs here when it knows nothing of a family's formats (no packet,
no line width, no register map); what the networked families share about the network is in
:mod:`rtl.net`. Nothing here is a registered block: these build into the caller's module.
"""
