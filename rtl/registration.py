"""Declaring a block: its parameters, their validation, and its registration.

A registration names the block, the component class that builds it (whose declaration gives
the parameters: name, type, default, range and meaning) and its golden model. The CLI, the Verilog generator,
the synthesis flow and the sweeps all read the registry, so a new block shows up in
every command without touching them.

Example
-------
The component declares its parameters once, as ``PARAMS``; :class:`Parameterized` checks the
constructor's keyword arguments against them (and :meth:`Parameterized.check_params`, for rules
spanning several parameters), and :func:`register_block` reads the same declaration::

    class SkidBuffer(Parameterized, wiring.Component):
        PARAMS = (Param("width", int, 32, "payload width in bits", minimum=1, maximum=4096),)

        def __init__(self, *, width=32, payload_shape=None):
            ...

    register_block(
        "skid_buffer", SkidBuffer, family="bus",
        summary="Stream pipeline register with a registered ready path.",
        golden=NO_GOLDEN("plumbing: the output stream is the input stream"), drops=NO_DROPS,
    )
"""

import functools
import inspect
from dataclasses import dataclass, field
from typing import Any, Callable

__all__ = ["Param", "Parameterized", "Block", "register_block", "REGISTERED", "FAMILIES", "check_int",
           "check_choice", "check_bool", "NO_DROPS", "NO_GOLDEN"]

# The block families; each is a package under rtl/ whose `__init__` imports its block modules.
FAMILIES = ("bus", "fp", "optim", "compress", "systolic", "aggregate", "net", "runtime", "collective", "dlrm")

def check_int(name, value, minimum=None, maximum=None):
    """Validate an integer parameter and return it.

    Raises
    ------
    ValueError
        Naming ``name`` and the allowed range when ``value`` is not an integer inside it.
    """
    span = f"{'' if minimum is None else minimum}..{'' if maximum is None else maximum}"
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an integer in {span}, not {value!r}")
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        raise ValueError(f"{name} must be in {span}, not {value}")
    return value


def check_choice(name, value, choices):
    """Validate that ``value`` is one of ``choices`` and return it."""
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}, not {value!r}")
    return value


def check_bool(name, value):
    """Validate a boolean parameter and return it."""
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be True or False, not {value!r}")
    return value



@dataclass(frozen=True)
class Param:
    """One elaboration parameter of a registered block.

    Parameters
    ----------
    name : str
        Keyword argument name of the component constructor.
    type : type
        ``int``, ``float``, ``bool`` or ``str``.
    default : object
        Value used when the user does not set one.
    help : str
        What the parameter means, in a few words.
    choices : tuple, optional
        Allowed values (for ``str`` and enumerated ``int`` parameters).
    minimum, maximum : int or float, optional
        Inclusive range for numeric parameters.
    accepts : tuple of type, optional
        Further Python types the constructor takes for this parameter (for example a
        ``FloatFormat`` for ``fmt``); such values are the constructor's to check. The registry
        and the command line only ever pass ``type``.
    """

    name: str
    type: type
    default: Any
    help: str
    choices: tuple = None
    minimum: Any = None
    maximum: Any = None
    accepts: tuple = ()

    def describe_range(self):
        if self.choices is not None:
            return "|".join(str(c) for c in self.choices)
        if self.type is bool:
            return "true|false"
        if self.minimum is not None or self.maximum is not None:
            lo = "" if self.minimum is None else self.minimum
            hi = "" if self.maximum is None else self.maximum
            return f"{lo}..{hi}"
        return self.type.__name__

    def validate(self, value):
        """Check a Python value against the declared type and range, and return it."""
        if self.accepts and isinstance(value, self.accepts):
            return value
        if self.choices is not None:
            return check_choice(self.name, value, self.choices)
        if self.type is bool:
            return check_bool(self.name, value)
        if self.type is int:
            return check_int(self.name, value, self.minimum, self.maximum)
        if self.type is float:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError(f"{self.name} must be a number, not {value!r}")
            if ((self.minimum is not None and value < self.minimum)
                    or (self.maximum is not None and value > self.maximum)):
                raise ValueError(f"{self.name} must be in {self.describe_range()}, not {value}")
            return float(value)
        if not isinstance(value, self.type):
            raise ValueError(f"{self.name} must be a {self.type.__name__}, not {value!r}")
        return value


class Parameterized:
    """Mixin for a component whose constructor parameters are declared once, in ``PARAMS``.

    ``PARAMS`` is a tuple of :class:`Param`, each naming a keyword argument of ``__init__``.
    Before the constructor body runs, every declared argument (given or defaulted) is checked
    with :meth:`Param.validate`, then all of them together with :meth:`check_params`; so a
    component built directly in Python is checked exactly as one built from the registry, and
    a bad value is a ``ValueError`` naming the parameter. Each argument is then kept, as given,
    in the attribute ``_<name>`` (``self._width`` for ``width``), so the constructor body need
    not copy it; a body that keeps a derived value there overwrites it.
    """

    PARAMS = ()

    @classmethod
    def check_params(cls, values):
        """Check rules that span several parameters; ``values`` maps every declared name to its value.

        Raises
        ------
        ValueError
            Naming the parameter at fault. The default accepts everything.
        """

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        # A class that declares PARAMS but inherits its constructor checks them around that one.
        if "__init__" in cls.__dict__ or "PARAMS" in cls.__dict__:
            cls.__init__ = _checked_init(cls, cls.__init__)


def _checked_init(cls, init):
    """Wrap ``init`` so that it checks ``cls.PARAMS`` and ``cls.check_params`` first, then keeps each
    declared argument in ``self._<name>``."""
    signature = inspect.signature(init)
    spread = next((p.name for p in signature.parameters.values() if p.kind is p.VAR_KEYWORD), None)

    @functools.wraps(init)
    def checked(self, *args, **kwargs):
        bound = signature.bind(self, *args, **kwargs)
        bound.apply_defaults()
        given = dict(bound.arguments)
        given.update(given.pop(spread, {}) if spread else {})
        values = {}
        for param in cls.PARAMS:
            value = given.get(param.name, param.default)
            param.validate(value)
            values[param.name] = value
        cls.check_params(values)
        for name, value in values.items():
            setattr(self, f"_{name}", value)
        init(self, *args, **kwargs)

    return checked


@dataclass(frozen=True)
class Block:
    """A registered block: how to build it and what can be set."""

    name: str
    component: Callable
    family: str
    summary: str
    params: tuple = field(default_factory=tuple)
    #: Where the block can discard a beat, flit, line or packet, and the output port the host reads
    #: to see it: ``{port name: what it counts}`` (a counter or a sticky error bit). ``NO_DROPS``
    #: (an empty mapping) says the block discards nothing: every input is back-pressured or used.
    #: ``None`` means not declared yet, which ``testbenches/test_drop_counters.py`` refuses.
    drops: Any = None
    #: The golden model's entry point, ``"golden.<module>:<name>"`` (a string: ``rtl`` never
    #: imports ``golden``), or :data:`NO_GOLDEN` with the reason the block has none.
    golden: Any = None

    def param(self, name):
        for param in self.params:
            if param.name == name:
                return param
        known = ", ".join(p.name for p in self.params) or "none"
        raise ValueError(f"block {self.name!r} has no parameter {name!r} (parameters: {known})")

    def resolve(self, overrides=None):
        """Return the full parameter dict: defaults updated with validated ``overrides``."""
        values = {p.name: p.default for p in self.params}
        for name, value in (overrides or {}).items():
            values[name] = self.param(name).validate(value)
        return values

    def build(self, overrides=None):
        """Construct the component with defaults plus ``overrides``."""
        return self.component(**self.resolve(overrides))


REGISTERED = {}


#: The ``drops`` of a block that discards nothing (see :attr:`Block.drops`).
NO_DROPS = {}


@dataclass(frozen=True)
class NO_GOLDEN:  # noqa: N801 (used like a constant: ``golden=NO_GOLDEN("why")``)
    """The ``golden`` of a block with no golden model of its own, and why (plumbing, a wrapper...)."""

    reason: str


def register_block(name, component, *, family, summary, golden, drops=None):
    """Register ``component`` under ``name``; see the module docstring for an example.

    The parameters are the component's ``PARAMS`` (see :class:`Parameterized`). ``golden`` is
    the golden model's entry point, ``"golden.<module>:<name>"``, or ``NO_GOLDEN(reason)``.
    ``drops`` maps each output port that counts (or flags) discarded input to what it counts;
    pass ``NO_DROPS`` for a block that discards nothing.
    """
    params = getattr(component, "PARAMS", None)
    if params is None or not issubclass(component, Parameterized):
        raise ValueError(f"component of {name!r} must be Parameterized and declare PARAMS")
    if not (isinstance(golden, NO_GOLDEN) or (isinstance(golden, str) and golden.startswith("golden.")
                                               and ":" in golden)):
        raise ValueError(f"golden of {name!r} must be 'golden.<module>:<name>' or NO_GOLDEN(reason)")
    if family not in FAMILIES:
        raise ValueError(f"family must be one of {', '.join(FAMILIES)}, not {family!r}")
    if name in REGISTERED and REGISTERED[name].component is not component:
        raise ValueError(f"block name {name!r} is already registered")
    if drops is not None and not all(isinstance(k, str) and isinstance(v, str) for k, v in drops.items()):
        raise ValueError(f"drops of {name!r} must map port names to what they count")
    REGISTERED[name] = Block(name, component, family, summary, tuple(params),
                             None if drops is None else dict(drops), golden)
    return component


