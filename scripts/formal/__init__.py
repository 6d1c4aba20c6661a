"""Formal proofs of NearTrain blocks with SymbiYosys (bounded model checks and k-induction).

:mod:`.flow` runs one harness through SBY; :mod:`.streams` is the stream-rule wrapper any
block can be put in; :mod:`.harnesses` and :mod:`.blocks` state what particular blocks do to
their data; :mod:`.proofs` names every proof; :mod:`.record` runs them for the CLI and writes
``docs/formal.md``.
"""
