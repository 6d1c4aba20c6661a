"""The benches' line plots for ``docs/``: one axis, labelled, gridded and saved the same way."""

import contextlib

from scripts.flow.docs import DOCS

__all__ = ["docs_plot"]


@contextlib.contextmanager
def docs_plot(name, *, xlabel, ylabel, title, from_zero=False, log_x=False, log_y=False, legend_size=None):
    """Yield a 6 x 4 inch matplotlib axis to draw on; afterwards label it and save it as ``docs/<name>``.

    Parameters
    ----------
    name : str
        The image's file name in ``docs/``.
    xlabel, ylabel, title : str
    from_zero : bool
        Start the y axis at 0.
    log_x, log_y : bool
        A base-2 logarithmic x axis, a logarithmic y axis (the grid then has minor lines too).
    legend_size : optional
        The legend's font size (matplotlib's default when None).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(6, 4))
    yield axis
    if log_x:
        axis.set_xscale("log", base=2)
    if log_y:
        axis.set_yscale("log")
    axis.set_xlabel(xlabel)
    axis.set_ylabel(ylabel)
    axis.set_title(title)
    if from_zero:
        axis.set_ylim(bottom=0)
    axis.grid(True, which="both" if log_x or log_y else "major", alpha=0.3)
    axis.legend(fontsize=legend_size)
    figure.tight_layout()
    figure.savefig(DOCS / name, dpi=100)
    plt.close(figure)
    print(f"wrote docs/{name}")
