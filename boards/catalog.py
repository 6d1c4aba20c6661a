"""The boards NearTrain is sized for, with the source of every figure.

Seed papers (``/work/shared/seeds/``): Smart-Infinity (HPCA 2024) Section VII-A and
Table III; DPT (IEEE CAL 2021) Table 2; the SmartNIC dissertation (2024) Sections 3.4.1
and 4.5.1 with Table 4.2. Where a seed rounds a count ("522K"), the exact count is taken
from the vendor data sheet named next to it.

Block RAM is counted in 36 Kb blocks on the AMD devices (as ``scripts.flow.synth`` counts
``RAMB36E2``) and in 18 Kb EBR blocks on ECP5. ``CARRY`` is one carry block per 8 LUTs
on every AMD part here: one CARRY8 per UltraScale+ CLB, four LOOKAHEAD8 per 32-LUT
Versal CLB.
"""

from .board import Board, Clock

__all__ = ["BOARDS", "REFERENCE"]

_DS890 = "AMD DS890 (UltraScale Architecture and Product Data Sheet: Overview), XCKU15P"
_UG574_CARRY = "one CARRY8 per 8-LUT CLB (AMD UG574), LUT / 8"

_SMARTSSD = Board(
    name="smartssd",
    title="Samsung SmartSSD (Kintex UltraScale+ KU15P)",
    device="XCKU15P",
    target="xcup",
    budgets={"LUT": 522_720, "FF": 1_045_440, "CARRY": 65_340, "DSP48E2": 1968, "BRAM": 984, "URAM": 128},
    sources={
        "LUT": f"Smart-Infinity Sec. VII-A and Table III ('522K'), DPT Table 2 ('523K'); exact: {_DS890}",
        "FF": f"DPT Table 2 ('1,045K'); exact: {_DS890}",
        "CARRY": _UG574_CARRY,
        "DSP48E2": "Smart-Infinity Sec. VII-A and Table III (1968); DPT Table 2 (1,968)",
        "BRAM": "Smart-Infinity Sec. VII-A and Table III (984 36 Kb blocks)",
        "URAM": "Smart-Infinity Table III (128)",
    },
    clocks=(Clock("kernel", 300e6, "NearTrain's updater target (DDR4 at 64 B/cycle at 300 MHz); "
                                   "Smart-Infinity (HPCA'24) does not state its kernel clock"),),
    memory="4 GB DDR4 (Smart-Infinity, HPCA'24, Sec. VII-A and Table II); about 19.2 GB/s, a 64-bit "
           "DDR4-2400 channel (Smart-Infinity gives no bandwidth)",
    notes="The SmartSSD shell (PCIe, DDR controller) takes part of the device; budgets are the whole part.",
)

def _alveo_rams(sheet, budgets, bram_mb, uram_mb):
    """An Alveo card's ``BRAM`` and ``URAM`` sources: the data sheet's megabits as the budgets' blocks."""
    return {"BRAM": f"{sheet}: {bram_mb} Mb of block RAM = {budgets['BRAM']:,} x 36 Kb",
            "URAM": f"{sheet}: {uram_mb} Mb of UltraRAM = {budgets['URAM']:,} x 288 Kb"}


def _alveo_kernel_clock(card):
    """The default kernel clock of the ``card``'s XDMA platforms."""
    return Clock("kernel", 300e6, f"AMD UG1120 (Alveo platforms): default kernel clock of the {card} "
                                  "XDMA platforms")


_DS962 = "AMD DS962 (Alveo U200 and U250 Data Center Accelerator Cards Data Sheet)"
_U250_BUDGETS = {"LUT": 1_728_000, "FF": 3_456_000, "CARRY": 216_000, "DSP48E2": 12_288, "BRAM": 2688,
                 "URAM": 1280}
_U250 = Board(
    name="alveo-u250",
    title="AMD Alveo U250 (XCU250)",
    device="XCU250",
    target="xcup",
    budgets=_U250_BUDGETS,
    sources={
        "LUT": f"DPT Table 2 (1,728K); {_DS962}",
        "FF": f"DPT Table 2 (3,456K); {_DS962}",
        "CARRY": _UG574_CARRY,
        "DSP48E2": f"DPT Table 2 (12,288); {_DS962}",
        **_alveo_rams(_DS962, _U250_BUDGETS, 94.5, 360),
    },
    clocks=(_alveo_kernel_clock("U250"),),
    memory=f"64 GB DDR4 in 4 channels ({_DS962})",
    notes="DPT uses the U250 as the host-side NPU (Table 2).",
)

_DS963 = "AMD DS963 (Alveo U280 Data Center Accelerator Card Data Sheet)"
_U280_BUDGETS = {"LUT": 1_303_680, "FF": 2_607_360, "CARRY": 162_960, "DSP48E2": 9024, "BRAM": 2016,
                 "URAM": 960}
_U280 = Board(
    name="alveo-u280",
    title="AMD Alveo U280 (XCU280)",
    device="XCU280",
    target="xcup",
    budgets=_U280_BUDGETS,
    sources={
        "LUT": f"{_DS963} (1,304K LUTs)",
        "FF": f"{_DS963} (2,607K registers)",
        "CARRY": _UG574_CARRY,
        "DSP48E2": f"{_DS963} (9,024 DSP slices)",
        **_alveo_rams(_DS963, _U280_BUDGETS, 70.9, 270),
    },
    clocks=(_alveo_kernel_clock("U280"),
            Clock("achieved", 294e6, "dissertation Sec. 4.5.1, Table 4.2 (FCsN kernels and runtime)")),
    memory=f"8 GB HBM2 and 32 GB DDR4 ({_DS963}); the dissertation's SmartNIC card (Sec. 4.5.1)",
    notes="Table 4.2 of the dissertation uses 834,876 LUT (60%) and 2,724 DSP (30%) on this card.",
)

_DS950 = "AMD DS950 (Versal Architecture and Product Data Sheet: Overview), XCVC1902"
_VCK5000 = Board(
    name="vck5000",
    title="AMD VCK5000 (Versal XCVC1902, programmable logic only)",
    device="XCVC1902",
    target="xcup",
    budgets={"LUT": 899_840, "FF": 1_799_680, "CARRY": 112_480, "DSP48E2": 1968, "BRAM": 967, "URAM": 463},
    sources={
        "LUT": "dissertation Sec. 3.4.1 (899,840 LUTs)",
        "FF": "dissertation Sec. 3.4.1 (1,799,680 CLB flip-flops)",
        "CARRY": "four LOOKAHEAD8 per 32-LUT Versal CLB (AMD UG1273, AM005), LUT / 8",
        "DSP48E2": "dissertation Sec. 3.4.1 (1,968 DSP engines; DSP58, counted one for one)",
        "BRAM": f"{_DS950}: 967 x 36 Kb (the dissertation's '34 MB' of block RAM, Sec. 3.4.1, is 34 Mb)",
        "URAM": f"{_DS950}: 463 x 288 Kb",
    },
    clocks=(Clock("pl", 273e6, "dissertation Sec. 3.4.1 (PL 273 MHz, NoC 800 MHz, AIE 1 GHz)"),),
    memory="4 DDR4 channels, 100 GB/s peak (dissertation Sec. 3.4.1)",
    notes="Synthesised with the xcup target: Versal's DSP58 and LOOKAHEAD8 are counted against the "
          "DSP48E2 and CARRY columns one for one, an approximation. The 400 AI Engines are not budgeted.",
)

_ECP5_DS = "Lattice FPGA-DS-02012 (ECP5 and ECP5-5G Family Data Sheet), Table 1.1, LFE5U-85"
_ECP5_BUDGETS = {"LUT4": 83_640, "FF": 83_640, "MULT18": 156, "EBR": 208}
_ECP5_SOURCES = {
    "LUT4": f"{_ECP5_DS} ('84K'); exact: nextpnr-ecp5 85k device (TRELLIS_COMB available)",
    "FF": "two flip-flops per slice of two LUT4s (FPGA-DS-02012 Sec. 2.2); nextpnr-ecp5 TRELLIS_FF available",
    "MULT18": f"{_ECP5_DS} (156 18x18 multipliers)",
    "EBR": f"{_ECP5_DS} (208 sysMEM EBR blocks of 18 Kb)",
}

_ULX3S = Board(
    name="ulx3s-85f",
    title="Radiona ULX3S (Lattice ECP5 LFE5U-85F-6BG381C)",
    device="LFE5U-85F",
    target="ecp5",
    budgets=dict(_ECP5_BUDGETS),
    sources=dict(_ECP5_SOURCES),
    clocks=(Clock("oscillator", 25e6, "amaranth_boards.ulx3s resource clk25 (ULX3S schematic)"),),
    memory="32 MB SDRAM (amaranth_boards.ulx3s resource sdram)",
    platform="amaranth_boards.ulx3s:ULX3S_85F_Platform",
    clock_resource="clk25",
    led=("led", 0, None),
    notes="Same device, package and speed grade as the Berkeley HardFloat reference figures in docs/fp.md.",
)

_ECPIX5 = Board(
    name="ecpix5-85",
    title="LambdaConcept ECPIX-5 (Lattice ECP5-5G LFE5UM5G-85F-8BG554C)",
    device="LFE5UM5G-85F",
    target="ecp5",
    budgets=dict(_ECP5_BUDGETS),
    sources=dict(_ECP5_SOURCES),
    clocks=(Clock("oscillator", 100e6, "amaranth_boards.ecpix5 resource clk100"),),
    memory="DDR3 (amaranth_boards.ecpix5 resource ddr3)",
    platform="amaranth_boards.ecpix5:ECPIX585Platform",
    clock_resource="clk100",
    led=("rgb_led", 0, "r"),
    notes="Speed grade 8: Fmax is not comparable with the speed-6 ULX3S.",
)

BOARDS = {board.name: board for board in (_SMARTSSD, _U250, _U280, _VCK5000, _ULX3S, _ECPIX5)}

# The board a sweep is measured against when the command line names none.
REFERENCE = {"xcup": "smartssd", "ecp5": "ulx3s-85f"}
