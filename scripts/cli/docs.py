"""``neartrain docs [--check]``: the generated tables of ``docs/`` (see :mod:`scripts.flow.docs`)."""

import sys

__all__ = ["register"]


def command_docs(args):
    from scripts.flow import docs

    if args.check:
        problems = docs.check()
        if problems:
            # A stale or hand-typed figure is a failing result (exit 1), not a usage mistake (exit 2).
            print(f"neartrain: docs: {len(problems)} docs problem(s) (stale tables or values, "
                  f"measurements typed by hand): "
                  + "; ".join(problems), file=sys.stderr)
            return 1
        print("docs: every generated table matches its data")
        return 0
    written = docs.regenerate()
    print(f"docs: {len(written)} table(s) rewritten" + (f": {', '.join(written)}" if written else ""))
    return 0


def register(commands):
    """Add ``docs``."""
    docs = commands.add_parser("docs", help="rewrite (or --check) the generated tables in docs/")
    docs.add_argument("--check", action="store_true",
                      help="fail when a table or a value differs from its data, or a measurement is "
                           "typed by hand (in a table or in prose)")
    docs.set_defaults(handler=command_docs)
