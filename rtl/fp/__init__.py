from . import (  # noqa: F401
    fp_add,
    fp_compare,
    fp_convert,
    fp_div,
    fp_fma,
    fp_min_max,
    fp_mul,
    fp_sqrt,
    fp_to_int,
    int_to_fp,
)
