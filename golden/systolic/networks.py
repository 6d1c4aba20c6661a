"""Layer lists for the partition sweep: ResNet-50 as 54 GEMM layers (DPT Section 4.1).

ResNet-50 here is torchvision's (He et al. 2016, "v1.5": the stride-2 of a downsampling bottleneck
sits on its 3 x 3 conv; ``stride_on_3x3=False`` gives the original v1 with it on the first 1 x 1),
224 x 224 inputs: conv1, 16 bottleneck blocks of three convs, the four projection shortcuts and the
classifier, 53 + 1 = 54 layers, matching DPT's count. Layers are numbered in torchvision's module
order (inside a block: conv a, b, c, then the projection ``d``), so partition index ``i`` puts
layers ``0 .. i-1`` on the smartSSDs. Pooling, batch norm, ReLU and the residual additions are not
GEMMs and cost nothing here; max pooling runs with conv1, global average pooling with the last conv,
and a residual addition with the last layer of its block.

Every layer names the tensors it reads (its GEMM input, and the shortcut for the layer that performs
a block's addition), so :meth:`Network.live_elements` can give the activations that cross a cut.
"""

from dataclasses import dataclass

from .conv import ConvLayer

__all__ = ["Network", "NetworkLayer", "resnet50"]


@dataclass(frozen=True)
class NetworkLayer:
    """A GEMM layer with the tensors it reads and writes.

    Attributes
    ----------
    layer : ConvLayer
    reads : tuple of str
    writes : str
    """

    layer: ConvLayer
    reads: tuple
    writes: str


@dataclass(frozen=True)
class Network:
    """A chain of GEMM layers with named activation tensors.

    Attributes
    ----------
    name : str
    input_tensor : str
        Produced by the data loader (index -1).
    layers : tuple of NetworkLayer
    tensor_elements : dict
        Elements per sample of every tensor.
    """

    name: str
    input_tensor: str
    layers: tuple
    tensor_elements: dict

    def live_elements(self, cut):
        """Elements per sample produced before layer ``cut`` and read at or after it.

        Parameters
        ----------
        cut : int
            Partition index in [1, len(layers)]: layers ``0 .. cut-1`` run before the cut.

        Returns
        -------
        int
        """
        if not 1 <= cut <= len(self.layers):
            raise ValueError(f"cut must be in [1, {len(self.layers)}], not {cut}")
        produced = {self.input_tensor} | {entry.writes for entry in self.layers[:cut]}
        needed = {name for entry in self.layers[cut:] for name in entry.reads}
        return sum(self.tensor_elements[name] for name in produced & needed)


def resnet50(*, image_size=224, classes=1000, stride_on_3x3=True):
    """ResNet-50 as 54 GEMM layers (see the module docstring).

    Parameters
    ----------
    image_size : int
        Input height and width (a multiple of 32).
    classes : int
    stride_on_3x3 : bool
        True for torchvision's v1.5, False for the original v1.

    Returns
    -------
    Network
    """
    if not isinstance(image_size, int) or image_size < 32 or image_size % 32:
        raise ValueError(f"image_size must be a positive multiple of 32, not {image_size!r}")
    entries, sizes = [], {"image": 3 * image_size**2}

    def add(layer, reads, writes, size):
        entries.append(NetworkLayer(layer, tuple(reads), writes))
        sizes[writes] = size

    stem = ConvLayer("conv1", 3, image_size, image_size, 64, 7, 2, 3)
    side = image_size // 4  # conv1 stride 2, then 3 x 3 max pooling stride 2
    add(stem, ["image"], "pool1", 64 * side**2)
    block_input, channels = "pool1", 64
    stages = ((64, 256, 3), (128, 512, 4), (256, 1024, 6), (512, 2048, 3))
    for stage, (width, out_channels, blocks) in enumerate(stages, start=2):
        for block in range(blocks):
            stride = 2 if block == 0 and stage > 2 else 1
            stride_a, stride_b = (1, stride) if stride_on_3x3 else (stride, 1)
            prefix = f"conv{stage}_{block + 1}"
            out_side = side // stride
            last_block = stage == 5 and block == blocks - 1
            # The last block's output is consumed only after global average pooling.
            output, output_size = ("pool5", out_channels) if last_block else (
                f"{prefix}_out", out_channels * out_side**2)
            projection = block == 0
            add(ConvLayer(f"{prefix}a", channels, side, side, width, 1, stride_a), [block_input],
                f"{prefix}a", width * (side // stride_a) ** 2)
            add(ConvLayer(f"{prefix}b", width, side // stride_a, side // stride_a, width, 3, stride_b, 1),
                [f"{prefix}a"], f"{prefix}b", width * out_side**2)
            if projection:
                add(ConvLayer(f"{prefix}c", width, out_side, out_side, out_channels, 1), [f"{prefix}b"],
                    f"{prefix}c", out_channels * out_side**2)
                add(ConvLayer(f"{prefix}d", channels, side, side, out_channels, 1, stride),
                    [block_input, f"{prefix}c"], output, output_size)
            else:
                add(ConvLayer(f"{prefix}c", width, out_side, out_side, out_channels, 1),
                    [f"{prefix}b", block_input], output, output_size)
            block_input, channels, side = output, out_channels, out_side
    add(ConvLayer("fc", channels, 1, 1, classes, 1), [block_input], "logits", classes)
    return Network("ResNet-50", "image", tuple(entries), sizes)
