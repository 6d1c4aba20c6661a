"""Command-line text to block parameter values: ``width=16``, ``flush_subnormals=yes``.

The block declares each parameter once (:class:`rtl.registration.Param`); reading one from the
command line is the command line's business, so it lives here, beside its users
(``--set`` in :mod:`scripts.cli.common` and ``--vary`` in :mod:`scripts.sweep`).
"""

__all__ = ["parse_param"]

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def parse_param(param, text):
    """Convert command-line ``text`` to ``param``'s type and validate it.

    Raises
    ------
    ValueError
        Naming the parameter, when the text does not convert or the value is out of range.
    """
    if param.type is bool:
        lowered = text.strip().lower()
        if lowered in _TRUE:
            value = True
        elif lowered in _FALSE:
            value = False
        else:
            raise ValueError(f"{param.name} must be true or false, not {text!r}")
    elif param.type is int:
        try:
            value = int(text, 0)
        except ValueError:
            raise ValueError(f"{param.name} must be an integer in {param.describe_range()}, "
                             f"not {text!r}") from None
    elif param.type is float:
        try:
            value = float(text)
        except ValueError:
            raise ValueError(f"{param.name} must be a number, not {text!r}") from None
    else:
        value = text
    return param.validate(value)
