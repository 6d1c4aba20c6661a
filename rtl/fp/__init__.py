from . import (  # noqa: F401
    adder,
    compare,
    converter,
    divider,
    float_to_integer,
    fused_multiply_add,
    integer_to_float,
    min_max,
    multiplier,
    square_root,
)
