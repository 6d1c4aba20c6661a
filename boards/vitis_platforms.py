"""The Vitis platforms ``neartrain vitis`` writes ``v++`` link configurations for.

Each entry names the board of :mod:`boards.catalog` it runs on, the Vitis platform, the
memory banks an ``m_axi`` port can be connected to (``sp=`` in ``[connectivity]``) and
where those names come from. Platform names change with every shell release: check the
installed one with ``platforminfo -l`` and pass ``--platform`` to ``v++`` to override.
"""

from dataclasses import dataclass

__all__ = ["VitisPlatform", "VITIS_PLATFORMS"]


@dataclass(frozen=True)
class VitisPlatform:
    """A Vitis shell on one card.

    Parameters
    ----------
    board : str
        Name in :data:`boards.catalog.BOARDS`.
    platform : str
        Vitis platform (``v++ --platform``).
    banks : tuple of str
        Memory banks for ``sp=`` connectivity; ports are spread over them in order.
    source : str
        Where the platform and bank names come from.
    """

    board: str
    platform: str
    banks: tuple
    source: str


VITIS_PLATFORMS = {
    "smartssd": VitisPlatform(
        board="smartssd",
        platform="xilinx_u2_gen3x4_xdma_gc_2_202110_1",
        banks=("DDR[0]",),
        source="Samsung SmartSSD Vitis platform (Vitis 2021.2 is the last release supporting it; "
               "sangwoojun/smartssd_bsv README); one 4 GB DDR4 bank (Smart-Infinity Sec. VII-A)",
    ),
    "alveo-u250": VitisPlatform(
        board="alveo-u250",
        platform="xilinx_u250_gen3x16_xdma_4_1_202210_1",
        banks=("DDR[0]", "DDR[1]", "DDR[2]", "DDR[3]"),
        source="AMD UG1120 (Alveo data center accelerator card platforms), U250 gen3x16 XDMA 4.1; "
               "four DDR4 channels (AMD DS962)",
    ),
    "alveo-u280": VitisPlatform(
        board="alveo-u280",
        platform="xilinx_u280_gen3x16_xdma_1_202211_1",
        banks=tuple(f"HBM[{i}]" for i in range(32)),
        source="AMD UG1120, U280 gen3x16 XDMA 1; 32 HBM2 pseudo-channels of 256 MB (AMD DS963)",
    ),
}
