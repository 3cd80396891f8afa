"""The format table: every format tracebridge reads or writes, and the one registry above
the model.

``load`` tells a file's format apart with the formats' sniffers (or finds a format's files
in a folder) and hands them to that format's reader; ``save`` picks the writer by the
file's suffix (or ``to=``) and refuses options that the format does not take. The CLI's
``--to`` choices and the README's format table come from :data:`FORMATS` as well.

This module also installs what a trace's conveniences (``Trace.save``, ``summary``,
``to_html``, ...) call, so that the model imports nothing above it. Readers, writers and
analyses are named as ``"module:function"`` and imported on first use: reading a Chrome
trace imports neither protobuf nor the HTML writer.
"""

from __future__ import annotations

import functools
import importlib
import os
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ._files import atomic_output
from .errors import OptionError, OutputError, TraceFormatError
from .model.trace import Trace, install_consumers
from .options import Parallelism, choose_parallelism
from .readers import sources
from .readers.host_files import HostFile, host_files, read_host
from .readers.sources import Evidence, InputFile, Source


def _lazy(reference: str) -> Callable[..., Any]:
    """``"module:function"`` as a function that imports its module when first called."""
    module, _, name = reference.partition(":")

    def call(*args, **kwargs):
        return getattr(importlib.import_module(module), name)(*args, **kwargs)
    call.__qualname__ = call.__name__ = name
    return call


def _html_with_problems(writer: str, trace, *args, **options):
    """An HTML page of ``trace`` with the doctor's panel: the writer shows what it is
    handed, and the analysis that finds the problems is imported here, on first use."""
    from .analysis.run.doctor import diagnose
    from .writers import html
    return getattr(html, writer)(trace, *args, problems=diagnose(trace).problems, **options)


@dataclass(frozen=True)
class Format:
    """One format. ``sniff(name, data)`` says how surely a file is in it;
    ``find_in_folder(folder, run)`` gathers its files from a folder (None: not here);
    ``read(source, parallelism)`` makes the trace; ``write(trace, path, **options)``
    writes one, taking only ``write_options``; ``suffixes``: the file names ``save``
    writes in this format. ``what`` and ``recognized_by`` are the README's words."""

    name: str
    what: str
    recognized_by: str
    sniff: Callable[[str, bytes], Evidence] | None = None
    find_in_folder: Callable[[str, str | None], Source | None] | None = None
    read: Callable[..., Trace] | None = None
    write: Callable[..., None] | None = None
    suffixes: tuple[str, ...] = ()
    write_options: tuple[str, ...] = ()
    keeps_steps: bool = True
    read_ops: Callable[..., Trace] | None = None  # op rows and steps only, for a summary


# Order matters twice: where two sniffers are equally sure, the earlier format wins, and
# folders are offered to the formats in this order.
FORMATS: tuple[Format, ...] = (
    Format("chrome", "Chrome trace JSON (`timeline.json`, `timeline-<step>.json`, merged runs), `.json.gz`",
           "JSON; runs merged into one file are split at their `_SOURCE` ops",
           sniff=sources.sniff_chrome, read=_lazy("tracebridge.readers.chrome:read"),
           write=_lazy("tracebridge.writers.chrome:write_chrome"), suffixes=(".json", ".json.gz"),
           write_options=("dataflow", "memory", "progress", "workers")),
    Format("perfetto", "Perfetto's own trace format (`.pftrace`: TracePacket/TrackEvent protobuf), as "
           "tracebridge writes it", "the suffix `.pftrace` or `.perfetto-trace`",
           sniff=sources.sniff_perfetto, read=_lazy("tracebridge.readers.perfetto:read"),
           write=_lazy("tracebridge.writers.perfetto:write_perfetto"), suffixes=(".pftrace", ".perfetto-trace"),
           write_options=("dataflow", "memory", "progress", "workers")),
    Format("runmetadata", "`RunMetadata` / `StepStats`, binary",
           "the content (what no other format claims); both messages are told apart",
           read=_lazy("tracebridge.readers.stepstats:read"),
           write=_lazy("tracebridge.writers.stepstats:write_run_metadata"), suffixes=(".pb",),
           write_options=("split_steps",), keeps_steps=False),
    Format("pbtxt", "the same as text (`str(run_metadata)`)", "starts with `step_stats {` or `dev_stats {`",
           sniff=sources.sniff_pbtxt, read=_lazy("tracebridge.readers.pbtxt:read"),
           write=_lazy("tracebridge.writers.stepstats:write_pbtxt"), suffixes=(".pbtxt", ".txt"),
           write_options=("split_steps",), keeps_steps=False),
    Format("xspace", "XSpace (`.xplane.pb`); TF2 profile logdirs (`LOGDIR/plugins/profile/<run>/<host>.xplane.pb`)",
           "the suffix, GPU and TPU planes included; a logdir folder: its newest run "
           "(`load(logdir, run=...)` for another), all hosts merged",
           sniff=sources.sniff_xspace, find_in_folder=sources.find_profile_run,
           read=_lazy("tracebridge.readers.xspace:read"), read_ops=_lazy("tracebridge.readers.xspace:read_ops"),
           write=_lazy("tracebridge.writers.xspace:write_xspace_file"), suffixes=(".xplane.pb",)),
    Format("events", "TensorBoard event files (`add_run_metadata`, `ProfilerHook`)",
           "`tfevents` in the name, or a folder of them; one step per `tagged_run_metadata`; "
           "a truncated last record is tolerated",
           sniff=sources.sniff_events, find_in_folder=sources.find_event_files,
           read=_lazy("tracebridge.readers.events:read")),
    Format("pickle", "tfvis pickles (`pickle.dump(run_metadata)`), pickled tftracer `Timeline`s", "pickle opcodes; see *Safety*",
           sniff=sources.sniff_pickle, read=_lazy("tracebridge.readers.pickles:read")),
    Format("html", "the timeline view (`to_html`)", "(written only)",
           write=lambda trace, path, **options: _html_with_problems("write_html", trace, path, **options),
           suffixes=(".html", ".htm"),
           write_options=("device_pattern", "title")),
)
BY_NAME = {fmt.name: fmt for fmt in FORMATS}
UNCLAIMED = BY_NAME["runmetadata"]  # the format of a file that no sniffer claims
READABLE = tuple(fmt.name for fmt in FORMATS if fmt.read)
WRITABLE = tuple(fmt.name for fmt in FORMATS if fmt.write)


def load(path: str | os.PathLike, *, format: str | None = None, run: str | None = None,
         workers: int | None = None, ops_only: bool = False) -> Trace:
    """Read a trace file or folder into a :class:`Trace`.

    The format is told apart by the file's name and content unless ``format`` names one
    (see :data:`FORMATS`). Folders: a TF2 profile logdir (``plugins/profile/<run>/``; the
    newest run unless ``run`` names one, all hosts merged) or a folder of event files.
    ``workers``: processes for large inputs (see :mod:`tracebridge.options`).
    ``ops_only``: a format that can (XSpace) reads only the op rows and steps, with the
    values a full read gives them: all a summary uses, in less time and memory. Raises
    :class:`~tracebridge.errors.TraceFormatError`.
    """
    parallelism = choose_parallelism(workers)
    name = os.fspath(path)
    if os.path.isdir(name):
        fmt, source = _find_in_folder(name, run)
    else:
        data = sources.read_file(name)
        fmt, evidence = (BY_NAME.get(format), None) if format else _claim(name, data)
        if fmt is None or fmt.read is None:
            raise TraceFormatError(f"unknown format {format!r} (one of {', '.join(READABLE)})", path=name)
        source = Source(name, (InputFile(name, data),))
        del data  # the source holds it: a reader that takes it frees it as soon as it can
        if evidence is Evidence.NONE:
            return _read_unclaimed(fmt, source, parallelism, ops_only)
    return _read(fmt, source, parallelism, ops_only)


def _read_unclaimed(fmt: Format, source: Source, parallelism: Parallelism, ops_only: bool) -> Trace:
    """Bytes no format claims are read as a RunMetadata (TF1 scripts saved them under any
    name); where that fails too, the error says so, not only that a RunMetadata is corrupt."""
    try:
        return _read(fmt, source, parallelism, ops_only)
    except TraceFormatError as error:
        where = f" at {error.where}" if error.where else ""
        raise TraceFormatError(f"not a trace tracebridge can read: no format claims it (tried: {_tried()}), and read "
                               f"as a {fmt.name} (the default) it fails{where}: {error.reason}",
                               path=source.path) from None


def load_host(file: HostFile, *, ops_only: bool = False) -> Trace:
    """One host's trace of a multi-host profile (see :mod:`tracebridge.readers.host_files`),
    its devices named for ``file.host``: the loader the host-by-host analyses call where
    they run. An XSpace is read whole, or only its op rows and steps with ``ops_only``;
    another format (a TF1 task's RunMetadata or Chrome trace) whole."""
    return _host_trace(file, read_host(file), ops_only)


def _host_trace(file: HostFile, data: bytes, ops_only: bool = False) -> Trace:
    """:func:`load_host` of the bytes ``data`` of ``file``."""
    fmt, evidence = (BY_NAME["xspace"], None) if file.path.endswith(".xplane.pb") else _claim(file.path, data)
    source = Source(file.path, (InputFile(file.path, data, file.host),))
    del data  # as in load()
    read = _read_unclaimed if evidence is Evidence.NONE else _read
    return read(fmt, source, choose_parallelism(1), ops_only)


def load_host_windows(file: HostFile):
    """:func:`load_host` for a writer that streams: a host whose file is one large XSpace
    comes as its windows of steps (an iterator of traces, one made at a time, see
    :mod:`tracebridge.readers.xspace_windows`), any other as its trace."""
    data = read_host(file)
    if file.path.endswith(".xplane.pb"):
        from .readers.xspace_windows import plan_windows
        windows = plan_windows(file.path, data, host=file.host, threads=choose_parallelism(1).threads())
        if windows is not None:
            return windows.traces()
    return _host_trace(file, data)


def convert_perfetto(source: str | os.PathLike, path: str | os.PathLike, *, dataflow: bool = True,
                     memory: bool = True, progress=None, workers: int | None = None) -> tuple[int, int]:
    """The trace file ``source`` as a ``.pftrace`` at ``path``, in bounded memory: one
    large XSpace (steps, millions of events) is read and written a window of steps at a
    time (:mod:`tracebridge.readers.xspace_windows`,
    :mod:`tracebridge.writers.perfetto_stream`: the same slices as the whole trace's, less
    the flows between windows); any other input (a folder too) is loaded and written as
    :func:`save` writes it, to the same bytes. Options as ``save``'s for ``.pftrace``.
    Returns the number of ops and steps written. Raises
    :class:`~tracebridge.errors.TraceFormatError` and :class:`~tracebridge.errors.OutputError`."""
    name = os.fspath(source)
    options = {"dataflow": dataflow, "memory": memory, "workers": workers}
    if progress is not None:
        options["progress"] = progress
    if os.path.isdir(name):
        trace = load(name, workers=workers)
    else:
        data = sources.read_file(name)
        fmt, evidence = _claim(name, data)
        if fmt.name == "xspace":
            from .readers.xspace_windows import plan_windows
            windows = plan_windows(name, data, threads=choose_parallelism(workers).threads())
            if windows is not None:
                from .writers.perfetto_stream import write_perfetto_windows
                del data
                total = windows.events

                def report(done: int, _) -> None:  # ops written of the file's events, about
                    progress(min(done, total), total)
                options["progress"] = report if progress is not None else None
                try:
                    ops, steps = write_perfetto_windows(windows.traces(), path, **options)
                except TraceFormatError:  # as the whole read names it (and what mangled the file)
                    _read(fmt, Source(name, (InputFile(name, windows.raw),)), choose_parallelism(1), False)
                    raise
                if progress is not None:
                    progress(total, total)
                return ops, steps
        file = Source(name, (InputFile(name, data),))
        del data
        read = _read_unclaimed if evidence is Evidence.NONE else _read
        trace = read(fmt, file, choose_parallelism(workers), False)
    BY_NAME["perfetto"].write(trace, path, **options)
    return len(trace), len(trace.steps)


def save_hosts_perfetto(inputs, path: str | os.PathLike, *, run: str | None = None, dataflow: bool = True,
                        memory: bool = True, workers: int | None = None, scheduler: str | None = None) -> int:
    """A multi-host profile (a logdir, a run folder or one XSpace file per host) as one
    ``.pftrace``, host by host: in this process (one host in memory at a time), or on a
    Dask cluster (``workers``/``scheduler``, as ``tracebridge summary``), where each worker
    writes one host's packets to a part file beside ``path`` and this process appends the
    parts in host order. A host whose file is one large XSpace is written a window of steps
    at a time (:func:`load_host_windows`). Returns the number of hosts."""
    from .analysis.hosts import host_runner
    from .writers.perfetto import write_perfetto_hosts
    files = host_files(inputs, run)
    if scheduler is None and (workers is None or workers == 1):
        write_perfetto_hosts((load_host_windows(file) for file in files), path, dataflow=dataflow, memory=memory)
        return len(files)
    import shutil
    import tempfile
    folder = tempfile.mkdtemp(prefix=".tracebridge-parts-", dir=os.path.dirname(os.path.abspath(os.fspath(path))))
    try:
        jobs = [(index, file, os.path.join(folder, f"{index}.part")) for index, file in enumerate(files)]
        with host_runner(workers=workers, scheduler=scheduler) as run_hosts:
            parts = run_hosts(functools.partial(_perfetto_host_part, dataflow=dataflow, memory=memory), jobs)
        with atomic_output(path, compress=False) as out:
            for part in parts:
                with open(part, "rb") as source:
                    shutil.copyfileobj(source, out, 1 << 22)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return len(files)


def _perfetto_host_part(job, *, dataflow: bool, memory: bool) -> str:
    """On a worker: one host read and its packets written to its part file."""
    from .writers.perfetto import write_perfetto_host_part
    index, file, part = job
    return write_perfetto_host_part(load_host_windows(file), part, index, dataflow=dataflow, memory=memory)


def load_host_ops(file: HostFile) -> Trace:
    """:func:`load_host` with ``ops_only``: all that a host's summary reads."""
    return load_host(file, ops_only=True)


def _read(fmt: Format, source: Source, parallelism: Parallelism, ops_only: bool) -> Trace:
    try:
        if ops_only and fmt.read_ops is not None:
            return fmt.read_ops(source, parallelism)
        return fmt.read(source, parallelism)
    except TraceFormatError as error:
        # (a reader that took a file's bytes to free them early leaves them to be read again)
        mangled = next(((f, data) for f in source.files if (data := f.bytes_now()) is not None
                        and _text_converted(data)), None)
        if mangled is None:
            raise
        mangled, data = mangled
        count = data.count(_REPLACEMENT)
        raise TraceFormatError(
            f"{error.reason}; the file went through a text conversion: {count:,} times the bytes EF BF BD (U+FFFD) "
            "stand for bytes that were not UTF-8, which are lost: copy the original as binary (git: mark it binary "
            "in .gitattributes, e.g. '*.pb binary')",
            path=error.path or mangled.path, where=error.where) from None


_REPLACEMENT = "\ufffd".encode("utf-8")  # EF BF BD: what a decode with errors="replace" leaves


def _text_converted(data: bytes) -> bool:
    """A binary file read as UTF-8 text and written back: every byte that was not UTF-8 is
    now U+FFFD (EF BF BD). A protobuf holds many such bytes (varints, floats); a real file
    holds these three bytes in a row by chance rarely: in 1 of 100 of its bytes is no chance."""
    count = data.count(_REPLACEMENT)
    return count >= 16 and 3 * count * 100 >= len(data)


def sniff(name: str, data: bytes) -> str:
    """The name of the format of a file, from its name and its bytes. Plain text that no
    format claims (notes, a log, a CSV) raises: read as a RunMetadata, the default for
    unclaimed bytes, it would fail with a wire-type error that says nothing useful."""
    return _claim(name, data)[0].name


def _claim(name: str, data: bytes) -> tuple[Format, Evidence]:
    """:func:`sniff`'s format, and how sure the claim is (NONE: :data:`UNCLAIMED`, the default)."""
    best, evidence = UNCLAIMED, Evidence.NONE
    for fmt in FORMATS:
        found = fmt.sniff(name, data) if fmt.sniff else Evidence.NONE
        if found > evidence:
            best, evidence = fmt, found
    if evidence is Evidence.NONE and _is_text(data):
        raise TraceFormatError(f"not a trace tracebridge can read: text that no format claims (tried: {_tried()})",
                               path=name)
    return best, evidence


def _tried() -> str:
    return ", ".join(f.name for f in FORMATS if f.read is not None)


def _is_text(data: bytes) -> bool:
    """UTF-8 without control bytes but whitespace in its first 4 kB: no binary protobuf."""
    head = data[:4096]
    if not head or any(byte < 0x20 and byte not in b"\t\n\r" for byte in head):
        return False
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as error:
        return error.start >= len(head) - 3  # a character cut at the 4 kB boundary
    return True


def _find_in_folder(folder: str, run: str | None) -> tuple[Format, Source]:
    for fmt in FORMATS:
        found = fmt.find_in_folder(folder, run) if fmt.find_in_folder else None
        if found is not None:
            return fmt, found
    raise TraceFormatError("is a directory without event files or plugins/profile runs "
                           "(give a trace file or a profile logdir)", path=folder)


def save(trace: Trace, path: str | os.PathLike, *, to: str | None = None, **options: Any) -> list[str]:
    """Write ``trace`` to ``path`` in the format ``to`` or the one its suffix names.

    Each format takes only its own options (:data:`FORMATS`, ``write_options``; e.g.
    Chrome: ``dataflow``, ``memory``, ``progress``, ``workers``; HTML: ``device_pattern``,
    ``title``); any other raises :class:`~tracebridge.errors.OptionError` before anything
    is written.

    A format that holds one run (RunMetadata, its text) never merges steps silently: a
    trace of several steps raises :class:`~tracebridge.errors.OutputError` naming the
    formats that keep steps, unless ``split_steps=True``, which writes one file per step,
    ``name.step-N.pb``. Returns the paths written."""
    fmt = output_format(path, to)
    check_options(fmt, path, options)
    split = options.pop("split_steps", False)
    if fmt.keeps_steps or len(trace.steps) <= 1:
        fmt.write(trace, path, **options)
        return [os.fspath(path)]
    if not split:
        keeping = ", ".join(f"{suffix}" for f in FORMATS if f.keeps_steps and f.read for suffix in f.suffixes)
        raise OutputError(f"{os.fspath(path)}: the {fmt.name} format holds one step and this trace has "
                          f"{len(trace.steps)}; write {keeping} (they keep steps), choose a step, or split "
                          f"it into one file per step (split_steps=True, --split-steps)")
    written = []
    for step in trace.steps:
        step_path = step_file_name(path, fmt, step.number)
        fmt.write(trace.filter(step=step.number), step_path, **options)
        written.append(step_path)
    return written


def step_file_name(path: str | os.PathLike, fmt: Format, number: int) -> str:
    """``name.step-N.pb`` for step ``N`` of ``name.pb`` (the format's suffix kept last)."""
    name = os.fspath(path)
    suffix = max((s for s in fmt.suffixes if name.lower().endswith(s)), key=len, default="")
    stem = name[:len(name) - len(suffix)] if suffix else name
    return f"{stem}.step-{number}{name[len(stem):]}"


def check_options(fmt: Format, path: str | os.PathLike, options: dict[str, Any]) -> None:
    """Raise :class:`~tracebridge.errors.OptionError` for options ``fmt`` does not take."""
    refused = sorted(set(options) - set(fmt.write_options))
    if refused:
        takes = f"it takes {', '.join(fmt.write_options)}" if fmt.write_options else "it takes none"
        raise OptionError(f"{os.fspath(path)}: the {fmt.name} format takes no option "
                          f"{', '.join(refused)} ({takes})")


def output_format(path: str | os.PathLike, to: str | None = None) -> Format:
    """The format ``save`` writes ``path`` in: ``to``, else the longest suffix that names one."""
    if to is not None:
        fmt = BY_NAME.get(to)
        if fmt is None or fmt.write is None:
            raise OutputError(f"unknown output format {to!r} (one of {', '.join(WRITABLE)})")
        return fmt
    name = os.fspath(path).lower()
    matches = [(len(suffix), fmt) for fmt in FORMATS for suffix in fmt.suffixes if name.endswith(suffix)]
    if not matches:
        suffixes = [suffix for fmt in FORMATS for suffix in fmt.suffixes]
        raise OutputError(f"{os.fspath(path)}: cannot tell the output format from the name (use "
                          f"{', '.join(suffixes[:-1])} or {suffixes[-1]}, or choose one with --to)")
    return max(matches, key=lambda match: match[0])[1]


def readme_table() -> str:
    """The README's format table (``tests/test_formats.py`` keeps the two equal)."""
    rows = ["| format | what | `load` recognizes it by | `save` writes it for |", "|---|---|---|---|"]
    for fmt in FORMATS:
        written = ", ".join(f"`{suffix}`" for suffix in fmt.suffixes) or "(read only)"
        if fmt.write_options:
            written += "; options " + ", ".join(f"`{option}`" for option in fmt.write_options)
        if fmt.write and not fmt.keeps_steps:
            written += " (one step a file: several steps are refused, or `split_steps` writes `name.step-N` files)"
        rows.append(f"| `{fmt.name}` | {fmt.what} | {fmt.recognized_by} | {written} |")
    return "\n".join(rows) + "\n"


install_consumers(types.SimpleNamespace(
    save=save,
    to_run_metadata=_lazy("tracebridge.writers.stepstats:to_run_metadata"),
    to_tensorboard=_lazy("tracebridge.writers.tensorboard:write_tensorboard"),
    notebook_html=lambda trace, **options: _html_with_problems("notebook_html", trace, **options),
    summary=_lazy("tracebridge.analysis.run.summary:summarize"),
    info=_lazy("tracebridge.analysis.run.summary:describe"),
))
