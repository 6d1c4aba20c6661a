"""Stream plumbing, AXI4 masters and control registers, and a UART for board demos."""

from . import skid_buffer, stream_fifo, uart_rx, uart_tx, width_converter  # noqa: F401  (registers the blocks)
from .axi_burst_planner import AXIBurstPlanner  # noqa: F401
from .axi_burst_reader import AXIBurstReader  # noqa: F401
from .axi_burst_writer import AXIBurstWriter  # noqa: F401
from .axi_lite_control import AXILiteControl  # noqa: F401
