"""The long fuzz run (``make fuzz``; not part of CI): random malformed inputs for every
reader and the codemod, from the generator of the CI corpus (tests/helpers/malformed.py).

Case ``i`` of a run is a function of ``--seed`` and ``i`` alone: a random seed file, a
random kind and variant, almost one time in two a second mutation on top. Worker processes
take every ``workers``-th index and check each case's contract (``malformed.run_case``: a
usable trace or the library's own one-line error, within a time limit and the memory
bound). The parent watches them: a worker that dies (a segfault in a native parser) or
stops making progress is replaced, and the case it was on recorded. Every failing input
is saved under ``--out`` with what happened; ``--replay I`` runs case ``I`` again here,
with the traceback.

``--wirec PATH``: the workers read with the C wire decoder built at PATH instead of the
package's own build. ``make fuzz`` passes one built with AddressSanitizer and UBSan, so a
read or write out of bounds, or undefined behaviour, in the C loop kills the worker (a
finding, as a segfault is) instead of passing unseen; the sanitizer's report is written
beside the findings (``sanitizer.<pid>``).

    python tests/fuzz.py --cases 100000 --seconds 1800 --seed 1 --out bench/out/fuzz-findings
"""

from __future__ import annotations

import argparse
import collections
import multiprocessing
import os
import queue
import random
import signal
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

CORPUS = Path(os.environ.get("TRACEBRIDGE_CORPUS") or REPO.parent / "shared" / "corpus")  # as tests/conftest.py
CASE_SECONDS = {"notebook": 60.0}  # LibCST takes its time on big cells; readers get the default
DEFAULT_CASE_SECONDS = 20.0
STALL_SECONDS = 180.0  # no progress for this long: a hang the in-process alarm could not stop
REPORT_EVERY = 2.0


def _contexts():
    from tests.helpers import malformed
    return [malformed.Context(seed) for seed in malformed.seeds(CORPUS if CORPUS.is_dir() else None)]


def use_wirec(path: str | None) -> None:
    """Read with the C wire decoder built at ``path`` (in place of the package's build)."""
    if not path:
        return
    import importlib.util
    name = "tracebridge.readers._wirec"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules[name] = module  # what `from . import _wirec` in wire.py finds
    from tracebridge.readers import wire
    wire._wirec = module  # in case wire was imported first
    if not wire.compiled() or Path(wire._wirec.__file__).resolve() != Path(path).resolve():
        raise SystemExit(f"fuzz: could not read with the C wire decoder at {path}")


def make_case(contexts, run_seed: int, index: int):
    from tests.helpers import malformed
    return malformed.random_case(contexts, random.Random(f"{run_seed}/{index}"), index)


def save(out: Path, index: int, case, detail: str) -> Path:
    folder = Path(out) / f"{index:08d}-{case.format}-{case.kind.replace('+', '_')}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / case.filename).write_bytes(case.data)
    (folder / "what.txt").write_text(f"{case.name}\n\n{detail}\n", encoding="utf-8", errors="replace")
    return folder


# --- workers ------------------------------------------------------------------------------
def worker(number: int, first: int, step: int, stop_index: int, deadline: float, run_seed: int,
           out: str, memory_every: int, wirec: str | None, results, current) -> None:
    """Cases ``first``, ``first + step``, ... until ``stop_index`` or ``deadline``."""
    use_wirec(wirec)
    from tests.helpers import malformed

    contexts = _contexts()
    counts: collections.Counter = collections.Counter()
    last_report = time.monotonic()
    parent = os.getppid()
    with tempfile.TemporaryDirectory(prefix="tracebridge-fuzz-") as scratch:
        for index in range(first, stop_index, step):
            if time.time() > deadline or os.getppid() != parent:  # out of time, or orphaned
                break
            current[number] = index
            try:
                case = make_case(contexts, run_seed, index)
            except Exception as error:  # noqa: BLE001 - the generator's own bug, not the library's
                results.put(("generator", number, index, f"{type(error).__name__}: {error}"))
                continue
            outcome = malformed.run_case(
                case, Path(scratch), timeout=CASE_SECONDS.get(case.format, DEFAULT_CASE_SECONDS),
                measure_memory=index % memory_every == 0)
            counts[(case.format, outcome.status)] += 1
            if outcome.status == "bug":
                folder = save(Path(out), index, case, outcome.detail)
                results.put(("bug", number, index, case.name, outcome.detail.splitlines()[0][:300], str(folder)))
            _clear(Path(scratch))
            if time.monotonic() - last_report > REPORT_EVERY:
                results.put(("counts", number, dict(counts)))
                counts.clear()
                last_report = time.monotonic()
    current[number] = -1
    results.put(("counts", number, dict(counts)))
    results.put(("done", number))


def _clear(folder: Path) -> None:
    import shutil
    for child in folder.iterdir():
        shutil.rmtree(child, ignore_errors=True) if child.is_dir() else child.unlink()


# --- the parent ---------------------------------------------------------------------------
def run(args) -> int:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    current = context.Array("q", [-2] * args.workers, lock=False)
    deadline = time.time() + args.seconds
    started = time.time()
    counts: collections.Counter = collections.Counter()
    findings: list[tuple] = []
    generator_errors: list[tuple] = []
    processes: dict[int, multiprocessing.Process] = {}
    last_seen: dict[int, tuple[int, float]] = {}

    def start(number: int, first: int) -> None:
        current[number] = -2
        process = context.Process(target=worker, args=(number, first, args.workers, args.cases, deadline, args.seed,
                                                       str(out), args.memory_every, args.wirec, results,
                                                       current),
                                  daemon=True)
        process.start()
        processes[number] = process
        last_seen[number] = (-2, time.monotonic())

    if args.wirec:
        print(f"fuzz: the workers read with the C wire decoder at {args.wirec}", flush=True)
    for number in range(args.workers):
        start(number, number)
    signal.signal(signal.SIGTERM, _interrupt)  # `kill`: stop the workers and report, as for Ctrl-C
    try:
        _watch(args, out, results, current, processes, last_seen, start, counts, findings, generator_errors)
    except KeyboardInterrupt:
        print("interrupted: the counts below are of the cases run so far", flush=True)
    finally:
        for process in processes.values():
            if process.is_alive():
                process.kill()
    report(counts, findings, generator_errors, time.time() - started, args)
    # What the sanitizers wrote during this run (make fuzz points their log_path here).
    reports = sorted(path for path in out.glob("sanitizer.*") if path.stat().st_mtime >= started)
    for path in reports:
        print(f"sanitizer report {path}:\n" + path.read_text(errors="replace")[:3000])
    return 1 if findings or generator_errors or reports else 0


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def _watch(args, out, results, current, processes, last_seen, start, counts, findings, generator_errors) -> None:
    """Collect the workers' reports until all are done; replace a worker that died or stalled."""
    started = time.time()
    parent_contexts = None
    done: set[int] = set()
    next_print = time.monotonic() + 30

    def handle(message) -> None:
        if message[0] == "counts":
            counts.update(message[2])
        elif message[0] == "bug":
            _, number, index, name, detail, folder = message
            findings.append((index, name, detail, folder))
            print(f"FAIL #{index} {name[:160]}\n     {detail}\n     saved in {folder}", flush=True)
        elif message[0] == "generator":
            _, number, index, detail = message
            generator_errors.append((index, detail))
            print(f"generator error on #{index}: {detail}", flush=True)
        elif message[0] == "done":
            done.add(message[1])

    while len(done) < args.workers:
        try:
            handle(results.get(timeout=1.0))
        except queue.Empty:
            pass
        # Workers that died (a crash in native code) or stalled (a hang the alarm missed).
        for number, process in list(processes.items()):
            if number in done:
                continue
            index = current[number]
            seen_index, since = last_seen[number]
            if index != seen_index:
                last_seen[number] = (index, time.monotonic())
            stalled = index >= 0 and time.monotonic() - since > STALL_SECONDS
            if process.is_alive() and not stalled:
                continue
            if process.is_alive():
                process.kill()
            process.join(5)
            if index < 0:  # finished its range, or died before its first case
                if process.exitcode:
                    findings.append((-1, f"worker {number}", f"exit code {process.exitcode} at start", ""))
                done.add(number)
                continue
            parent_contexts = parent_contexts or _contexts()
            what = "stalled" if stalled else f"died (exit code {process.exitcode})"
            try:
                case = make_case(parent_contexts, args.seed, index)
            except Exception as error:  # noqa: BLE001
                generator_errors.append((index, f"worker {what}; {type(error).__name__}: {error}"))
            else:
                folder = save(out, index, case, f"the worker {what} on this case")
                findings.append((index, case.name, f"worker {what}", str(folder)))
                counts[(case.format, "bug")] += 1
                print(f"FAIL #{index} {case.name[:160]}\n     worker {what}\n     saved in {folder}", flush=True)
            start(number, index + args.workers)
        if time.monotonic() > next_print:
            total = sum(counts.values())
            print(f"... {total} cases, {time.time() - started:.0f} s, {len(findings)} failures", flush=True)
            next_print = time.monotonic() + 60
    while True:  # what finished workers sent last
        try:
            handle(results.get(timeout=2.0))
        except queue.Empty:
            return


def report(counts, findings, generator_errors, seconds: float, args) -> None:
    formats = sorted({fmt for fmt, _ in counts})
    total = sum(counts.values())
    print(f"\nfuzz: {total} cases in {seconds:.0f} s (seed {args.seed}, {args.workers} workers, memory measured "
          f"on every {args.memory_every} case{'s' * (args.memory_every > 1)})")
    print(f"{'format':12} {'cases':>8} {'trace':>8} {'error':>8} {'FAILED':>8}")
    for fmt in formats:
        row = [counts[(fmt, s)] for s in ("trace", "error", "bug")]
        print(f"{fmt:12} {sum(row):8d} {row[0]:8d} {row[1]:8d} {row[2]:8d}")
    print(f"{len(findings)} failures" + (":" if findings else ""))
    for index, name, detail, folder in sorted(findings)[:200]:
        print(f"  #{index} {name[:160]}\n     {detail}\n     {folder}")
    if generator_errors:
        print(f"{len(generator_errors)} cases the generator could not make (bugs of tests/helpers/malformed.py):")
        for index, detail in sorted(generator_errors)[:50]:
            print(f"  #{index} {detail[:200]}")


def replay(args) -> int:
    import traceback

    use_wirec(args.wirec)
    import tracebridge
    case = make_case(_contexts(), args.seed, args.replay)
    print(case.name)
    folder = Path(tempfile.mkdtemp(prefix="tracebridge-replay-"))
    path = case.write(folder)
    print(path)
    try:
        if case.format == "notebook":
            from tracebridge.migrate import migrate_path
            print(migrate_path(path).report_lines())
        else:
            print(tracebridge.load(path))
    except Exception:  # noqa: BLE001 - shown, that is the point
        traceback.print_exc()
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=100_000, help="case indices to run (default 100000)")
    parser.add_argument("--seconds", type=float, default=1800, help="stop after this long (default 1800)")
    parser.add_argument("--seed", type=int, default=1, help="the run's seed (default 1)")
    parser.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--memory-every", type=int, default=1,
                        help="measure allocations (tracemalloc, ~2x slower) on every Nth case (default 1: all)")
    parser.add_argument("--out", default=str(REPO / "bench" / "out" / "fuzz-findings"),
                        help="where failing inputs are saved")
    parser.add_argument("--wirec", metavar="PATH",
                        help="read with the C wire decoder built at PATH (make fuzz: a sanitized build)")
    parser.add_argument("--replay", type=int, metavar="I", help="run case I of --seed here and show what happens")
    args = parser.parse_args(argv)
    if args.replay is not None:
        return replay(args)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
