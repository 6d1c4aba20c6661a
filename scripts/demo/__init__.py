"""The demos: ``neartrain demo train``, ``gcn``, ``cluster`` (and its model), ``smartssd``, ``dpt``,
``allreduce``, and the board demo.

Each drives the simulator (or the board) through the host devices of :mod:`scripts.sim.devices`.
"""
