"""Board-level tops: designs that talk to the outside world through a board's pins (not registered blocks)."""

from .adam_demo import AdamBoardDemo  # noqa: F401
from .board_top import BoardDemoTop  # noqa: F401
