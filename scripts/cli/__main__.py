"""``python -m scripts.cli``: the same as the ``neartrain`` command."""

import sys

from .main import main

sys.exit(main())
