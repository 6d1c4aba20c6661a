"""Each block's parameters are declared once, on its component, and checked wherever it is built.

The declaration (``PARAMS``, :class:`rtl.registration.Parameterized`) is what the registry lists and
what the constructor checks: so a component built directly in Python refuses a bad value with a
``ValueError`` naming the parameter, exactly as ``neartrain verilog block key=value`` does.
"""

import inspect

import pytest

from rtl.collective.gcu import GlobalControlUnit
from rtl.compress.scatter import ScatterEngine
from rtl.registration import Param, Parameterized
from rtl.registry import blocks


def test_the_registry_lists_the_components_declaration():
    for name, block in blocks().items():
        assert block.params == tuple(block.component.PARAMS), name


def test_every_declared_parameter_is_a_constructor_keyword():
    unknown = []
    for name, block in blocks().items():
        signature = inspect.signature(block.component.__init__)
        if any(p.kind is p.VAR_KEYWORD for p in signature.parameters.values()):
            continue
        unknown += [f"{name}.{p.name}" for p in block.params if p.name not in signature.parameters]
    assert not unknown, f"declared parameters the constructor does not take: {unknown}"


# (block, parameter): (constructor default, registered default), where the two differ. They
# differed before the declaration moved onto the class; aligning them would change either what
# direct construction builds or the Verilog `neartrain` writes, so they stay listed here.
REGISTRY_DEFAULTS = {
    ("width_converter", "output_width"): (512, 128),
    ("axi_lite_control", "arguments"): ("", "source:64,destination:64,length:32"),
    ("axi_lite_control", "status"): ("", "error:2,cycles:64"),
    ("memory_port", "read_tensors"): (1, 4),
    ("memory_port", "write_tensors"): (1, 4),
}


def test_constructor_defaults_are_the_declared_defaults():
    """The declaration is the one place a default is stated; the signature only repeats it."""
    differ = {}
    for name, block in blocks().items():
        signature = inspect.signature(block.component.__init__).parameters
        for param in block.params:
            default = getattr(signature.get(param.name), "default", inspect.Parameter.empty)
            if default is not inspect.Parameter.empty and default != param.default:
                differ[name, param.name] = (default, param.default)
    assert differ == REGISTRY_DEFAULTS


def _bad_values(param):
    """Values the declaration refuses, each with the reason."""
    if param.choices is not None:
        yield "not a choice", object()
    elif param.type is bool:
        yield "not a bool", 2
    elif param.type is int:
        yield "not an int", "7"
        if param.maximum is not None:
            yield "above the maximum", param.maximum + 1
        if param.minimum is not None:
            yield "below the minimum", param.minimum - 1
    else:
        yield f"not a {param.type.__name__}", 12345


def test_direct_construction_refuses_each_bad_value_naming_the_parameter():
    """Every declared parameter of every block, out of its type, range or choices."""
    accepted = []
    for name, block in blocks().items():
        for param in block.params:
            for why, value in _bad_values(param):
                try:
                    block.component(**{param.name: value})
                except ValueError as error:
                    assert param.name in str(error), (name, param.name, why, str(error))
                else:
                    accepted.append(f"{name}.{param.name} {why}")
    assert not accepted, f"bad values a constructor accepted: {accepted}"


def test_rules_across_parameters_are_checked_on_direct_construction():
    with pytest.raises(ValueError, match="banks must be a power of two"):
        ScatterEngine(banks=12)
    with pytest.raises(ValueError, match="out_lanes must be in 1..8"):
        ScatterEngine(banks=8, out_lanes=16)
    with pytest.raises(ValueError, match="node must be in 5..15"):
        GlobalControlUnit(leaves=5, node=4)


class _Toy(Parameterized):
    PARAMS = (Param("width", int, 8, "bits", minimum=1, maximum=64),
              Param("mode", str, "a", "mode", choices=("a", "b")))
    seen = []

    @classmethod
    def check_params(cls, values):
        cls.seen.append(dict(values))
        if values["mode"] == "b" and values["width"] > 32:
            raise ValueError("width must be at most 32 in mode b")

    def __init__(self, *, width=8, mode="a", extra=None):
        self.width, self.mode, self.extra = width, mode, extra


class _Narrow(_Toy):
    """Declares a narrower range and inherits the constructor (and the hook): still checked."""

    PARAMS = (Param("width", int, 4, "bits", minimum=1, maximum=16), *_Toy.PARAMS[1:])


def test_the_hook_sees_every_declared_value_given_or_defaulted():
    _Toy.seen.clear()
    toy = _Toy(width=40, extra="kept")
    assert (toy.width, toy.mode, toy.extra) == (40, "a", "kept")
    assert _Toy.seen == [{"width": 40, "mode": "a"}]
    with pytest.raises(ValueError, match="at most 32 in mode b"):
        _Toy(width=40, mode="b")
    with pytest.raises(ValueError, match="width must be in 1..64, not 65"):
        _Toy(width=65)


def test_a_subclass_declaration_is_checked_around_the_inherited_constructor():
    assert _Narrow(width=16).width == 16
    with pytest.raises(ValueError, match="width must be in 1..16, not 17"):
        _Narrow(width=17)
    with pytest.raises(ValueError, match="mode must be one of"):
        _Narrow(mode="c")
