"""``neartrain prove [BLOCK|PROOF ...]``: the formal proofs (SymbiYosys), see :mod:`scripts.formal`."""

import json

from .common import UsageError, at_least_one
from .progress import elapsed

__all__ = ["register"]


# ``--timeout``: SBY reads 0 as no limit at all. ``--jobs``: proofs run at once.
_seconds, _jobs = at_least_one("seconds"), at_least_one(None)


def _run(proof, timeout):
    """``(result, None)`` of running ``proof``, or ``(None, message)`` when SBY could not run it."""
    from scripts.formal import record
    from scripts.formal.flow import FormalError

    try:
        return record.run(proof, timeout=timeout), None
    except FormalError as error:
        return None, str(error)


def _run_named(name, timeout):
    """:func:`_run` in a worker process (proofs hold elaboration closures, so the worker looks its
    proof up by name rather than receiving it)."""
    from scripts.formal.proofs import proofs_of

    (proof,) = [proof for proof in proofs_of({name}) if proof.name == name]
    return _run(proof, timeout)


def _results(chosen, jobs, timeout):
    """Yield ``(proof, result, error)`` in the order of ``chosen``, running ``jobs`` proofs at once.

    Each proof's SBY runs one task at a time whatever ``jobs`` is; ``jobs`` only runs several
    proofs side by side (one per core is the useful most).
    """
    if jobs == 1:
        for proof in chosen:
            yield proof, *_run(proof, timeout)
        return
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(_run_named, proof.name, timeout) for proof in chosen]
        for proof, future in zip(chosen, futures, strict=True):
            yield proof, *future.result()


def command_prove(args):
    from scripts.formal import record
    from scripts.formal.proofs import proofs_of

    chosen = record.selected(args.names, args.deep or args.record)
    if args.list:
        listed = proofs_of(set(args.names) if args.names else None)
        if not listed:
            known = sorted({proof.block for proof in proofs_of()})
            raise UsageError(f"no proof of {', '.join(args.names)} (blocks with proofs: {', '.join(known)})")
        if args.json:
            print(json.dumps([{"proof": proof.name, "block": proof.block, "mode": proof.mode,
                               "depth": proof.depth, "slow": proof.slow} for proof in listed], indent=1))
            return 0
        for proof in listed:
            print(f"{proof.name}\t{proof.mode} depth {proof.depth}\t{'slow' if proof.slow else 'fast'}")
        return 0
    if not chosen:
        known = sorted({proof.block for proof in proofs_of()})
        raise UsageError(f"no proof of {', '.join(args.names)} (blocks with proofs: {', '.join(known)}; "
                         f"add --deep for the slow ones)")
    rows, failed, reports = [], [], []
    with elapsed(f"prove: {len(chosen)} proof(s)") as step:
        for index, (proof, result, error) in enumerate(_results(chosen, args.jobs, args.timeout), 1):
            step(f"prove: {proof.name} done ({index} of {len(chosen)})")
            if error is not None:
                raise UsageError(f"{proof.name}: {error}")
            bound = f"{proof.mode}, depth {proof.depth}, {result.seconds:.1f} s"
            if result.covers and result.status == "pass":
                bound += f"; covered at step: {record.covered(result)}"
            known = f"; expected {proof.expect}" if proof.expect != "pass" else ""
            if not args.json:
                print(f"{proof.name}: {result.describe()} ({bound}{known})", flush=True)
            rows.append(record.row(proof, result))
            reports.append({"proof": proof.name, "block": proof.block, "claim": proof.claim,
                            "mode": proof.mode, "depth": proof.depth, "status": result.status,
                            "expected": proof.expect, "covered": record.covered(result),
                            "seconds": round(result.seconds, 1)})
            if result.status != proof.expect:
                failed.append(proof.name)
    if args.record:
        record.record(rows)
        if not args.json:
            print("prove: docs/formal.md rewritten")
    if args.json:
        print(json.dumps({"proofs": reports, "failed": failed, "recorded": bool(args.record)}, indent=1))
    elif failed:
        print(f"prove: {len(failed)} of {len(chosen)} proof(s) did not give their expected verdict: "
              f"{', '.join(failed)}")
    else:
        print(f"prove: {len(chosen)} proof(s) gave their expected verdict (pass unless listed otherwise)")
    return 1 if failed else 0


def register(commands):
    """Add ``prove``."""
    prove = commands.add_parser("prove", help="formal proofs of blocks with SymbiYosys (BMC, k-induction)")
    prove.add_argument("names", nargs="*", metavar="BLOCK", help="blocks or proof names (default: all)")
    prove.add_argument("--deep", action="store_true", help="include the slow proofs (deep bounds, induction)")
    prove.add_argument("--list", action="store_true", help="list the proofs instead of running them")
    prove.add_argument("--record", action="store_true",
                       help="rewrite the rows of the proofs run in docs/formal.md's table, keep the others "
                            "(implies --deep: every proof of the names given, or all)")
    prove.add_argument("--json", action="store_true", help="print the verdicts as JSON")
    prove.add_argument("--jobs", "-j", type=_jobs, default=1, metavar="N",
                       help="proofs run at once, one per process (default 1; each proof's SBY runs its "
                            "tasks one at a time)")
    prove.add_argument("--timeout", type=_seconds, default=1200, metavar="SECONDS",
                       help="give up a proof after this long (status timeout; default 1200)")
    prove.set_defaults(handler=command_prove)
