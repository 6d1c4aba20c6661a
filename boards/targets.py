"""The synthesis targets and the resource columns each one reports.

The lowest layer that needs these facts is the board catalogue (its budgets are keyed by
them); the synthesis flow, the sweep and the tables in ``scripts/`` read them from here.
"""

__all__ = ["TARGETS", "RESOURCE_COLUMNS"]

TARGETS = ("xcup", "ecp5")

RESOURCE_COLUMNS = {
    "xcup": ("LUT", "FF", "CARRY", "DSP48E2", "BRAM", "URAM"),
    "ecp5": ("LUT4", "FF", "MULT18", "EBR"),
}
