"""Blocks of the aggregate family."""
