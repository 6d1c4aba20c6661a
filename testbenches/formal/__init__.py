"""Tests of the formal flow (:mod:`scripts.formal`): the proofs, the broken variants, the docs table."""
