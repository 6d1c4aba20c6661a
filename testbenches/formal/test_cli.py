"""``neartrain prove``: a pass, a one-line error for an unknown block, the proof list."""

from scripts.cli.main import main


def test_prove_one_proof_passes(capsys):
    assert main(["prove", "skid_buffer.tokens"]) == 0
    out = capsys.readouterr().out
    assert "skid_buffer.tokens: PASS" in out and "1 proof(s) gave their expected verdict" in out


def test_prove_json_gives_each_verdict(capsys):
    # Another run of the same proof, perhaps at the same time on another xdist worker: record.run
    # makes the two take turns in the proof's build folder.
    import json

    assert main(["prove", "skid_buffer.tokens", "--json"]) == 0
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert report["failed"] == [] and [p["proof"] for p in report["proofs"]] == ["skid_buffer.tokens"]
    assert report["proofs"][0]["status"] == "pass" == report["proofs"][0]["expected"]
    assert "skid_buffer.tokens" in captured.err  # the progress goes to stderr, the result to stdout


def test_prove_unknown_block_is_one_line(capsys):
    assert main(["prove", "no_such_block"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith("neartrain: error: no proof of no_such_block")


def test_prove_list_names_modes_and_depths(capsys):
    assert main(["prove", "--list", "axi_burst_planner"]) == 0
    out = capsys.readouterr().out
    assert "axi_burst_planner.plan-induction\tprove depth 4\tslow" in out


def test_prove_refuses_a_timeout_below_one_second(capsys):
    # SBY reads `timeout 0` as no limit; a negative one is meaningless.
    for value in ("0", "-5", "abc"):
        assert main(["prove", "--timeout", value, "skid_buffer"]) == 2
        err = capsys.readouterr().err.strip()
        assert "\n" not in err and "--timeout" in err and repr(value) in err


def test_prove_refuses_fewer_than_one_job(capsys):
    for value in ("0", "-1", "two"):
        assert main(["prove", "--jobs", value, "skid_buffer"]) == 2
        err = capsys.readouterr().err.strip()
        assert "\n" not in err and "--jobs" in err and repr(value) in err


def test_a_block_with_only_slow_proofs_is_proved_when_named():
    """``neartrain prove runtime_spawner`` runs its slow proofs rather than finding none; a block
    with fast proofs keeps to them without ``--deep``."""
    from scripts.formal.proofs import proofs_of
    from scripts.formal.record import selected

    only_slow = selected(["runtime_spawner"], deep=False)
    assert only_slow and {proof.block for proof in only_slow} == {"runtime_spawner"}
    assert all(proof.slow for proof in only_slow)
    assert {p.name for p in only_slow} == {p.name for p in proofs_of({"runtime_spawner"})}
    mixed = selected(["skid_buffer", "runtime_spawner"], deep=False)
    assert {p.name for p in mixed if p.block == "skid_buffer"} == {
        p.name for p in proofs_of({"skid_buffer"}, slow=False)}


def test_prove_list_of_an_unknown_block_is_a_usage_error(capsys):
    assert main(["prove", "--list", "no_such_block"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith("neartrain: error: no proof of no_such_block")
