"""The board catalogue: every budget positive, named after a synthesis column, and sourced."""

import pytest

from boards import boards, get_board, reference_board
from boards.targets import RESOURCE_COLUMNS


@pytest.mark.parametrize("name", list(boards()))
def test_budgets_are_complete_positive_and_sourced(name):
    board = get_board(name)
    assert board.name == name
    # Every column the target's synthesis reports has a budget, so a sweep can check them all.
    assert set(board.budgets) == set(RESOURCE_COLUMNS[board.target])
    for column, budget in board.budgets.items():
        assert isinstance(budget, int) and budget > 0, (column, budget)
        assert len(board.sources[column]) > 10, column
    assert board.clocks and all(clock.hz > 1e6 and clock.source for clock in board.clocks)
    assert board.memory


def test_seed_figures():
    def budget(name, *columns):
        return tuple(get_board(name).budgets[column] for column in columns)

    # Smart-Infinity Section VII-A / Table III and DPT Table 2.
    assert budget("smartssd", "BRAM", "URAM", "DSP48E2") == (984, 128, 1968)
    assert [round(value, -3) for value in budget("smartssd", "LUT", "FF")] == [523_000, 1_045_000]
    assert budget("alveo-u250", "LUT", "FF", "DSP48E2") == (1_728_000, 3_456_000, 12_288)
    # Dissertation Section 3.4.1.
    assert budget("vck5000", "LUT", "FF", "DSP48E2") == (899_840, 1_799_680, 1968)
    vck = get_board("vck5000")
    assert [clock.hz for clock in vck.clocks] == [273e6]
    assert 294e6 in [clock.hz for clock in get_board("alveo-u280").clocks]


def test_unknown_board_lists_the_names():
    with pytest.raises(ValueError, match="unknown board 'ku15p'.*smartssd.*ulx3s-85f"):
        get_board("ku15p")


def test_reference_boards_and_platforms():
    assert reference_board("xcup").name == "smartssd"
    assert reference_board("ecp5").name == "ulx3s-85f"
    ecp5 = [board for board in boards().values() if board.target == "ecp5"]
    assert len(ecp5) >= 1
    for board in ecp5:
        platform = board.load_platform()
        assert platform.device == board.device
        assert platform.lookup(board.clock_resource, 0).clock.frequency == board.clocks[0].hz
    with pytest.raises(ValueError, match="no open-toolchain platform"):
        get_board("smartssd").load_platform()
