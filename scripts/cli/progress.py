"""Progress with elapsed time for the commands that can run for minutes (synth, bitstream,
results, prove), on stderr so that stdout stays the result (and ``--json`` stays parseable).

On a terminal, a ``tqdm`` line shows the step and its elapsed time, refreshed every second, and
is erased when the command ends (so that an error stays the one line it is); elsewhere (a log,
CI), one line with the time when the work ends.
"""

import contextlib
import sys
import threading
import time

__all__ = ["elapsed"]


@contextlib.contextmanager
def elapsed(description, stream=None):
    """Show ``description`` and the elapsed time while the ``with`` body runs.

    Yields a function that takes a new description (the step within the command).
    """
    stream = stream or sys.stderr
    started = time.monotonic()
    if not getattr(stream, "isatty", lambda: False)():
        current = [description]
        yield lambda text: current.__setitem__(0, text)
        print(f"neartrain: {current[0]}: {time.monotonic() - started:.0f} s", file=stream, flush=True)
        return

    from tqdm import tqdm

    bar = tqdm(total=None, desc=description, bar_format="{desc} [{elapsed}]", file=stream, leave=False)
    stop = threading.Event()

    def refresh():
        while not stop.wait(1.0):
            bar.refresh()

    ticker = threading.Thread(target=refresh, daemon=True)
    ticker.start()
    try:
        yield bar.set_description_str
    finally:
        stop.set()
        ticker.join()
        bar.close()
