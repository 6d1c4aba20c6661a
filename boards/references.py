"""Published figures NearTrain is measured against (the seed papers' own tables).

``SMART_INFINITY``: Smart-Infinity (HPCA'24) Table III, its HLS Adam updater on the SmartSSD's
KU15P, as (share of the device, device total) per resource: 33.66 % of 522K LUT, 27.13 % of
984 BRAM36, 34.38 % of 128 URAM, 11.03 % of 1,968 DSP48E2.
"""

__all__ = ["SMART_INFINITY"]

SMART_INFINITY = {"LUT": (0.3366, 522_000), "BRAM": (0.2713, 984), "URAM": (0.3438, 128),
                  "DSP48E2": (0.1103, 1968)}
