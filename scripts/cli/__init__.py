"""The ``neartrain`` command (entry point :func:`main`); see :mod:`scripts.cli.main`."""

from .common import UsageError
from .main import build_parser, main

__all__ = ["main", "build_parser", "UsageError"]
