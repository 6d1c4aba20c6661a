"""Smart-Infinity's (HPCA 2024) published figures that the system model is compared with.

Only numbers the paper's text and tables state: its plots (Figs. 9, 11, 16) are images, so
where a figure is quoted here it is the range or value the text gives for it.
"""

__all__ = ["FIG9_SPEEDUPS", "FIG9_UPDATE_SHARE", "FIG10_SPEEDUPS", "FIG11", "TABLE_I", "TABLE_IV"]

# §VII-C, over the GPT-2 and BERT models of Fig. 9 (A5000): (devices, config) -> (low, high).
FIG9_SPEEDUPS = {(6, "SU"): (1.18, 1.24), (10, "SU"): (1.54, 1.60), (10, "SU+O"): (1.60, 1.66),
                 (10, "SU+O+C"): (1.85, 1.98)}
# §VII-C: GPT-2 8.4B, 6 SSDs: the baseline's update with state upload/offload, share of the step.
FIG9_UPDATE_SHARE = ("GPT-2 8.4B", 6, 0.7557)
# §VII-D, Fig. 10: GPT-2 33.0B, Smart-Infinity over the baseline at (6, 10) SSDs.
FIG10_SPEEDUPS = {("GPT-2 33.0B", 6): 1.37, ("GPT-2 33.0B", 10): 1.88}
# §VII-E, Fig. 11 (GPT-2 4.0B): the baseline stops scaling at 4 SSDs; 1 CSD is slightly slower
# than the baseline; up to 2.11x with 10 SSDs on the A100.
FIG11 = {"baseline saturates at": 4, "A100 at 10": 2.11}
# Table I, bytes over the shared system interconnect per step, in units of M (FP16 model bytes):
# config -> {(what, direction): M}. "c" stands for the compression ratio.
TABLE_I = {
    "BASE": {("states", "read"): 6, ("states", "write"): 6, ("gradients", "read"): 2,
             ("gradients", "write"): 2},
    "SU": {("states", "read"): 2, ("states", "write"): 0, ("gradients", "read"): 0,
           ("gradients", "write"): 2},
    "SU+O+C": {("states", "read"): 2, ("states", "write"): 0, ("gradients", "read"): 0,
               ("gradients", "write"): "2c"},
}
# Table IV, 6 SSDs, fine-tuning: model -> {config or compression ratio: speed-up over the baseline}.
TABLE_IV = {
    "GPT2-0.77B": {"SU+O": 1.11, 0.10: 1.23, 0.05: 1.29, 0.02: 1.35, 0.01: 1.44},
    "GPT2-1.6B": {"SU+O": 1.29, 0.10: 1.45, 0.05: 1.54, 0.02: 1.54, 0.01: 1.53},
    "BERT-0.34B": {"SU+O": 1.10, 0.10: 1.23, 0.05: 1.34, 0.02: 1.38, 0.01: 1.40},
}
