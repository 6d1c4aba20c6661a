"""Faster R-CNN as 46 GEMM layers, DPT's second network (Section 4.1, its ref. [12]).

DPT names the network (Ren et al. 2015, "Faster R-CNN") and its size, 46 layers, but not its backbone
or input size. Our reading, with the reasons:

* **Backbone: ResNet-50 up to conv4_x ("C4")**, the trunk He et al. (DPT ref. [11], Section 4.1 of
  theirs) put under Faster R-CNN: conv1 and the 3 + 4 + 6 bottleneck blocks of stages 2-4, 43 GEMM
  layers numbered as in :func:`golden.systolic.networks.resnet50` (the same 43 first layers).
  Ren et al.'s own backbones (ZF, VGG-16) give 20 layers or fewer with the RPN and head, far from 46.
* **Region proposal network** (Ren et al. Section 3.1): a 3 x 3 conv to a 512-d feature (their VGG-16
  width; an assumption for the ResNet trunk), then two sibling 1 x 1 convs, ``2k`` objectness scores
  and ``4k`` box offsets for ``k = 9`` anchors. 43 + 3 = 46, DPT's count.
* **No RoI head**: with the RPN the count is already 46, so DPT's list cannot also hold the C4 head
  (conv5_x per region of interest, 10 more layers, and the two output layers). Proposal selection and
  RoI pooling are not GEMMs.
* **224 x 224 inputs** (assumption; Ren et al. rescale to a 600-pixel short side). DPT's Table 3 has
  Faster R-CNN at 0.84 of ResNet-50's cycles per sample; a 600 x 1000 input would cost about 12x
  ResNet-50 at 224, so DPT's inputs were small.
"""

from dataclasses import replace

from .conv import ConvLayer
from .networks import NetworkLayer, resnet50

__all__ = ["ANCHORS", "C4_LAYERS", "RPN_CHANNELS", "faster_rcnn"]

C4_LAYERS = 43    # conv1 and stages 2-4 of ResNet-50 (1 + 10 + 13 + 19 GEMM layers)
RPN_CHANNELS = 512  # Ren et al. Section 3.1, VGG-16's RPN width
ANCHORS = 9       # Ren et al. Section 3.1: 3 scales x 3 aspect ratios


def faster_rcnn(*, image_size=224, anchors=ANCHORS, rpn_channels=RPN_CHANNELS):
    """Faster R-CNN (ResNet-50 C4 trunk and RPN) as 46 GEMM layers (see the module docstring).

    Parameters
    ----------
    image_size : int
        Input height and width (a multiple of 32).
    anchors : int
        Anchors per position, ``k``.
    rpn_channels : int
        Width of the RPN's 3 x 3 conv.

    Returns
    -------
    golden.systolic.networks.Network
    """
    trunk = resnet50(image_size=image_size)
    layers = list(trunk.layers[:C4_LAYERS])
    features = layers[-1].writes
    last = layers[-1].layer
    channels, side = last.out_channels, last.out_height
    sizes = {name: trunk.tensor_elements[name]
             for name in {trunk.input_tensor} | {entry.writes for entry in layers}}
    rpn = ConvLayer("rpn_conv", channels, side, side, rpn_channels, 3, 1, 1)
    heads = (("rpn_cls", 2 * anchors), ("rpn_bbox", 4 * anchors))
    layers.append(NetworkLayer(rpn, (features,), "rpn_conv"))
    sizes["rpn_conv"] = rpn_channels * side**2
    for name, outputs in heads:
        head = ConvLayer(name, rpn_channels, side, side, outputs, 1)
        layers.append(NetworkLayer(head, ("rpn_conv",), name))
        sizes[name] = outputs * side**2
    return replace(trunk, name="Faster R-CNN", layers=tuple(layers), tensor_elements=sizes)
