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


def test_every_passing_stream_row_names_the_first_stall_of_each_output():
    # A stream-rule row says "pass" only if every output stream of the block (as proved, with
    # the proof's parameters) stalled within its depth; the covered cell names each one's step.
    from rtl.registry import get_block

    rows = {row[0]: row for row in json.loads((record.DATA / "formal-proofs.json").read_text())["rows"]}
    stale = {}
    for proof in proofs_of():
        row = rows.get(proof.name)
        if proof.params is None or row is None or row[6] != "pass":
            continue
        component = get_block(proof.block).build(proof.params)
        component._MustUse__silence = True
        outputs = sorted(stream_ports(component)[1])
        cells = dict(cell.rsplit(": ", 1) for cell in row[7].split("; ")) if ": " in row[7] else {}
        # A stall at step s is checked at step s + 1, which must be inside the bound.
        last = proof.cover_depth - 1 if proof.cover_depth else proof.depth - 2
        if sorted(cells) != outputs or not all(step.isdigit() and int(step) <= last
                                               for step in cells.values()):
            stale[proof.name] = row[7]
    assert stale == {}, f"pass rows without each output's first stall (rerun `{record.COMMAND}`): {stale}"


def test_every_passing_row_names_the_step_of_each_cover():
    # Every proof covers what it asserts on (an output stall, a checked transfer, a full queue,
    # two whole bursts): a pass row without a cover, or with one never reached, is vacuous.
    rows = json.loads((record.DATA / "formal-proofs.json").read_text())["rows"]
    vacuous = {row[0]: row[7] for row in rows if row[6] == "pass"
               and not all(cell.rsplit(": ", 1)[-1].isdigit() for cell in row[7].split("; "))}
    assert vacuous == {}, f"pass rows that cover nothing (rerun `{record.COMMAND}`): {vacuous}"


def test_record_of_named_proofs_keeps_the_other_rows(tmp_path, monkeypatch):
    # `neartrain prove --record skid_buffer` rewrites that block's rows only.
    import shutil

    import scripts.flow.docs
    from scripts.formal.flow import ProofResult

    (tmp_path / "data").mkdir()
    shutil.copy(scripts.flow.docs.DOCS / "formal.md", tmp_path / "formal.md")
    shutil.copy(record.DATA / "formal-proofs.json", tmp_path / "data" / "formal-proofs.json")
    monkeypatch.setattr(scripts.flow.docs, "DOCS", tmp_path)
    monkeypatch.setattr(scripts.flow.docs, "DATA", tmp_path / "data")
    monkeypatch.setattr(record, "DATA", tmp_path / "data")
    stored = tmp_path / "data" / "formal-proofs.json"
    before = {row[0]: row for row in json.loads(stored.read_text())["rows"]}
    proof = next(proof for proof in proofs_of() if proof.name == "skid_buffer.streams")
    result = ProofResult("pass", 1.0, covers={"o: valid & ~ready": 1}, cover_depth=7)
    record.record([record.row(proof, result)])
    after = {row[0]: row for row in json.loads(stored.read_text())["rows"]}
    assert after.keys() == before.keys()
    assert after["skid_buffer.streams"][6:] == ["pass", "o: 1", 1.0]
    others = [name for name in before if name != "skid_buffer.streams"]
    assert [after[name][:7] for name in others] == [before[name][:7] for name in others]
    assert "| skid_buffer.streams" in (tmp_path / "formal.md").read_text()


def test_two_runs_of_one_proof_take_turns_in_its_folder(tmp_path, monkeypatch):
    """``record.run`` of the same proof twice at once (two ``neartrain prove`` runs, or two xdist
    workers): the second waits for the first, so neither overwrites the other's SBY files."""
    import dataclasses
    import threading
    import time

    inside, overlaps = [], []

    def slow_proof(design, *, folder, **_):
        inside.append(folder)
        overlaps.append(len(inside))
        time.sleep(0.2)
        inside.remove(folder)
        return record.PASSED

    monkeypatch.setattr(record, "run_proof", slow_proof)
    proof = dataclasses.replace(proofs_of({"skid_buffer"})[0], build=lambda: None)
    threads = [threading.Thread(target=record.run, args=(proof,), kwargs={"folder": tmp_path / "run"})
               for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert overlaps == [1, 1, 1]
