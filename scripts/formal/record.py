"""Running proofs by name for ``neartrain prove``, and their table in ``docs/formal.md``.

The table's proof, block, mode, depth and result columns are what ``testbenches/formal``
checks against :mod:`.proofs` (a proof added, removed or re-bounded without rerunning
``neartrain prove --record`` fails the suite); its seconds column is the measurement kept in
``docs/data/formal-proofs.json``, which ``neartrain docs --check`` renders like any table.
"""

import json
import re

from rtl.elaborate import source_hash

from ..cache import BUILD, Cache
from ..docs import DATA, write_table
from .flow import ProofResult, run_proof
from .proofs import NOT_PROVED, proofs_of

__all__ = ["folder_of", "run", "row", "record", "selected", "COMMAND", "HEADERS", "DATA", "PASSED"]

COMMAND = "neartrain prove --deep --record"
# A passing result, for the columns of a row that do not depend on a run.
PASSED = ProofResult("pass", 0.0)
HEADERS = ["proof", "block", "properties", "mode", "depth", "suite", "result", "seconds"]


def folder_of(proof):
    """``build/formal/<proof>-<hash>/``: keyed by the rtl sources and the bound, never in the source tree."""
    key = Cache.key(source_hash(), proof.name, proof.mode, proof.depth)
    return BUILD / "formal" / f"{re.sub(r'[^A-Za-z0-9_.-]+', '_', proof.name)}-{key}"


def run(proof, folder=None, timeout=1200):
    """Run ``proof`` (in :func:`folder_of` unless ``folder``) and return its :class:`~.flow.ProofResult`."""
    return run_proof(proof.build(), folder=folder or folder_of(proof), mode=proof.mode, depth=proof.depth,
                     timeout=timeout)


def row(proof, result):
    """The docs table row of ``proof`` and its ``result``."""
    return [proof.name, proof.block, proof.claim, proof.mode, proof.depth, "slow" if proof.slow else "fast",
            result.status, round(result.seconds, 1)]


def record(rows):
    """Write ``rows`` into the proofs table of ``docs/formal.md``, and the not-proved table.

    Rows of proofs not run this time are kept from ``docs/data/formal-proofs.json``; rows of
    proofs no longer defined are dropped. Rows follow the order of :mod:`.proofs`.
    """
    path = DATA / "formal-proofs.json"
    kept = {row[0]: row for row in json.loads(path.read_text())["rows"]} if path.exists() else {}
    kept.update({row[0]: row for row in rows})
    ordered = [kept[proof.name] for proof in proofs_of() if proof.name in kept]
    write_table("formal.md", "formal-proofs", HEADERS, ordered, COMMAND, disable_numparse=True)
    write_table("formal.md", "formal-not-proved", ["block", "why it has no stream-rule proof"],
                sorted([name, reason] for name, reason in NOT_PROVED.items()), COMMAND)


def selected(names, deep):
    """The proofs of ``names`` (blocks or proof names; all when empty)."""
    return proofs_of(set(names) if names else None, slow=deep)
