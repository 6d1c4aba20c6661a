"""Blocks of the runtime family."""
from . import (
    axi_lite_decoder,  # noqa: F401
    classifier,  # noqa: F401
    cluster,  # noqa: F401
    data_handler,  # noqa: F401
    data_packager,  # noqa: F401
    node_kernels,  # noqa: F401
    node_memory,  # noqa: F401
    rdma_detector,  # noqa: F401
    rdma_responder,  # noqa: F401
    runtime_node,  # noqa: F401
    spawner,  # noqa: F401
    task_packager,  # noqa: F401
    task_responder,  # noqa: F401
    task_splitter,  # noqa: F401
)
