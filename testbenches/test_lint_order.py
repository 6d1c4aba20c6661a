"""``make lint`` starts the slowest elaborations first: its hint names registered blocks only."""

from rtl.registry import blocks
from scripts.flow import lint_verilog


def test_the_slowest_first_hint_names_registered_blocks():
    registered = set(blocks())
    assert set(lint_verilog._LARGEST) <= registered, set(lint_verilog._LARGEST) - registered


def test_every_block_is_linted_once_whatever_the_order(tmp_path, monkeypatch):
    monkeypatch.setattr(lint_verilog, "OUTPUT", tmp_path)
    names = list(blocks())
    ordered = lint_verilog._order(names)
    assert sorted(ordered) == sorted(names)
    assert ordered[:len(lint_verilog._LARGEST)] == list(lint_verilog._LARGEST)
