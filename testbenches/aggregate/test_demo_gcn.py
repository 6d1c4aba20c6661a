"""``neartrain demo gcn``: argument checks (fast) and the whole forward pass in RTL simulation (slow).

The slow test runs the demo's default configuration (synthetic Cora, 32 input features, two
Verilator builds of many minutes on a first run): every stage must equal
``golden.aggregate.gcn_forward`` bit for bit and the logits must be within ``gcn_bound`` of
the float64 reference.
"""

import pytest

from scripts.cli.main import main
from scripts.demo import gcn as demo_gcn


@pytest.mark.parametrize("options,message", [
    ({"graph": "pubmed"}, "graph must be one of cora, citeseer"),
    ({"features": 0}, "features must be an integer in 1..4096"),
    ({"hidden": 65}, "hidden must be at most 64"),
    ({"lanes": 3}, "lanes must be one of 1, 2, 4, 8"),
    ({"seed": -1}, "seed must be an integer in 0..4096"),
])
def test_bad_arguments_are_named(options, message):
    with pytest.raises(ValueError, match=message):
        demo_gcn.check_arguments(**options)


def test_cli_rejects_bad_graph_without_simulating(capsys):
    assert main(["demo", "gcn", "--graph", "reddit"]) == 2
    assert "graph must be one of" in capsys.readouterr().err


def test_build_parameters_follow_the_graph():
    from golden.aggregate import gcn_normalise, generate, spawn
    from rtl.registry import get_block

    spawned = spawn(gcn_normalise(generate("cora", seed=1)), lanes=4, weighted=True)
    params = demo_gcn.pipeline_params(spawned, 4, 16)
    assert params["rows"] == spawned.n_rows >= 2708 and params["row_bits"] == 12
    get_block("aggregation_pipeline").resolve(params)
    get_block("tiled_gemm").resolve(demo_gcn.gemm_params(2708, 32, 16, 7))


@pytest.mark.slow
def test_demo_runs_bit_exact():
    result = demo_gcn.run_demo()
    report = demo_gcn.format_report(result)
    assert result.bit_exact, report
    assert result.within_bound, report
    assert [stage.block for stage in result.stages] == ["tiled_gemm", "aggregation_pipeline"] * 2
