"""Every proof of :mod:`scripts.formal.proofs` passes; the slow ones only in ``make test-full``.

Each runs SymbiYosys in pytest's ``tmp_path``. A failure names the property and the
counterexample trace (a VCD) in that folder.
"""

import json

import pytest

from scripts.formal import record
from scripts.formal.proofs import NOT_PROVED, check_coverage, proofs_of
from scripts.formal.streams import stream_ports

PROOFS = [pytest.param(proof, id=proof.name, marks=[pytest.mark.slow] if proof.slow else [])
          for proof in proofs_of()]


@pytest.mark.parametrize("proof", PROOFS)
def test_proof(proof, tmp_path):
    result = record.run(proof, folder=tmp_path)
    assert result.status == proof.expect, f"{proof.name}: {result.describe()}"


def test_every_block_has_a_stream_proof_or_a_reason():
    assert check_coverage() == []


@pytest.mark.parametrize("name", sorted(name for name, reason in NOT_PROVED.items()
                                        if reason.startswith("no output stream")))
def test_blocks_said_to_have_no_output_stream_have_none(name):
    from rtl.registry import get_block

    component = get_block(name).build()
    component._MustUse__silence = True  # looked at, never elaborated: no "unused" warning
    _inputs, outputs = stream_ports(component)
    assert outputs == {}, f"{name} has output streams {sorted(outputs)}: give it a stream-rule proof"


def test_docs_table_lists_every_proof_with_its_bound():
    # The seconds are a measurement and may differ run to run; what a proof is must not.
    spec = json.loads((record.DATA / "formal-proofs.json").read_text())
    recorded = {row[0]: row[:7] for row in spec["rows"]}
    expected = {proof.name: record.row(proof, record.PASSED)[:6] for proof in proofs_of()}
    assert {name: row[:6] for name, row in recorded.items()} == expected, \
        f"docs/formal.md is stale: rerun `{record.COMMAND}`"
    expected_results = {proof.name: proof.expect for proof in proofs_of()}
    unexpected = {name: row[6] for name, row in recorded.items() if row[6] != expected_results[name]}
    assert unexpected == {}, f"recorded results differ from what the proofs expect: {unexpected}"
