"""Golden models of the FCsN SmartNIC task runtime (dissertation Chapter 4, Section 4.4.3).

:mod:`golden.runtime.packet` states the 512-bit packet layout as integers;
:mod:`golden.runtime.protocol` decides what every handler of every node does, and predicts
the per-node packet counts; :mod:`golden.runtime.kernels` computes what the kernels attached
to the runtime leave in each node's output memory.
"""
