"""DPT's published ResNet-50 results (Jang et al., IEEE CAL 2021, Tables 3 and 4), for comparison.

Table 3's five ResNet-50 entries for B = 32, 64, 256, 512 fit ``1,811,912 B + 948,602`` to the cycle;
the printed B = 128 value, 262,873,338, is 30,000,000 above that line (232,873,338 fits), which we
read as a typo. :data:`TABLE3_RESNET50_FIT` records the fit.
"""

__all__ = ["TABLE3_RESNET50", "TABLE3_RESNET50_FIT", "TABLE4_RESNET50"]

# Mini-batch size -> cycles on a 96 x 96 NPU alone.
TABLE3_RESNET50 = {
    32: 58_929_786,
    64: 116_910_970,
    128: 262_873_338,
    256: 464_798_074,
    512: 928_647_546,
}

# (cycles per sample, constant) of the line through the B = 32, 64, 256 and 512 entries.
TABLE3_RESNET50_FIT = (1_811_912, 948_602)

# (test case, smartSSDs, mini-batch) -> (improvement in percent, partition index).
TABLE4_RESNET50 = {
    (1, 2, 32): (5.4, 11), (1, 4, 32): (15.9, 25), (1, 2, 64): (6.5, 11), (1, 4, 64): (20.5, 31),
    (1, 2, 128): (7.1, 11), (1, 4, 128): (23.9, 31), (1, 2, 256): (7.4, 11), (1, 4, 256): (25.6, 31),
    (1, 2, 512): (7.5, 11), (1, 4, 512): (26.5, 31),
    (2, 2, 32): (3.9, 12), (2, 4, 32): (10.8, 25), (2, 2, 64): (5.1, 12), (2, 4, 64): (17.4, 25),
    (2, 2, 128): (7.0, 24), (2, 4, 128): (21.9, 35), (2, 2, 256): (8.0, 24), (2, 4, 256): (26.9, 35),
    (2, 2, 512): (8.5, 24), (2, 4, 512): (29.4, 35),
    (3, 2, 32): (2.4, 2), (3, 4, 32): (6.8, 10), (3, 2, 64): (3.5, 6), (3, 4, 64): (9.5, 12),
    (3, 2, 128): (4.2, 9), (3, 4, 128): (11.0, 11), (3, 2, 256): (4.6, 9), (3, 4, 256): (11.8, 11),
    (3, 2, 512): (4.9, 9), (3, 4, 512): (12.2, 11),
}
