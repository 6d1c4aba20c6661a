"""Tests of rtl/lib, the generic primitives."""
