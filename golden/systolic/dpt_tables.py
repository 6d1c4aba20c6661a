"""DPT's published ResNet-50 and Faster R-CNN results (Jang et al., IEEE CAL 2021, Tables 3 and 4).

Table 3's five ResNet-50 entries for B = 32, 64, 256, 512 fit ``1,811,912 B + 948,602`` to the cycle;
the printed B = 128 value, 262,873,338, is 30,000,000 above that line (232,873,338 fits), which we
read as a typo. :data:`TABLE3_RESNET50_FIT` records the fit.
"""

__all__ = ["TABLE3_FASTER_RCNN", "TABLE3_FASTER_RCNN_FIT", "TABLE3_RESNET50", "TABLE3_RESNET50_FIT",
           "TABLE4_FASTER_RCNN", "TABLE4_RESNET50"]

# The mini-batch sizes of Tables 3 and 4; Table 4's columns (smartSSDs, mini-batch) in the paper's order.
BATCHES = (32, 64, 128, 256, 512)
TABLE4_COLUMNS = tuple((ssds, batch) for batch in BATCHES for ssds in (2, 4))


def _table3(cycles):
    """``{mini-batch: cycles}`` from the paper's row (one value per :data:`BATCHES`)."""
    return dict(zip(BATCHES, cycles, strict=True))


def _table4(rows):
    """``{(test case, smartSSDs, mini-batch): (improvement in percent, partition index)}`` from the
    paper's rows: ``{test case: [cell per column of TABLE4_COLUMNS]}``."""
    return {(case, ssds, batch): cell for case, cells in rows.items()
            for (ssds, batch), cell in zip(TABLE4_COLUMNS, cells, strict=True)}


# Mini-batch size -> cycles on a 96 x 96 NPU alone.
TABLE3_RESNET50 = _table3([58_929_786, 116_910_970, 262_873_338, 464_798_074, 928_647_546])

# (cycles per sample, constant) of the line through the B = 32, 64, 256 and 512 entries.
TABLE3_RESNET50_FIT = (1_811_912, 948_602)

# Table 4, ResNet-50: per test case, (improvement in percent, partition index) per column.
TABLE4_RESNET50 = _table4({
    1: [(5.4, 11), (15.9, 25), (6.5, 11), (20.5, 31), (7.1, 11), (23.9, 31), (7.4, 11), (25.6, 31), (7.5, 11), (26.5, 31)],  # noqa: E501 (one paper row per line)
    2: [(3.9, 12), (10.8, 25), (5.1, 12), (17.4, 25), (7.0, 24), (21.9, 35), (8.0, 24), (26.9, 35), (8.5, 24), (29.4, 35)],  # noqa: E501 (one paper row per line)
    3: [(2.4, 2), (6.8, 10), (3.5, 6), (9.5, 12), (4.2, 9), (11.0, 11), (4.6, 9), (11.8, 11), (4.9, 9), (12.2, 11)],  # noqa: E501 (one paper row per line)
})

# Faster R-CNN (Table 3's second row, Table 4's lower half). Its five Table 3 entries lie exactly on
# ``1,517,892 B + 864,393``; :data:`TABLE3_FASTER_RCNN_FIT` records that line.
TABLE3_FASTER_RCNN = _table3([49_436_937, 98_009_481, 195_154_569, 389_444_745, 778_025_097])

TABLE3_FASTER_RCNN_FIT = (1_517_892, 864_393)

TABLE4_FASTER_RCNN = _table4({
    1: [(6.0, 11), (17.7, 25), (7.2, 11), (21.9, 27), (7.9, 11), (24.9, 29), (8.2, 11), (26.4, 29), (8.3, 11), (27.2, 29)],  # noqa: E501 (one paper row per line)
    2: [(4.6, 12), (12.9, 25), (6.0, 12), (20.8, 25), (7.8, 22), (25.2, 29), (8.8, 22), (28.8, 29), (9.3, 22), (31.0, 32)],  # noqa: E501 (one paper row per line)
    3: [(2.9, 2), (8.4, 10), (4.3, 6), (11.7, 12), (5.2, 9), (13.5, 11), (5.7, 9), (14.5, 11), (6.0, 9), (15.0, 11)],  # noqa: E501 (one paper row per line)
})
