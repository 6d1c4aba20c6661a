"""Blocks of the compress family."""
