"""The runtime's counters and host port layouts, stated once for the models and the tests (never
read from ``rtl``).

``testbenches/test_design_constants.py`` (section ``# runtime``) holds the RTL's tables equal to
these. Widths and limits: see ``docs/runtime.md`` §4.

* :data:`CLASSIFIER_DROPS`, :data:`RESPONDER_DROPS`: the bit order of the classifier's and the
  task responder's ``dropped`` pulses (one bit per reason).
* :data:`COUNTERS`: what :class:`golden.runtime.protocol.Cluster` counts per node.
* :data:`NODE_STATUS_COUNTERS`: a runtime node's status counters in register order (after
  ``quiet``): :data:`COUNTERS`, then ``overflow`` (a sender ignored its credits) and
  ``start_rejected`` (``Kernel_start`` with a kernel id not attached), which the protocol model
  never produces.
* :data:`KERNEL_COUNTERS`: a node's kernels (refused task slots, host rows and B lines; aggregation
  slots outside their bank).
* :data:`MEMORY_COUNTERS`: a node's data memory (refused line writes and RDMA reads).
* :data:`HOST_COUNTERS`: the cluster's host port (refused host writes and reads).
* :data:`HOST_TARGETS`, :data:`HOST_WRITE_FIELDS`, :data:`HOST_READ_FIELDS`,
  :data:`READ_ANSWER_FIELDS`: the cluster's host port, ``(name, bit offset, width)`` bit 0 first.
"""

__all__ = ["CLASSIFIER_DROPS", "RESPONDER_DROPS", "DROP_REASONS", "COUNTERS", "NODE_STATUS_COUNTERS",
           "KERNEL_COUNTERS", "MEMORY_COUNTERS", "HOST_COUNTERS", "HOST_TARGETS", "HOST_WRITE_FIELDS",
           "HOST_READ_FIELDS", "READ_ANSWER_FIELDS"]

CLASSIFIER_DROPS = ("check", "type", "node", "task_id")
RESPONDER_DROPS = ("task_mask", "task_range", "task_row", "task_col", "misrouted")
# Drop counters, by unit: classifier, task responder, RDMA responder, data handler.
DROP_REASONS = CLASSIFIER_DROPS + RESPONDER_DROPS + ("rdma_range", "data_unsolicited")
COUNTERS = ("rx_task", "rx_rdma", "rx_data", "tx_task", "tx_rdma", "tx_data", "spawned", "issued",
            "completed", "served") + tuple(f"drop_{reason}" for reason in DROP_REASONS)
NODE_STATUS_COUNTERS = COUNTERS + ("overflow", "start_rejected")
KERNEL_COUNTERS = ("range_errors", "bank_errors")
MEMORY_COUNTERS = ("range_errors",)
HOST_COUNTERS = ("host_load_errors", "host_read_errors")

# The host port of the simulated cluster: a write names a node, a target and an address.
HOST_TARGETS = {"spawn": 0, "data": 1, "out": 2}  # 3 is refused
HOST_WRITE_FIELDS = (("node", 0, 4), ("target", 4, 2), ("address", 6, 24), ("data", 30, 512))
HOST_READ_FIELDS = (("node", 0, 4), ("address", 4, 24))
# Every host read (and every kernels' read_data) is answered: the row, or ``error`` set and data 0.
READ_ANSWER_FIELDS = (("data", 0, 448), ("error", 448, 1))
