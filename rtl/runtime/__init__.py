"""Blocks of the runtime family."""
