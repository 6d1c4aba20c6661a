"""One content-addressed cache for the flows' results (synthesis, bitstreams, the main job).

A result is stored as JSON under ``build/<kind>/<label>-<key>.json``, where ``key`` is the
first 16 hex digits of the SHA-256 of everything the result depends on (the Verilog, the
target, tool versions...). A flow asks :meth:`Cache.key` for the key once and uses it for
:meth:`Cache.get`, :meth:`Cache.put` and :meth:`Cache.path`, so that whoever only reads
the cache (a sweep telling cached points from new ones, ``make run`` showing a cached
16-lane figure) computes exactly the same key as whoever wrote it.
"""

import hashlib
import json
import os
import pathlib
import tempfile

__all__ = ["Cache", "BUILD", "build_root"]


def build_root(environ=None):
    """Where NearTrain keeps its builds and caches: ``build/`` of the checkout it runs from; for an
    installed (non-editable) package, ``$XDG_CACHE_HOME/neartrain/build`` (``~/.cache`` when that
    is unset), never inside ``site-packages``."""
    environ = os.environ if environ is None else environ
    checkout = pathlib.Path(__file__).resolve().parents[2]
    if (checkout / "pyproject.toml").is_file():
        return checkout / "build"
    cache = environ.get("XDG_CACHE_HOME") or pathlib.Path.home() / ".cache"
    return pathlib.Path(cache) / "neartrain" / "build"


BUILD = build_root()


class Cache:
    """The results of one flow, in ``build/<kind>/``.

    Parameters
    ----------
    kind : str
        The folder under ``build/`` (``"synth"``, ``"bitstream/cache"``).
    """

    def __init__(self, kind):
        self.folder = BUILD / kind

    @staticmethod
    def key(*parts):
        """The content key of ``parts`` (strings, joined by newlines)."""
        return hashlib.sha256("\n".join(map(str, parts)).encode()).hexdigest()[:16]

    def path(self, label, key, suffix=".json"):
        """Where the entry ``label``-``key`` lives (it may not exist)."""
        return self.folder / f"{label}-{key}{suffix}"

    def get(self, label, key):
        """The stored result, or None."""
        path = self.path(label, key)
        return json.loads(path.read_text()) if path.exists() else None

    def put(self, label, key, result, **dump_options):
        """Store ``result`` (JSON-serialisable) atomically and return it.

        The text goes to a temporary file in the same folder, then replaces the entry in one
        ``os.replace``: a reader (another process, a sweep's client, a worker on the same
        disk) sees the old entry or the whole new one, never a half-written file, even when
        the writer is interrupted or killed.
        """
        self.folder.mkdir(parents=True, exist_ok=True)
        target = self.path(label, key)
        text = json.dumps(result, indent=1, **dump_options) + "\n"
        handle, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=self.folder)
        try:
            os.fchmod(handle, 0o644)  # mkstemp makes 0600; entries are shared like any build file
            with os.fdopen(handle, "w") as file:
                file.write(text)
            os.replace(temporary, target)
        except BaseException:
            pathlib.Path(temporary).unlink(missing_ok=True)
            raise
        return result
