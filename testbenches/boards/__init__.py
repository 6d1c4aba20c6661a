"""Tests of the board catalogue, the sweep and the ECP5 bitstream flow."""
