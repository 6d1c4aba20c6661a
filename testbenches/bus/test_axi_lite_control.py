# amaranth: UnusedElaboratable=no
"""Runners and register-map checks for the Vitis-style AXI4-Lite control block."""

import pytest

from scripts.sim.runner import run_cocotb

MODULE = "testbenches.bus.cocotb_axi_lite_control"


@pytest.mark.parametrize("params", [
    {},
    {"arguments": "a:32,b:64,c:32,d:64", "status": "flag:1,wide:33,count:64,word:32", "address_width": 7},
], ids=["default", "mixed"])
def test_axi_lite_control(params):
    run_cocotb("axi_lite_control", MODULE, params=params)


def test_register_map_layout():
    from rtl.bus.axi_lite_control import AXILiteControl

    control = AXILiteControl(arguments=[("src", 64, "source address"), ("n", 32)], status="cycles:64,err:2")
    rows = [(e["name"], e["offset"], e["width"], e["access"], e["kind"]) for e in control.register_map()]
    assert rows == [
        ("CTRL", 0x00, 32, "RW", "control"), ("GIE", 0x04, 32, "RW", "control"),
        ("IER", 0x08, 32, "RW", "control"), ("ISR", 0x0C, 32, "RW", "control"),
        ("src", 0x10, 64, "RW", "argument"), ("n", 0x18, 32, "RW", "argument"),
        ("cycles", 0x20, 64, "RO", "status"), ("err", 0x28, 2, "RO", "status"),
    ]
    assert control.register_map()[4]["description"] == "source address"


@pytest.mark.parametrize("kwargs,message", [
    ({"arguments": "a:16"}, "width of 'a' must be 32 or 64"),
    ({"arguments": "a:32,a:64"}, "repeated: a"),
    ({"arguments": "a:32", "status": "a:8"}, "repeated: a"),
    ({"status": "x:65"}, "width of 'x' must be 1..64"),
    ({"arguments": "start:32"}, "not a usable register name"),
    ({"arguments": "ctrl:32"}, "not a usable register name"),
    ({"arguments": "a"}, "is not name:width"),
    ({"arguments": "a:32,b:32,c:32", "status": "", "address_width": 5}, "needs 40 bytes"),
])
def test_control_parameters_are_validated(kwargs, message):
    from rtl.bus.axi_lite_control import AXILiteControl

    with pytest.raises(ValueError, match=message):
        AXILiteControl(**kwargs)
