"""Blocks of the systolic family."""
