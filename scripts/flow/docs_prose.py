"""Measurements in the prose of ``docs/``: each is a generated value, a constant, a quote, or a problem.

A measured figure restated in a sentence goes stale as silently as a hand-typed table, so
``neartrain docs --check`` (:func:`scripts.flow.docs.check`) fails on a number with a
measurement's unit or word (:data:`MEASUREMENT`: LUT, FF, DSP, BRAM, EBR, cycles, MHz, Fmax,
``per cycle``, GB/s, a speed-up such as ``1.9x``, a wall time in s, min or h, a percentage, a loss or
an accuracy) written outside the generated blocks and code fences of ``docs/*.md`` and the
top-level ``README.md``. An author says what such a figure is in one of three ways:

- **a generated value**: ``<!-- value: TABLE | ROW | COLUMN -->1.23<!-- /value -->`` shows one
  cell of a generated table (``docs/data/TABLE.json``). ``ROW`` is the row's first cell, or its
  first cells separated by ``|`` where one is not enough, or ``#N`` (the N-th row, from 1) where
  no cell names the row; ``COLUMN`` is a header. A last
  ``| fmt=SPEC`` formats the cell's leading number with Python's format ``SPEC`` (``.1f``,
  ``,``), so ``115.27 (fails)`` may read ``115.3``. ``neartrain docs`` rewrites the text between
  the markers from the data and ``--check`` fails where it differs, so the sentence stays true
  when the table is measured again.
- **a design constant** (a latency by construction, a clock constraint, a parameter's value):
  ``<!-- constant -->`` (optionally ``<!-- constant: why -->``).
- **a publication's figure**: ``<!-- quoted: SOURCE -->``.

A ``constant`` or ``quoted`` marker on a line with text covers the figures that start on that
line; alone on its line it covers the next paragraph, list or table (up to a blank line). A
figure with no generator and no cheap way to regenerate it is dropped, not marked. Bit widths
(``512-bit``), parameters (``lanes=16``), sizes (``16x16``, ``4 x 4``), section numbers, years and
inline code carry no measurement unit and pass unmarked, and so do percentages that set an input
(a Top-K ratio, a stall probability, a density).
"""

import re

__all__ = ["MEASUREMENT", "VALUE", "ValueMarkerError", "figures", "value_text", "stale_values", "fill_values"]

_NUMBER = r"(?<![\w.,/=^-])~?\d+(?:,\d{3})*(?:\.\d+)?"
# Units after a number, case-sensitive (``2S`` and ``2 H`` are terms of a formula). A speed-up is
# ``1.9x`` or ``1.9×`` with no space and no digit after (``4 x 4`` and ``16x16`` are sizes).
_UNIT = (r"(?:LUT\d*s?|FFs?|flip-flops?|DSP(?:48E2)?s?|BRAM(?:18K?|36)?s?|EBRs?|URAMs?|CARRY\d*s?|MULT18s?"
         r"|TRELLIS_\w+|slices?|cycles?|MHz|GHz|[kMG]i?B/s|[GM]bit/s|ns|µs|ms|s|seconds?|min(?:utes?)?|h|hours?"
         r"|%|percent|times)")
MEASUREMENT = re.compile(
    rf"{_NUMBER}(?:\s?[kM])?\s?{_UNIT}(?![\w/])"
    rf"|{_NUMBER}[x×](?![\w/])"
    rf"|{_NUMBER}\s?(?:[\w.]+\s)?(?:per|/)\s?cycle\b"
    rf"|\b(?:[Ll]oss|[Aa]ccuracy|Fmax|[Ss]peed-?ups?|hit rate|perplexity)\s?(?:of|is|was|=|:)?\s?{_NUMBER}"
    rf"(?![\w-])")

VALUE = re.compile(r"<!-- value: (?P<ref>[^>\n]*?) -->(?P<shown>[^\n]*?)<!-- /value -->")
_MARK = re.compile(r"<!-- (?:constant(?::[^>\n]*)?|quoted: [^>\n]+) -->")
_FENCE = re.compile(r"^\s*```.*?^\s*```[^\n]*$", re.S | re.M)
# A percentage that sets a test's or a model's input, not one measured: a Top-K ratio, a stall or
# pause probability, a density, a share of zeros.
_PERCENT = rf"{_NUMBER}\s?%"
_SETTING = re.compile(rf"(?:Top-K(?: streams| pairs)?(?: at)?|densit(?:y|ies))\s{_PERCENT}"
                      rf"(?:(?:,|\sand|\sor|\sto|-)\s?{_PERCENT})*"
                      rf"|(?:gaps|backpressure|stalls?|pauses) \({_PERCENT}\)"
                      rf"|{_PERCENT}(?= (?:random )?(?:stall|pause|gap|backpressure|densit|holes|zeros"
                      rf"|subnormals|selection))")
_CODE = re.compile(r"`(?:[^`\n]|\n(?!\s*\n))+`")  # inline code (a name, a command), maybe over lines
_LEADING_NUMBER = re.compile(r"-?[\d,]*\.?\d+(?:e[-+]?\d+)?", re.I)


class ValueMarkerError(Exception):
    """A ``<!-- value: ... -->`` marker whose table, row or column is not in the data."""


def _blank(match):
    """The match's text as blank lines, so that the line numbers after it stay put."""
    return "\n" * match[0].count("\n")


def _covered_lines(lines):
    """Line numbers (from 1) that a ``constant`` or ``quoted`` marker covers."""
    covered, pending, started = set(), False, False
    for number, line in enumerate(lines, 1):
        stripped = line.strip()
        mark = _MARK.search(stripped)
        if mark and mark[0] == stripped:  # a marker alone on its line: the next block
            pending, started = True, False
            continue
        if mark:
            covered.add(number)
        if pending and stripped:
            covered.add(number)
            started = True
        elif pending and started:
            pending = False  # the blank line that ends the block
    return covered


def figures(text, blocks):
    """``(line, figure)`` of each measurement in ``text`` that no marker accounts for.

    ``blocks`` is the generated-block pattern; those blocks, code fences, inline code and value
    spans are skipped.
    """
    text = blocks.sub(_blank, text)
    text = _FENCE.sub(_blank, text)
    text = VALUE.sub("VALUE", text)  # a cited value is checked against its table instead
    text = _CODE.sub(lambda match: "CODE" + _blank(match), text)
    text = _SETTING.sub(lambda match: "SETTING" + _blank(match), text)
    covered = _covered_lines(text.splitlines())
    found = []
    for match in MEASUREMENT.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        if line not in covered:
            found.append((line, " ".join(match[0].split())))
    return found


def _cell_text(cell, spec, fmt):
    if fmt is not None:
        number = _LEADING_NUMBER.search(str(cell))
        if number is None:
            raise ValueMarkerError(f"cell {cell!r} has no number to format with {fmt!r}")
        digits = number[0].replace(",", "")
        value = float(digits) if any(c in digits for c in ".eE") else int(digits)
        return format(value, fmt)
    if isinstance(cell, float):
        return format(cell, spec.get("floatfmt", "g"))
    return str(cell)


def value_text(ref, specs):
    """The text that ``<!-- value: ref -->`` shows, from ``specs`` (``{table name: spec}``)."""
    parts = [part.strip() for part in ref.split("|")]
    fmt = parts.pop()[4:] if parts and parts[-1].startswith("fmt=") else None
    if len(parts) < 3:
        raise ValueMarkerError(f"value {ref!r} needs TABLE | ROW | COLUMN")
    name, keys, column = parts[0], parts[1:-1], parts[-1]
    spec = specs.get(name)
    if spec is None:
        raise ValueMarkerError(f"value {ref!r}: no table {name!r} in docs/data")
    if column not in spec["headers"]:
        raise ValueMarkerError(f"value {ref!r}: table {name!r} has no column {column!r}")
    if len(keys) == 1 and re.fullmatch(r"#\d+", keys[0]):  # a row by its number, where no cell names it
        rows = spec["rows"][int(keys[0][1:]) - 1:int(keys[0][1:])] if int(keys[0][1:]) else []
    else:
        rows = [row for row in spec["rows"] if [str(cell) for cell in row[:len(keys)]] == keys]
    if len(rows) != 1:
        raise ValueMarkerError(f"value {ref!r}: {len(rows)} rows of {name!r} start with {keys} (need one)")
    return _cell_text(rows[0][spec["headers"].index(column)], spec, fmt)


def _values(text):
    """The value markers of ``text`` outside code fences and inline code (where they are examples)."""
    unfenced = _FENCE.sub(lambda match: re.sub(r"[^\n]", " ", match[0]), text)  # the same offsets
    code = [match.span() for pattern, where in ((_FENCE, text), (_CODE, unfenced))
            for match in pattern.finditer(where)]
    return [match for match in VALUE.finditer(text)
            if not any(start <= match.start() < end for start, end in code)]


def stale_values(text, specs):
    """``(line, message)`` for each value marker that names no cell or shows other text."""
    problems = []
    for match in _values(text):
        line = text.count("\n", 0, match.start()) + 1
        try:
            shown = value_text(match["ref"], specs)
        except ValueMarkerError as error:
            problems.append((line, str(error)))
            continue
        if shown != match["shown"]:
            problems.append((line, f"value {match['ref']!r} shows {match['shown']!r}, its table holds "
                                   f"{shown!r} (regenerate with `neartrain docs`)"))
    return problems


def fill_values(text, specs):
    """``text`` with every value marker's text rewritten from its table (unknown cells kept)."""
    for match in reversed(_values(text)):
        try:
            shown = value_text(match["ref"], specs)
        except ValueMarkerError:
            continue  # reported by stale_values
        marker = f"<!-- value: {match['ref']} -->{shown}<!-- /value -->"
        text = text[:match.start()] + marker + text[match.end():]
    return text
