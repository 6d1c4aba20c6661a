"""The Verilog of a registered block, elaborated once per source tree and parameter set.

Elaboration is single-threaded Python and takes from a second to half a minute per design;
``make run`` writes every block's Verilog, then simulates some of the same designs, and a
test suite simulates the same design from several tests. So the text is kept in
``build/elaboration/<sources>/``, keyed by the block, its full parameters and the tool
versions, where ``<sources>`` is the hash of every file under ``rtl/``: editing any of them
starts a new folder, and the folders of other source trees are deleted when it is made.
"""

import functools
import hashlib
import json
import os
import re
import shutil
import tempfile

from rtl.elaborate import TOP_NAME, source_hash, to_verilog, tool_versions

from .cache import BUILD, Cache

__all__ = ["registered_verilog", "module_name", "check_module_name", "rename_top"]

_ROOT = BUILD / "elaboration"


@functools.cache
def _cache():
    """This source tree's cache (computed once per process: sources do not change under a run)."""
    sources = source_hash()[:16]
    cache = Cache(f"elaboration/{sources}")
    if _ROOT.is_dir():
        for folder in _ROOT.iterdir():
            if folder.name != sources:
                shutil.rmtree(folder, ignore_errors=True)
    return cache


def registered_verilog(name, params, build):
    """The Verilog text (top module ``top``) of registered block ``name`` with ``params``.

    Parameters
    ----------
    name : str
        The registry name.
    params : dict
        The block's full parameters (defaults resolved), which ``build()`` constructs it with.
    build : callable
        Returns the component; called only when the text is not cached.
    """
    cache = _cache()
    key = Cache.key(name, sorted(params.items()), tool_versions(), TOP_NAME)
    path = cache.path(name, key, suffix=".v")
    if path.exists():
        return path.read_text()
    text = to_verilog(build(), name=TOP_NAME)
    cache.folder.mkdir(parents=True, exist_ok=True)
    # Written aside and renamed, so that a concurrent reader never sees half a file.
    handle, staging = tempfile.mkstemp(dir=cache.folder, suffix=".partial")
    with os.fdopen(handle, "w") as out:
        out.write(text)
    os.replace(staging, path)
    return text


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def module_name(block_name, params, defaults):
    """The module name a generated block gets: the block's name at its default parameters,
    ``<block>_<hash>`` otherwise, where ``<hash>`` is six hex digits of SHA-256 over the full
    parameter set, so that one block at two parameter sets can sit in one design."""
    if params == defaults:
        return block_name
    text = json.dumps(sorted(params.items()), default=str)
    return f"{block_name}_{hashlib.sha256(text.encode()).hexdigest()[:6]}"


def check_module_name(name):
    """Raise ``ValueError`` unless ``name`` is a plain Verilog identifier."""
    if not _IDENTIFIER.fullmatch(name):
        raise ValueError(f"module name {name!r} is not a Verilog identifier "
                         f"(letters, digits and '_', not starting with a digit)")


def rename_top(text, name):
    """``text`` (:func:`registered_verilog`'s, top module ``top``) with the top module called
    ``name`` and every inner module ``\\top.<path>`` called ``\\<name>.<path>``.

    This is the text ``to_verilog(component, name=name)`` writes (Amaranth names inner modules
    after the top's hierarchy), without elaborating again: the cache keeps one text per block
    and parameter set, which simulation, lint and synthesis share under the name ``top``.
    Raises ``ValueError`` for a name that is no plain Verilog identifier.
    """
    check_module_name(name)
    renamed, tops = re.subn(rf"^module {TOP_NAME}\(", f"module {name}(", text, flags=re.MULTILINE)
    if tops != 1:
        raise ValueError(f"expected one module {TOP_NAME!r} in the text, found {tops}")
    # An escaped identifier ends at white space, so an inner module reads ``\top.<path> ``.
    return renamed.replace(f"\\{TOP_NAME}.", f"\\{name}.")
