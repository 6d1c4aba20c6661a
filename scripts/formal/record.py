"""Running proofs by name for ``neartrain prove``, and their table in ``docs/formal.md``.

The table's proof, block, mode, depth and result columns are what ``testbenches/formal``
checks against :mod:`.proofs` (a proof added, removed or re-bounded without rerunning
``neartrain prove --record`` fails the suite); its ``covered`` column names, per cover of the
harness, the step at which the cover task first reached it (an output stream by its path: the
step at which it first stalled, ``valid & ~ready``), and its seconds column is the
measurement; both are kept in ``docs/data/formal-proofs.json``, which ``neartrain docs --check``
renders like any table. ``--record`` with names rewrites the rows of those proofs only and keeps
the others.
"""

import fcntl
import json
import pathlib
import re

from rtl.elaborate import source_hash

from ..flow.cache import BUILD, Cache
from ..flow.docs import DATA, write_table
from .flow import ProofResult, run_proof
from .proofs import NOT_PROVED, proofs_of
from .streams import COVER

__all__ = ["folder_of", "run", "row", "covered", "record", "selected", "COMMAND", "HEADERS", "DATA", "PASSED"]

COMMAND = "neartrain prove --deep --record"
# A passing result, for the columns of a row that do not depend on a run.
PASSED = ProofResult("pass", 0.0)
HEADERS = ["proof", "block", "properties", "mode", "depth", "suite", "result", "covered (step)", "seconds"]


def folder_of(proof):
    """``build/formal/<proof>-<hash>/``: keyed by the rtl sources and the bound, never in the source tree."""
    key = Cache.key(source_hash(), proof.name, proof.mode, proof.depth, proof.cover_depth)
    return BUILD / "formal" / f"{re.sub(r'[^A-Za-z0-9_.-]+', '_', proof.name)}-{key}"


def run(proof, folder=None, timeout=1200):
    """Run ``proof`` (in :func:`folder_of` unless ``folder``) and return its :class:`~.flow.ProofResult`.

    Two runs of one proof share its folder, so a second run (another ``neartrain prove``, or a
    test on another xdist worker) waits for the first to finish instead of overwriting its SBY
    files while SBY reads them; the lock file sits beside the folder.
    """
    folder = pathlib.Path(folder or folder_of(proof))
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f"{folder.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, even on an exception
        return run_proof(proof.build(), folder=folder, mode=proof.mode, depth=proof.depth,
                         timeout=timeout, cover_depth=proof.cover_depth)


def covered(result):
    """The covered cell: ``"o: 3; c: never (within 7)"``, per cover of the harness; ``"-"`` without one.

    A stream's cover (``"<path>: valid & ~ready"``) is named by its path alone.
    """
    if not result.covers:
        return "-"
    cells = []
    for message, step in result.covers.items():
        label = message[:-len(COVER)] if message.endswith(COVER) else message
        cells.append(f"{label}: {step}" if step is not None
                     else f"{label}: never (within {result.cover_depth})")
    return "; ".join(cells)


def row(proof, result):
    """The docs table row of ``proof`` and its ``result``."""
    return [proof.name, proof.block, proof.claim, proof.mode, proof.depth, "slow" if proof.slow else "fast",
            result.status, covered(result), round(result.seconds, 1)]


def _kept_rows(path):
    """The stored rows, by proof name."""
    if not path.exists():
        return {}
    return {row[0]: row for row in json.loads(path.read_text())["rows"]}


def record(rows):
    """Write ``rows`` into the proofs table of ``docs/formal.md``, and the not-proved table.

    Rows of proofs not run this time are kept from ``docs/data/formal-proofs.json``; rows of
    proofs no longer defined are dropped. Rows follow the order of :mod:`.proofs`.
    """
    path = DATA / "formal-proofs.json"
    kept = _kept_rows(path)
    kept.update({row[0]: row for row in rows})
    ordered = [kept[proof.name] for proof in proofs_of() if proof.name in kept]
    write_table("formal.md", "formal-proofs", HEADERS, ordered, COMMAND, disable_numparse=True)
    write_table("formal.md", "formal-not-proved", ["block", "why it has no stream-rule proof"],
                sorted([name, reason] for name, reason in NOT_PROVED.items()), COMMAND)


def selected(names, deep):
    """The proofs of ``names`` (blocks or proof names; all when empty): the fast ones, or all with
    ``deep``. A name with no fast proof (a block whose proofs are all slow, or a slow proof named
    outright) selects its slow ones, so that naming it is enough to run it."""
    if deep or not names:
        return proofs_of(set(names) if names else None, slow=deep)
    fast = proofs_of(set(names), slow=False)
    named = {proof.block for proof in fast} | {proof.name for proof in fast}
    rest = set(names) - named
    return fast + (proofs_of(rest) if rest else [])
