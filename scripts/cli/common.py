"""What every ``neartrain`` command shares: one-line usage errors and the block arguments.

Every error a user can cause (an unknown block, a bad parameter, an unwritable folder) is a
:class:`UsageError`, printed as one line with exit status 2 by :func:`scripts.cli.main.main`.
"""

import argparse
import os
import pathlib

from .param_text import parse_param

__all__ = ["UsageError", "Parser", "package_version", "parse_sets", "lookup_block", "build_component",
           "writable_folder", "format_resource_table", "at_least_one"]


class UsageError(Exception):
    """A mistake in the command line or its inputs: reported in one line, exit status 2."""


def package_version():
    """The installed distribution's version (the one ``pyproject.toml`` declares)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("neartrain")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed)"


class Parser(argparse.ArgumentParser):
    """An argument parser whose errors are :class:`UsageError` (one line), not a usage dump."""

    def error(self, message):
        raise UsageError(message)


def parse_sets(block, assignments):
    """The ``--set key=value`` assignments as a parameter dict, each parsed by the block's ``Param``."""
    overrides = {}
    for assignment in assignments or ():
        if "=" not in assignment:
            raise UsageError(f"--set expects key=value, not {assignment!r}")
        key, text = assignment.split("=", 1)
        try:
            overrides[key] = parse_param(block.param(key), text)
        except ValueError as error:
            raise UsageError(str(error)) from None
    return overrides


def lookup_block(name):
    """The registered block ``name``."""
    from rtl.registry import get_block

    try:
        return get_block(name)
    except ValueError as error:
        raise UsageError(str(error)) from None


def build_component(block, overrides):
    """The block's component with ``overrides``; a rejected parameter is a :class:`UsageError`."""
    try:
        return block.build(overrides)
    except ValueError as error:
        raise UsageError(f"{block.name}: {error}") from None


def writable_folder(path):
    """``path`` as a folder, created and checked writable."""
    folder = pathlib.Path(path)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        # One probe per process: `neartrain verilog` checks the folder from every elaboration worker,
        # and a shared name let one worker delete another's probe ("No such file or directory").
        probe = folder / f".neartrain-write-test-{os.getpid()}"
        probe.write_text("")
        probe.unlink()
    except OSError as error:
        raise UsageError(f"cannot write to output folder {str(folder)!r}: {error.strerror}") from None
    return folder


def format_resource_table(rows, target):
    """Render ``[(label, resources), ...]`` as a Markdown table for ``target``."""
    from boards.targets import RESOURCE_COLUMNS

    columns = RESOURCE_COLUMNS[target]
    lines = ["| block | " + " | ".join(columns) + " | mapper |",
             "|---|" + "---:|" * len(columns) + "---|"]
    for label, resources in rows:
        cells = []
        for column in columns:
            value = resources[column]
            cells.append(f"{value:g}" if isinstance(value, float) else str(value))
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {resources['mapper']} |")
    return "\n".join(lines)


def at_least_one(unit):
    """An argparse type: a whole number (of ``unit``, if given) that is at least 1."""
    what = f"a whole number of {unit}" if unit else "a whole number"

    def parse(text):
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < 1:
            raise argparse.ArgumentTypeError(f"must be {what} >= 1, not {text!r}")
        return value
    return parse
