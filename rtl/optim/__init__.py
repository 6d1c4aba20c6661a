"""Blocks of the optim family."""
