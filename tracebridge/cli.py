"""The ``tracebridge`` command line. Nothing in the package imports this module.

Expected failures (bad input, unwritable output, a missing extra) print one line
``error: ...`` on stderr and exit with status 2; anything else is a bug and keeps its
traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from .errors import TracebridgeError
from .formats import WRITABLE
from .options import WORKERS_VARIABLE


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # `info x.json --bogus`: the usage of info, not the top-level one
        _command_parser(parser, getattr(args, "command", None)).error(f"unrecognized arguments: {' '.join(unknown)}")
    if not getattr(args, "command", None):
        parser.print_help(sys.stderr)
        return 2
    try:
        return args.handler(args) or 0
    except TracebridgeError as error:
        print(f"error: {error}", file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return _closed_pipe()


def _return_large_blocks() -> None:
    """glibc serves a large block from its heap once one of that size was freed (its mmap
    threshold rises with every large free), and a block freed there stays resident: the
    temporaries of 3M rows then add up in the peak RSS. A fixed threshold of 8 MiB maps each
    block that large (a column of a million rows or more) apart and returns it to the kernel
    when freed: a 3M-event summary peaks 15% lower (226 -> 192 MB). Only the summary sets it:
    a convert reuses its temporaries' pages from the heap, and mapping each afresh costs it
    a fifth more time (its peak is the writer's own, 4% higher without).

    The smaller blocks (a 3M-row mask is 3 MB) stay in the heap, and a trim threshold of
    256 MiB keeps the heap's freed top for the next of them instead of handing it back at
    once: each block given back is faulted in again, page by page, when the next is made.
    On the 3M-event summary: 13-18k page faults fewer (of 40k), 10-15% less time, the same
    peak (the live rows set it, not the reuse)."""
    try:
        import ctypes
        mallopt = ctypes.CDLL(None).mallopt  # other C libraries have no mallopt
        mallopt(-3, 8 << 20)  # M_MMAP_THRESHOLD
        mallopt(-1, 256 << 20)  # M_TRIM_THRESHOLD
    except (OSError, AttributeError):
        pass


def _closed_pipe() -> int:
    """The reader went away (``summary T | head -2``): end quietly, as ``head``'s writers do.
    Python's docs (signal, "Note on SIGPIPE"): point stdout at devnull so that the flush at
    exit does not raise a second BrokenPipeError; 141 is what a shell reports for SIGPIPE."""
    import os
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # stdout is no file (redirected in-process)
        pass
    return 141


def _positive(text: str) -> int:
    """``--top``: a row count, 1 or more (0 or -3 would print empty tables)."""
    return _whole_number(text, 1, "{} is not a positive number of rows")


def _count(text: str) -> int:
    """``--warmup``: a step count, 0 or more."""
    return _whole_number(text, 0, "{}: a step count, 0 or more")


def _whole_number(text: str, least: int, too_small: str) -> int:
    """An option's whole number, at least ``least`` (``too_small``: the error, of the value)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < least:
        raise argparse.ArgumentTypeError(too_small.format(value))
    return value


WARMUP_HELP = ("leave out the first N steps (default: the steady state: the steps that hold one-time work, "
               "a first call's tracing, XLA compilation, variable initialization or tf.data start-up, found from "
               "the trace and named in a note; 0 keeps every step)")


def _parser() -> argparse.ArgumentParser:
    from . import __version__
    parser = argparse.ArgumentParser(
        prog="tracebridge",
        description="Read, convert, view and analyse TensorFlow profiles of both worlds: TF1 RunMetadata/"
                    "StepStats, timeline.json, event files and tfvis pickles, and TF2 XSpace (.xplane.pb, "
                    "profile logdirs). summary and info show where the time went, compare aligns two runs "
                    "(a TF1 run against its TF2 port), advise names porting mistakes, doctor says why a "
                    "profile is empty or incomplete, migrate rewrites TF1 profiling code.")
    parser.add_argument("--version", action="version", version=f"tracebridge {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for add in (_add_info, _add_convert, _add_summary, _add_compare, _add_advise, _add_doctor, _add_html,
                _add_tensorboard, _add_view, _add_run_script, _add_capture, _add_migrate, _add_guide, _add_demo):
        add(commands)
    return parser


def _command_parser(parser: argparse.ArgumentParser, name: str | None) -> argparse.ArgumentParser:
    """The parser of subcommand ``name`` (the top-level one without a subcommand)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and name in action.choices:
            return action.choices[name]
    return parser


def _command(commands, name: str, handler, help: str) -> argparse.ArgumentParser:
    """The parser of subcommand ``name`` that runs ``handler``. ``help`` is its line in
    ``tracebridge --help`` and the first sentence of ``tracebridge NAME --help``, before the
    longer text of _DESCRIPTIONS where it has one."""
    description = f"{help[0].upper()}{help[1:]}." + (f" {_DESCRIPTIONS[name]}" if name in _DESCRIPTIONS else "")
    command = commands.add_parser(name, help=help, description=description)
    command.set_defaults(handler=handler)
    return command


# The longer text of ``tracebridge COMMAND --help``, after its one line, for the commands that have one.
_DESCRIPTIONS = {
    "summary": "A profile logdir with several hosts (or several XSpace files) is summarized host by host and "
               "merged: in this process, on a local Dask cluster (--workers N) or on an existing one "
               "(--scheduler); Dask needs tracebridge[dask].",
    "doctor": "One line per problem, most serious first: code, what is missing, the evidence, the fix. Exit "
              "status 0: nothing wrong, or warnings only (few_steps, no_memory_records); 1: problems found; "
              "2: bad input.",
    "view": "With --perfetto the trace (converted to .pftrace unless it is one) is served once on 127.0.0.1 and "
            "https://ui.perfetto.dev is opened on it; the URL is printed when no browser can be started.",
    "migrate": "RunOptions/RunMetadata, traced session.run, timeline.Timeline, add_run_metadata, ProfilerHook and "
               "tfvis become tracebridge calls that run under TF 2, in .py files and .ipynb notebooks. Prints a "
               "diff unless --write or --check.",
    "guide": "KIND is a finding's kind, as its 'fix' names it (eager_ops, retracing, host_gaps, ...). The guide "
             "ships inside the package.",
    "run": "The script (or -m module) runs unmodified, as Python would: its __main__, sys.argv, sys.path[0] and "
           "exit status. The steps it makes with a TF1 session.run or MonitoredSession, Keras fit or "
           "train_on_batch, a tf.function called in a loop, or eager code marked with "
           "tf.profiler.experimental.Trace(name, step_num=N) are caught, the steps asked for traced, and OUT "
           "written, also when the script fails or Ctrl-C stops it.",
    "demo": "The model is a two-layer MLP, as TF1 code (a tf.compat.v1.Session) and as a TF2 tf.function step; "
            "per run it writes a Chrome trace, the HTML timeline, RunMetadata per step and a summary, then the "
            "comparison of the two (comparison.txt, comparison.html).",
}


def _add_info(commands) -> None:
    info = _command(commands, "info", _info, "format, steps, devices and counts of a trace")
    info.add_argument("input", help=_INPUT_HELP)
    _add_shown(info, "print JSON (the recorded graph whole, where there is one)",
               "print CSV: one row per line of the text (section,key,kind,count,duration_ns,lanes,value), "
               "every step and device")
    _add_workers(info)


def _add_convert(commands) -> None:
    convert = _command(commands, "convert", _convert, "write a trace in another format")
    convert.add_argument("input", help=_INPUT_HELP)
    convert.add_argument("output", help="the file to write; its suffix names the format unless --to does")
    convert.add_argument("--to", choices=WRITABLE, help="output format (default: from the output's suffix)")
    convert.add_argument("--no-dataflow", action="store_true", help="Chrome, Perfetto: no flow arrows")
    convert.add_argument("--split-steps", action="store_true",
                         help=".pb/.pbtxt hold one step: write one file per step, NAME.step-N.pb")
    convert.add_argument("--memory", action="store_true",
                         help="Chrome: allocator counter tracks (Perfetto writes them always)")
    _add_filters(convert)


def _add_summary(commands) -> None:
    summary = _command(commands, "summary", _summary, "top ops by total time, by op type and by device")
    summary.add_argument("input", nargs="+", help="a trace file, a profile logdir, or one XSpace file per host")
    summary.add_argument("--top", type=_positive, default=20, help="rows per table (default 20)")
    summary.add_argument("--warmup", type=_count, default=None, metavar="N",
                         help=WARMUP_HELP + " (the median step's breakdown)")
    _add_shown(summary, "print the tables as JSON",
               "print the tables as CSV (one row per op, op type, device; --by-host: one row per host)")
    summary.add_argument("--by-host", action="store_true",
                         help="also per-host step times, stragglers, step skew and collective time")
    summary.add_argument("--threshold", type=float, metavar="SHARE",
                         help="--by-host: a straggler's median step exceeds all hosts' median by more than "
                              "this share (default 0.1: Thresholds.straggler)")
    _add_scheduler(summary, "run the hosts on this Dask cluster")
    summary.add_argument("--html", metavar="OUT", help="--by-host: also write the overview page (host x step heat "
                                                       "map, stragglers) and the stragglers' timeline pages")
    summary.add_argument("--timeline", action="append", default=[], metavar="HOST",
                         help="--html: also write this host's timeline page (repeatable)")
    _add_run(summary)
    _add_filters(summary)


# compare --sort's choices (the names of analysis.compare.result.SORTS) and run's default
# steps (capture.script.DEFAULT_STEPS), written out so that building the parser imports
# neither the comparison nor the capture package (each would cost every command, a summary
# too, ~50 ms of imports); tests/test_imports.py checks that they agree.
COMPARE_SORTS = ("change", "slower", "faster", "control", "test", "name")
RUN_DEFAULT_STEPS = "2-4"


def _add_compare(commands) -> None:
    diff = _command(commands, "compare", _compare, "compare two runs of the same model (control A, test B)")
    diff.add_argument("control", help="the run compared against (say, the TF1 run): " + _INPUT_HELP)
    diff.add_argument("test", help="the run under test (say, its TF2 port): " + _INPUT_HELP)
    _add_shown(diff, "print the comparison as JSON (headline, findings, rows)",
               "print every aligned row as CSV, ranked as --sort says (--by-host-group: each led by its groups' "
               "names)")
    diff.add_argument("--html", metavar="OUT", help="also write the diff view to OUT")
    diff.add_argument("--rule", action="append", default=[], metavar="PATTERN=REPLACEMENT",
                      help="rewrite op names of both runs with a regular expression first (repeatable)")
    diff.add_argument("--warmup", type=_count, default=None, metavar="N",
                      help=WARMUP_HELP)
    _add_thresholds(diff)
    diff.add_argument("--top", type=_positive, default=25, help="rows in the table (default 25)")
    diff.add_argument("--sort", choices=COMPARE_SORTS, default="change",
                      help="rank the table's rows by: change (largest absolute change, default), slower, faster, "
                           "control or test (median time), name; rows of one run only come after, longest first")
    diff.add_argument("--time", choices=("auto", "device", "host"), default="auto",
                      help="compare device time per TF op (kernels, copies) or the TF ops' host time; "
                           "auto: device time when both runs have device activity")
    diff.add_argument("--by-host-group", action="store_true",
                      help="CONTROL and TEST are multi-host runs (profile logdirs, or FILE,FILE,... one host "
                           "each): compare host group by host group (worker-3 is in group worker)")
    _add_scheduler(diff, "--by-host-group: on this Dask cluster")
    _add_workers(diff)


def _add_advise(commands) -> None:
    advice = _command(commands, "advise", _advise, "findings of one run: eager ops, retracing, host gaps, "
                      "input waits, device idle, memory growth")
    advice.add_argument("input", nargs="+", help="a trace file, a profile logdir, or one XSpace file per host "
                        "(several hosts: findings host by host)")
    advice.add_argument("--warmup", type=_count, default=None, metavar="N", help=WARMUP_HELP)
    _add_thresholds(advice)
    _add_shown(advice, "print the findings as JSON",
               "print the findings as CSV, one row each (several hosts: a host column first)")
    _add_scheduler(advice, "several hosts: on this Dask cluster")
    _add_run(advice)
    _add_workers(advice)


def _add_doctor(commands) -> None:
    checkup = _command(commands, "doctor", _doctor,
                       "why a profile is empty or lacks time, memory, steps or devices, and what to change")
    checkup.add_argument("input", nargs="+", help="a trace file, a run folder, a profile logdir, or one XSpace "
                         "file per host")
    _add_shown(checkup, "print the problems as JSON",
               "print the problems as CSV (code,path,missing,evidence,fix), then what was not checked")
    _add_run(checkup)
    checkup.add_argument("--min-steps", type=_positive, metavar="N",
                         help="the steps timing findings need (default 3): fewer is the few_steps warning")


def _add_html(commands) -> None:
    view = _command(commands, "html", _html, "write the standalone HTML timeline view")
    view.add_argument("input", help=_INPUT_HELP)
    view.add_argument("output", help="the .html file to write")
    # --device (the filters below) keeps the devices matching REGEX; --device-pattern, tfvis's
    # name for it, stays working for old scripts but is no second option in the help.
    view.add_argument("--device-pattern", metavar="REGEX", help=argparse.SUPPRESS)
    view.add_argument("--title", help="the page title (default: the input file's name)")
    _add_filters(view)


def _add_tensorboard(commands) -> None:
    board = _command(commands, "tensorboard", _tensorboard, "write an event file and an XSpace for TensorBoard")
    board.add_argument("input", help=_INPUT_HELP)
    board.add_argument("logdir", help="the TensorBoard logdir to write into (made if missing)")
    board.add_argument("--run", help="run folder name under plugins/profile (default: the trace's start time)")
    _add_filters(board)


def _add_view(commands) -> None:
    show = _command(commands, "view", _view, "open a trace in a viewer: the HTML view, or the Perfetto UI (--perfetto)")
    show.add_argument("input", help=_INPUT_HELP)
    show.add_argument("--perfetto", action="store_true", help="open it in the Perfetto UI")
    show.add_argument("--port", type=int, default=9001,
                      help="--perfetto: the local port (default 9001, the one the Perfetto UI fetches from)")
    show.add_argument("--out", metavar="FILE", help="keep the converted file here (default: a temporary file)")
    _add_filters(show)


def _add_run_script(commands) -> None:
    run = _command(commands, "run", _run_script, "run a TF1 or TF2 script unmodified and trace a few of its steps")
    run.usage = "tracebridge run [--steps A-B] [-o OUT] [--] script.py [args ...]  |  ... -m module [args ...]"
    run.add_argument("--steps", default=RUN_DEFAULT_STEPS, metavar="A-B",
                     help=f"the steps to trace, counted from 0 in the order the script reaches them "
                          f"(default {RUN_DEFAULT_STEPS}: after the first steps, which trace and compile)")
    run.add_argument("-o", "--output", metavar="OUT", help="the trace to write; its suffix names the format "
                     "(.json, .json.gz, .pftrace, .html, .pb, .xplane.pb; default SCRIPT.trace.json)")
    run.add_argument("-m", dest="module", action="store_true", help="run a module, as python -m does")
    run.add_argument("script", nargs=argparse.REMAINDER, metavar="script.py [args ...]",
                     help="the script (or with -m the module) and its arguments")


def _add_capture(commands) -> None:
    capture = _command(commands, "capture", _capture, "capture TF profiler servers (host:port,...) into a trace file")
    capture.add_argument("addresses", help="HOST:PORT[,HOST:PORT...] of tf.profiler.experimental.server.start")
    capture.add_argument("output", help="trace file to write (.json, .json.gz, .pb, .pbtxt)")
    capture.add_argument("--duration-ms", type=int, default=2000, help="capture length (default 2000)")
    capture.add_argument("--host-tracer-level", type=int, default=2, choices=(1, 2, 3),
                         help="TF's host_tracer_level: 1 user annotations, 2 + TF ops (default), 3 + more detail")
    capture.add_argument("--python-tracer-level", type=int, default=0, choices=(0, 1),
                         help="1: also trace Python function calls (default 0)")
    capture.add_argument("--device-tracer-level", type=int, default=1, choices=(0, 1),
                         help="1: trace GPU kernels and copies (default); 0: host only")


def _add_migrate(commands) -> None:
    migrate = _command(commands, "migrate", _migrate,
                       "rewrite legacy TF1 profiling scripts and notebooks for TF 2 (needs tracebridge[migrate])")
    migrate.add_argument("paths", nargs="+", metavar="PATH", help="files or folders")
    mode = migrate.add_mutually_exclusive_group()
    mode.add_argument("--diff", action="store_true", help="print a unified diff (the default)")
    mode.add_argument("--write", action="store_true", help="rewrite the files in place")
    mode.add_argument("--check", action="store_true",
                      help="exit 1 if any file would change or uses what TF 2.21 lacks (report lines 'not in TF 2.21')")
    migrate.add_argument("--quiet", action="store_true", help="no per-change report on stderr")


def _add_guide(commands) -> None:
    guide = _command(commands, "guide", _guide,
                     "print a section of the migration guide (the one a finding's fix links to)")
    guide.add_argument("kind", nargs="?", metavar="KIND",
                       help="a finding's kind, e.g. eager_ops (none: list the sections)")


def _add_demo(commands) -> None:
    demo = _command(commands, "demo", _demo, "train one small model as TF1 code and as its TF2 port, trace both "
                    "and compare them (needs tracebridge[tf])")
    demo.add_argument("--out", default="tracebridge-demo", help="output folder (default ./tracebridge-demo)")
    demo.add_argument("--steps", type=int, default=3, help="traced steps (default 3)")


def _add_shown(parser: argparse.ArgumentParser, json_help: str, csv_help: str) -> None:
    """``--json`` or ``--csv``, one at the most: what the command prints instead of its text."""
    shown = parser.add_mutually_exclusive_group()
    shown.add_argument("--json", action="store_true", help=json_help)
    shown.add_argument("--csv", action="store_true", help=csv_help)


def _add_run(parser: argparse.ArgumentParser) -> None:
    """``--run``: which run of a profile logdir the input means (read by ``_load`` as ``input_run``)."""
    parser.add_argument("--run", dest="input_run", help="the profile run of a logdir (default: the newest)")


def _add_scheduler(parser: argparse.ArgumentParser, help: str) -> None:
    parser.add_argument("--scheduler", metavar="tcp://HOST:PORT", help=help)


_INPUT_HELP = ("a trace file (.pb, .pbtxt, .json[.gz], .xplane.pb, .pftrace, an event file, a tfvis pickle) "
               "or a profile logdir")


def _add_thresholds(parser: argparse.ArgumentParser) -> None:
    """The settings of analysis.common.thresholds.Thresholds that users tune; unset flags keep its
    defaults (the one place they live), and --json echoes the values used."""
    from .analysis.common.thresholds import DEFAULT
    tuned = parser.add_argument_group("what counts as a change (--json echoes every setting used)")
    tuned.add_argument("--threshold", type=float, metavar="SHARE",
                       help="a row or step changed when its interval over steps moves by more than this share of "
                            f"the control's median (default {DEFAULT.change})")
    tuned.add_argument("--noise-floor", metavar="TIME",
                       help="a change smaller than this is noise whatever its share, e.g. 2us "
                            f"(default {DEFAULT.noise_ns / 1000:g}us)")
    tuned.add_argument("--min-steps", type=_positive, metavar="N",
                       help=f"timing findings need N steps a run or more; fewer get a note (default {DEFAULT.min_steps})")
    tuned.add_argument("--confidence", type=float, metavar="LEVEL",
                       help="the one-sided confidence of the intervals findings are decided on "
                            f"(default {DEFAULT.confidence})")


def _thresholds(args):
    """The Thresholds the flags of _add_thresholds ask for."""
    from .analysis.common.thresholds import DEFAULT
    return DEFAULT.with_options(change=args.threshold, noise_floor=args.noise_floor, min_steps=args.min_steps,
                                confidence=args.confidence)


def _add_filters(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--step", type=int, help="only this step number")
    parser.add_argument("--device", metavar="REGEX", help="only devices matching REGEX")
    parser.add_argument("--name", metavar="REGEX", help="only ops whose name matches REGEX")
    parser.add_argument("--op-type", metavar="REGEX", help="only ops whose type matches REGEX")
    slices = parser.add_argument_group("slices (ops kept whole, with their kernels; the notes say what was left out)")
    slices.add_argument("--steps", metavar="STEPS", help="only these step numbers: 3-5 or 3,7")
    slices.add_argument("--start", metavar="TIME", help="window start after the trace start, e.g. 2ms")
    slices.add_argument("--end", metavar="TIME", help="window end after the trace start, e.g. 5.5ms")
    slices.add_argument("--min-duration", metavar="TIME", help="drop events shorter than this, e.g. 10us")
    _add_workers(parser)


def _add_workers(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--workers", type=int, metavar="N",
                        help="processes: several hosts (a logdir, one XSpace per host) run on a local Dask "
                             "cluster of N (tracebridge[dask]; 1: in this process); one large trace is read "
                             "and written by 1 or 2 (default: 2 where forking is safe, for large inputs; "
                             f"{WORKERS_VARIABLE} if set)")


def _load(args, path: str | None = None, ops_only: bool = False):
    from .formats import load
    trace = load(path or args.input, workers=args.workers, run=getattr(args, "input_run", None), ops_only=ops_only)
    filters = _filters(args)
    if filters:
        if "step" in filters and filters["step"] not in [s.number for s in trace.steps]:
            numbers = ", ".join(str(s.number) for s in trace.steps) or "none"
            raise _UsageError(f"--step {filters['step']}: no such step (steps: {numbers})")
        trace = trace.filter(**filters)
    slicing = {k: getattr(args, k, None) for k in ("steps", "start", "end", "min_duration")}
    slicing = {k: v for k, v in slicing.items() if v is not None}
    if slicing:
        trace = trace.slice(**slicing)
        print(f"slice: {trace.metadata['slice']}", file=sys.stderr)
    return trace


def _filters(args) -> dict:
    """The --step/--device/--name/--op-type filters given, their expressions checked."""
    filters = {k: getattr(args, k, None) for k in ("step", "device", "name", "op_type")}
    filters = {k: v for k, v in filters.items() if v is not None}
    import re
    for key in ("device", "name", "op_type"):
        if key in filters:
            try:
                re.compile(filters[key])
            except re.error as error:
                raise _UsageError(f"--{key.replace('_', '-')}: bad regular expression ({error})")
    return filters


class _UsageError(TracebridgeError):
    pass


def _info(args) -> int:
    from .analysis.run.summary import describe_csv, shown_metadata
    from .analysis.common.tables import human_bytes, plural
    trace = _load(args)
    info = {**trace.info(), "notes": _notes(trace)}
    if args.json:
        print(json.dumps(info, indent=2, default=str))
        return 0
    if args.csv:
        sys.stdout.write(describe_csv(info))
        return 0
    print(f"{args.input}: {info['format']}")
    for key, value in shown_metadata(info):  # what grows with the model outlined: --json prints it whole
        print(f"  {key}: {value}")
    # The count summary gives; other rows (host annotations, profiler bookkeeping such as
    # ThreadpoolListener::Record, or TF ops where kernels are counted) only in parentheses.
    besides = f" ({info['events']} events in all)" if info["events"] != info["ops"] else ""
    print(f"{info['ops']} {info['counted']}{besides} over {info['span_ns'] / 1e6:.3f} ms")
    steps = info["steps"]
    if steps:
        shown = ", ".join(f"{s['number']} ({s['duration_ns'] / 1e6:.3f} ms)" for s in steps[:10])
        print(f"{plural(len(steps), 'step')}: {shown}{' ...' if len(steps) > 10 else ''}")
    print(f"{plural(len(info['devices']), 'device')}:")
    for device in info["devices"]:
        print(f"  {device['name']}  ({device['kind']}, {plural(device['ops'], 'event')}, "
              f"{plural(device['lanes'], 'lane')})")
    if info["layers"]:  # the recorded graph's parameters, as compare pairs them
        print(f"{plural(len(info['layers']), 'layer')} ({sum(x['parameters'] for x in info['layers']):,} parameters):")
        for layer in info["layers"]:
            shapes = ", ".join("[" + ", ".join(map(str, shape)) + "]" for shape in layer["shapes"])
            print(f"  {layer['name']}  ({layer['parameters']:,} parameters: {shapes})")
    if info["transfers"]["count"]:
        print(f"{plural(info['transfers']['count'], 'transfer')}, {human_bytes(info['transfers']['bytes'])}")
    if info["memory"]["allocators"]:
        peaks = ", ".join(f"{k} {human_bytes(v)}" for k, v in info["memory"]["allocators"].items())
        print(f"memory peaks: {peaks}")
    for note in info["notes"]:
        print(f"note: {note}")
    return 0


def _convert(args) -> int:
    from .formats import check_options, output_format, save
    target = output_format(args.output, args.to)
    # Only what was asked for: the format refuses options it does not take (--memory for
    # a .pb, say) instead of dropping them.
    options = {"dataflow": False if args.no_dataflow else None, "memory": True if args.memory else None,
               "split_steps": True if args.split_steps else None}
    options = {key: value for key, value in options.items() if value is not None}
    if "workers" in target.write_options:
        options["workers"] = args.workers
    progress = "progress" in target.write_options and sys.stderr.isatty()
    if progress:
        options["progress"] = _progress("writing")
    check_options(target, args.output, options)  # before the input is read
    if target.name == "perfetto" and _streams_hosts(args):
        from .formats import save_hosts_perfetto
        hosts = save_hosts_perfetto(args.input, args.output, dataflow=not args.no_dataflow, workers=args.workers)
        print(f"wrote {args.output} (perfetto, host by host, {_plural(hosts, 'host')})")
        return 0
    import os
    if target.name == "perfetto" and not _filtered(args) and not os.path.isdir(args.input):
        # one file, whole: a large XSpace streams a window of steps at a time
        from .formats import convert_perfetto
        ops, steps = convert_perfetto(args.input, args.output, **options)
        if progress:
            print(file=sys.stderr)
        print(f"wrote {args.output} (perfetto, {_plural(ops, 'event')}, {_plural(steps, 'step')})")
        return 0
    trace = _load(args)
    written = save(trace, args.output, to=target.name, **options)
    if progress:
        print(file=sys.stderr)
    if len(written) > 1:
        print(f"wrote {len(written)} files, one per step: {', '.join(written)} ({target.name}, "
              f"{_plural(len(trace), 'event')})")
    else:
        print(f"wrote {args.output} ({target.name}, {_plural(len(trace), 'event')}, {_plural(len(trace.steps), 'step')})")
    return 0


def _filtered(args) -> bool:
    """Whether a filter or a slice asks for part of the input."""
    return any(getattr(args, k, None) is not None for k in ("step", "device", "name", "op_type", "steps", "start",
                                                             "end", "min_duration"))


def _streams_hosts(args) -> bool:
    """A profile logdir of several hosts, with no filter or slice: written host by host."""
    import os

    from .readers.sources import profile_run_hosts
    if _filtered(args):
        return False
    found = profile_run_hosts(args.input, None) if os.path.isdir(args.input) else None
    return bool(found) and len(found[1]) > 1


def _summary(args) -> int:
    _return_large_blocks()
    if args.by_host or _several_hosts(args):
        return _summary_by_host(args)
    # The analysis modules are imported in a thread while the input is read (the reader's
    # C loops leave the interpreter to it: some 15 ms of a large summary's).
    import importlib

    from ._fork import ThreadedJob
    analysis = ThreadedJob(importlib.import_module, "tracebridge.analysis.run.summary")
    # Only the op rows of an XSpace (a summary needs no more): the same result, sooner.
    trace = _load(args, args.input[0], ops_only=True)
    summary = analysis.result().summarize(trace, top=args.top, warmup=args.warmup)
    if args.json:
        print(summary.to_json())
    elif args.csv:
        sys.stdout.write(summary.to_csv())
    else:
        print(summary.to_text())
        for note in _notes(trace):
            print(f"note: {note}")
    return 0


def _several_hosts(args) -> bool:
    """Whether ``args.input`` asks for host-by-host work: several inputs, a Dask
    scheduler, or a profile logdir (or run folder) of more than one host."""
    import os

    from .readers.sources import profile_run_hosts
    if len(args.input) > 1 or args.scheduler:
        return True
    found = profile_run_hosts(args.input[0], args.input_run) if os.path.isdir(args.input[0]) else None
    return bool(found) and len(found[1]) > 1


def _summary_by_host(args) -> int:
    from .analysis.hosts.summary import host_parts, merge_parts
    from .formats import load_host_ops
    from .readers.host_files import host_files
    if (args.html or args.timeline) and not args.by_host:
        raise _UsageError("--html and --timeline go with --by-host")
    filters = _filters(args)
    parts = host_parts(host_files(args.input, args.input_run), load=load_host_ops, filters=filters,
                       workers=args.workers, scheduler=args.scheduler, progress=sys.stderr.isatty())
    if "step" in filters and not any(s["number"] == filters["step"] for p in parts for s in p.summary.steps):
        raise _UsageError(f"--step {filters['step']}: no host has such a step")
    summary = merge_parts(parts, top=args.top)
    report = None
    if args.by_host:
        from .analysis.hosts.stragglers import host_report
        report = host_report(parts, threshold=args.threshold)
    if args.json:
        print(json.dumps({**summary.to_dict(), "by_host": report.to_dict()}, indent=2) if report else
              summary.to_json())
    elif args.csv:  # --by-host: its host table (the merged tables are summary --csv's)
        sys.stdout.write(report.to_csv() if report else summary.to_csv())
    else:
        print(summary.to_text())
        if report:
            print()
            print(report.to_text())
    if args.html:
        _hosts_html(args, report, parts)
    return 0


def _hosts_html(args, report, parts) -> None:
    from .formats import load_host
    from .readers.host_files import HostFile
    from .writers.hosts_html import write_host_timelines, write_hosts_html
    known = {part.host: part for part in parts}
    unknown = [host for host in args.timeline if host not in known]
    if unknown:
        raise _UsageError(f"--timeline {unknown[0]}: no such host (hosts: {', '.join(known)})")
    folder = write_hosts_html(report, parts, args.html)
    print(f"wrote {args.html}", file=sys.stderr)
    wanted = list(dict.fromkeys([s["host"] for s in report.stragglers] + args.timeline))
    pages = write_host_timelines(((host, load_host(HostFile(host, known[host].path))) for host in wanted),
                                 folder)
    for page in pages:
        print(f"wrote {page}", file=sys.stderr)


def _compare(args) -> int:
    import re

    from .analysis.compare import compare
    from .analysis.findings import comparison_findings
    for rule in args.rule:
        pattern, sep, _ = rule.partition("=")
        if not sep:
            raise _UsageError(f"--rule {rule!r}: write PATTERN=REPLACEMENT")
        try:
            re.compile(pattern)
        except re.error as error:
            raise _UsageError(f"--rule {rule!r}: bad regular expression ({error})")
    if args.by_host_group:
        return _compare_host_groups(args)
    if args.scheduler:
        raise _UsageError("--scheduler goes with --by-host-group")
    comparison = compare(_load(args, args.control), _load(args, args.test), rules=args.rule,
                         warmup=args.warmup, thresholds=_thresholds(args), time=args.time, find=comparison_findings)
    if args.json:
        print(comparison.to_json())
    elif args.csv:
        sys.stdout.write(comparison.to_csv(sort=args.sort))
    else:
        print(comparison.to_text(top=args.top, sort=args.sort))
    if args.html:
        from .writers.compare_html import write_compare_html
        names = (_file_title(args.control), _file_title(args.test))
        write_compare_html(comparison, args.html, title=" vs ".join(names), names=names)
        print(f"wrote {args.html}", file=sys.stderr)
    return 0


def _compare_host_groups(args) -> int:
    from .analysis.hosts.groups import compare_host_groups
    from .formats import load_host
    from .readers.host_files import host_files
    if args.html:
        raise _UsageError("--by-host-group prints text, --json or --csv; no --html")
    sides = [host_files(path.split(",") if "," in path else path) for path in (args.control, args.test)]
    result = compare_host_groups(*sides, load=load_host, workers=args.workers, scheduler=args.scheduler, top=args.top,
                                 rules=args.rule, warmup=args.warmup, thresholds=_thresholds(args), time=args.time)
    _print_shown(args, result)
    return 0


def _advise(args) -> int:
    from .analysis.findings import advise
    if _several_hosts(args):
        from .analysis.hosts.advice import advise_hosts
        from .formats import load_host
        from .readers.host_files import host_files
        findings = advise_hosts(host_files(args.input, args.input_run), load=load_host, warmup=args.warmup,
                                thresholds=_thresholds(args), workers=args.workers, scheduler=args.scheduler,
                                progress=sys.stderr.isatty())
    else:
        findings = advise(_load(args, args.input[0]), warmup=args.warmup, thresholds=_thresholds(args))
    _print_shown(args, findings)
    return 0


def _print_shown(args, result) -> None:
    """``result`` as --json or --csv (the group _add_shown adds) asks for, else as text."""
    if args.csv:
        sys.stdout.write(result.to_csv())
    else:
        print(result.to_json() if args.json else result.to_text())


def _doctor(args) -> int:
    from .diagnosis import doctor
    from .analysis.common.thresholds import DEFAULT
    found = doctor(args.input if len(args.input) > 1 else args.input[0], run=args.input_run,
                   thresholds=DEFAULT.with_options(min_steps=args.min_steps))
    if args.json:
        print(found.to_json())
    elif args.csv:
        sys.stdout.write(found.to_csv())
    elif found.problems or found.not_checked:
        print(found.to_text())
    return 0 if found.ok else 1


def _notes(trace) -> list[str]:
    """The doctor's findings on ``trace``, as the notes info and summary print."""
    from .analysis.run.doctor import trace_notes
    return trace_notes(trace)


def _html(args) -> int:
    trace = _load(args)
    if args.device_pattern:
        import re
        try:
            re.compile(args.device_pattern)
        except re.error as error:
            raise _UsageError(f"--device-pattern: bad regular expression ({error})")
    trace.to_html(args.output, device_pattern=args.device_pattern, title=args.title or _file_title(args.input))
    print(f"wrote {args.output} ({_plural(len(trace), 'event')})")
    return 0


def _plural(count: int, word: str) -> str:
    """``1 event``, ``3 events``: what the "wrote ..." lines count (every row: events, as a
    trace's repr and info's "(N events in all)" say)."""
    from .analysis.common.tables import plural
    return plural(count, word)


def _file_title(path: str) -> str:
    """A page's default title: the file's name (a logdir's folder name), as a viewer's tab shows it."""
    import os
    return os.path.basename(os.path.normpath(path)) or path


def _view(args) -> int:
    import os
    import tempfile

    from .view import open_html, serve_for_perfetto
    suffix = ".pftrace" if args.perfetto else ".html"
    sliced = any(getattr(args, k, None) is not None for k in ("step", "device", "name", "op_type", "steps",
                                                                 "start", "end", "min_duration"))
    if args.perfetto and args.input.endswith((".pftrace", ".perfetto-trace")) and not sliced and not args.out:
        return 0 if serve_for_perfetto(args.input, port=args.port) else 1
    target = args.out or os.path.join(tempfile.mkdtemp(prefix="tracebridge-view-"),
                                      os.path.basename(args.input).split(".")[0] + suffix)
    trace = _load(args)
    trace.save(target, to="perfetto" if args.perfetto else "html")
    print(f"wrote {target} ({_plural(len(trace), 'event')})", file=sys.stderr)
    if args.perfetto:
        return 0 if serve_for_perfetto(target, port=args.port) else 1
    open_html(target)
    return 0


def _tensorboard(args) -> int:
    paths = _load(args).to_tensorboard(args.logdir, run=args.run)
    print(f"wrote {paths['events']}")
    print(f"wrote {paths['xspace']}")
    return 0


def _run_script(args) -> int:
    from .capture.script import ScriptRun
    target = args.script[1:] if args.script[:1] == ["--"] else args.script
    if not target:
        raise _UsageError("run: name the script to run (or -m MODULE)")
    return ScriptRun(target[0], target[1:], module=args.module, steps=args.steps, output=args.output).run()


def _capture(args) -> int:
    from .capture.remote import capture_remote
    from .formats import output_format, save
    target = output_format(args.output)  # a bad name fails before the capture, not after
    trace = capture_remote(args.addresses, args.duration_ms, host_tracer_level=args.host_tracer_level,
                           python_tracer_level=args.python_tracer_level,
                           device_tracer_level=args.device_tracer_level)
    save(trace, args.output, to=target.name)
    hosts = sorted({d.host for d in trace.devices if d.host})
    print(f"wrote {args.output} ({_plural(len(trace), 'event')} from {_plural(len(hosts), 'host')}: {', '.join(hosts)})")
    return 0


def _migrate(args) -> int:
    """Every file is tried; a file that cannot be read or parsed prints one ``error:`` line
    and makes the exit status 2, after the others are done."""
    from ._files import write_bytes
    from .errors import MigrationError
    from .migrate import migrate_path, python_sources

    failed = changed = lacking = 0
    for path in python_sources(args.paths):
        try:
            migration = migrate_path(path)
        except MigrationError as error:
            print(f"error: {error}", file=sys.stderr)
            failed += 1
            continue
        if not args.quiet:
            for line in migration.report_lines():
                print(line, file=sys.stderr)
        lacking += bool(migration.missing)
        if not migration.changed:
            continue
        changed += 1
        if args.write:
            mode = path.stat().st_mode
            write_bytes(path, migration.code.encode("utf-8"))
            path.chmod(mode)  # an executable script stays executable
        elif not args.check:
            sys.stdout.write(migration.diff())
    verb = "rewrote" if args.write else "would change"
    print(f"{verb} {changed} file{'s' * (changed != 1)}" + (f", {failed} failed" if failed else "")
          + (f"; {lacking} file{'s' * (lacking != 1)} use{'s' * (lacking == 1)} what TF 2.21 lacks"
             if lacking else ""), file=sys.stderr)
    if failed:
        return 2
    return 1 if args.check and (changed or lacking) else 0


def _guide(args) -> int:
    from .guide import section, sections
    if args.kind is None:
        print("\n".join(sections()))
        return 0
    print(section(args.kind), end="")
    return 0


def _demo(args) -> int:
    from .demo import run_demo
    run_demo(args.out, steps=args.steps)
    return 0


def _progress(label: str):
    last = [0.0]

    def report(done: int, total: int) -> None:
        now = time.monotonic()
        if now - last[0] > 0.2 or done == total:
            last[0] = now
            print(f"\r{label}: {done}/{total} events ({100 * done // max(total, 1)}%)", end="",
                  file=sys.stderr, flush=True)
    return report


if __name__ == "__main__":
    raise SystemExit(main())
