"""Fuzz ``tracedoc analyze`` with mutants of the bundled samples, from the command line (harness: tests/fuzz.py).

    python benchmarks/fuzz.py --mutants 1000 --seed 1 --jobs 1 --keep /tmp/fuzz-failures
    python benchmarks/fuzz.py --mutants 200 --formats kineto,nsys --kinds extreme,hostile
    python benchmarks/fuzz.py --snapshot HEAD --mutants 500      # a fixed commit, while the working tree changes
    python benchmarks/fuzz.py --repro kineto/extreme/1234         # one mutant again, with everything it printed
    python benchmarks/fuzz.py --list --mutants 20                  # the ids a batch would run

Prints a table of outcomes per input format, then each failure (id, exit code, first and last stderr lines,
where the traceback points) and the failures grouped by cause; exits 1 when any mutant broke the contract.
Run it under ``nice`` and with few jobs on a shared machine: each job drives one tracedoc process.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.fuzz import (  # noqa: E402
    FORMATS,
    TIMEOUT_S,
    MutantId,
    Outcome,
    build_mutant,
    explain,
    failure_report,
    plan,
    run_batch,
    run_mutant,
    save_failure,
    snapshot,
    summary_table,
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mutants", type=int, default=300, help="how many mutants (default 300)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the batch (default 1)")
    parser.add_argument("--jobs", type=int, default=1, help="tracedoc processes at once (default 1)")
    parser.add_argument("--formats", default="", help=f"comma-separated input formats ({', '.join(FORMATS)})")
    parser.add_argument("--kinds", default="", help="comma-separated kinds of mutation (default: all)")
    parser.add_argument("--keep", type=Path, help="copy each failing mutant here, with a README on reproducing it")
    parser.add_argument("--root", type=Path, help="the tracedoc tree to run (default: this checkout)")
    parser.add_argument("--snapshot", metavar="REV", help="run tracedoc as of this git revision of the checkout")
    parser.add_argument("--timeout", type=float, default=TIMEOUT_S, help="seconds per run (default 60)")
    parser.add_argument("--rlimit-as", type=int, metavar="MB",
                        help="also cap the address space (RLIMIT_AS); DuckDB's reservations may trip it")
    parser.add_argument("--json", type=Path, help="write every outcome to this JSON file")
    parser.add_argument("--repro", nargs="+", metavar="ID", help="run these mutant ids and show all they printed")
    parser.add_argument("--list", action="store_true", help="print the batch's mutant ids and exit")
    parser.add_argument("--quiet", action="store_true", help="no progress line per mutant")
    return parser.parse_args(argv)


def selected(text: str) -> list[str] | None:
    """A comma-separated option as a list (None when empty)."""
    return [t.strip() for t in text.split(",") if t.strip()] or None


def progress(outcome: Outcome, done: int, total: int) -> None:
    """One line per finished mutant on stderr; failures with their first stderr line."""
    line = f"[{done}/{total}] {outcome.id} {outcome.status} (exit {outcome.exit_code}, {outcome.seconds:.1f} s)"
    if outcome.signature:
        line += f"  {outcome.signature}"
    print(line, file=sys.stderr, flush=True)


def repro(ids: list[str], root: Path, keep: Path | None, timeout: float) -> int:
    """Build and run each mutant id, printing the command, outcome, stdout head and stderr; 1 if any failed."""
    failed = 0
    for text in ids:
        mid = MutantId.parse(text)
        with tempfile.TemporaryDirectory(prefix="tracedoc-fuzz-") as tmp:
            mutant = build_mutant(mid, Path(tmp) / "input")
            outcome = run_mutant(mutant, root, Path(tmp), timeout=timeout)
            if outcome.failed:
                explain(mutant, outcome, root, Path(tmp))
                failed += 1
            print(f"== {mid}  (base {mutant.base}: {mutant.note})")
            print(f"   tracedoc analyze {mutant.path} --no-cache --format {mid.output}")
            print(f"   status {outcome.status} {outcome.problems}, exit {outcome.exit_code}, "
                  f"{outcome.seconds:.1f} s, peak RSS {outcome.peak_rss_mb:.0f} MB")
            if outcome.signature:
                print(f"   cause: {outcome.signature}")
            print("-- stdout (first 40 lines):")
            print("\n".join(outcome.stdout.splitlines()[:40]).encode("ascii", "backslashreplace").decode())
            print("-- stderr:")
            print(outcome.stderr[-8000:].encode("ascii", "backslashreplace").decode())
            if outcome.debug_stderr:
                print("-- stderr with TRACEDOC_DEBUG=1:")
                print(outcome.debug_stderr[-8000:])
            if keep is not None:
                print(f"-- kept in {save_failure(mutant, outcome, keep)}")
    return 1 if failed else 0


def outcome_record(outcome: Outcome) -> dict[str, object]:
    """One outcome for the JSON file."""
    return {"id": str(outcome.id), "format": outcome.id.fmt, "kind": outcome.id.kind, "output": outcome.id.output,
            "base": outcome.base, "note": outcome.note, "status": outcome.status, "problems": outcome.problems,
            "exit_code": outcome.exit_code, "seconds": round(outcome.seconds, 2),
            "peak_rss_mb": round(outcome.peak_rss_mb, 1), "signature": outcome.signature,
            "stderr_tail": outcome.stderr[-2000:], "debug_stderr_tail": outcome.debug_stderr[-4000:]}


def main(argv: list[str] | None = None) -> int:
    """Run a batch (or reproduce mutants) and print the summary; 1 when any mutant failed."""
    args = parse_args(argv)
    root = args.root.resolve() if args.root else Path(__file__).resolve().parent.parent
    if args.snapshot:
        root = snapshot(args.snapshot, Path(tempfile.mkdtemp(prefix="tracedoc-fuzz-snapshot-")))
        print(f"tracedoc as of {args.snapshot}, extracted to {root}", file=sys.stderr)
    if args.repro:
        return repro(args.repro, root, args.keep, args.timeout)
    ids = plan(args.mutants, args.seed, selected(args.formats), selected(args.kinds))
    if args.list:
        print("\n".join(map(str, ids)))
        return 0
    outcomes = run_batch(ids, jobs=args.jobs, root=root, keep=args.keep, timeout=args.timeout,
                         progress=None if args.quiet else progress, address_space_mb=args.rlimit_as)
    print(summary_table(outcomes))
    print()
    print(failure_report(outcomes))
    if args.json:
        args.json.write_text(json.dumps([outcome_record(o) for o in outcomes], indent=1))
    return 1 if any(o.failed or o.status == "harness-error" for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
