# amaranth: UnusedElaboratable=no
# (Blocks built only for their port table are never elaborated.)
"""Valid-only events (``always_ready=True`` streams) work in every tool that turns a block into ports.

Their ``ready`` is a constant, not a port: the generated Verilog, the port table and the
evaluation top must leave it out (Amaranth refuses a constant as a port), and keep everything
else. Checked on ``runtime_node_memory`` (``wr`` in and ``written`` out are valid-only) and
``runtime_data_handler`` (``mem_wr`` and ``arrived`` out).
"""

import pytest

from rtl.elaborate import port_table, to_verilog
from rtl.eval_top import EvaluationCore
from rtl.runtime.data_handler import DataHandler
from rtl.runtime.node_memory import NodeMemory

CASES = [
    (lambda: NodeMemory(lines=4), {"wr", "written"}, {"load", "rd_cmd", "rd_data"}),
    (lambda: DataHandler(block=4), {"mem_wr", "arrived"}, {"i"}),
]


@pytest.mark.parametrize("build,valid_only,handshaked", CASES)
def test_ports_of_valid_only_streams(build, valid_only, handshaked):
    names = {port["name"] for port in port_table(build())}
    for stream in valid_only:
        assert {f"{stream}__valid", f"{stream}__payload"} <= names
        assert f"{stream}__ready" not in names, f"{stream} is valid-only: no ready port"
    for stream in handshaked:
        assert f"{stream}__ready" in names
    text = to_verilog(build())
    header = text[text.index("module top("):text.index(");")]
    ported = {name.strip() for name in header[len("module top("):].split(",")}
    assert ported == names, f"Verilog ports {sorted(ported ^ names)} differ from the port table"


@pytest.mark.parametrize("build,valid_only,handshaked", CASES)
def test_evaluation_core_of_valid_only_streams(build, valid_only, handshaked):
    block = build()
    core = EvaluationCore(block)
    inputs = sum(port["width"] for port in port_table(block)
                 if port["direction"] == "input" and port["name"] not in ("clk", "rst"))
    assert core.input_width == inputs
    assert "module top" in to_verilog(core)
