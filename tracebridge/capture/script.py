"""``tracebridge run``: profile a script as it is, the way ``python -m cProfile script.py``
profiles one.

    tracebridge run [--steps A-B] [-o OUT] [--] script.py [args...]
    tracebridge run [--steps A-B] [-o OUT] -m module [args...]

The script runs in this process as Python would run it: as ``__main__``, with its own
``sys.argv`` and ``sys.path[0]`` (its folder; the working folder for ``-m``), through
:mod:`runpy`. Its steps are caught by :mod:`.step_hooks`, which wraps the calls each of
TensorFlow's styles makes a step with (TF1 ``Session.run`` and ``MonitoredSession.run``,
Keras ``fit`` and ``train_on_batch``, a ``tf.function`` called in a loop, eager code marked
with ``tf.profiler.experimental.Trace(name, step_num=n)``) and hands them to the existing
captures (``SessionTrace``, ``TraceCallback``, ``ProfileTrace``).

Steps ``A-B`` are counted from 0 in the order the script reaches them (a TF1 script's
``session.run`` of its initializer is step 0), and keep those numbers in the trace; the
default, 2-4, leaves out the first steps, which trace and compile. The trace is written to
``OUT`` (default ``<script>.trace.json``) in the format its suffix names, and a line says
which API made the steps, how many were traced of how many seen, and the capture's notes.

The script's fate is passed on: its exit status (``sys.exit(3)`` exits 3), an exception's
traceback as Python prints it and status 1, Ctrl-C's traceback and status 130. What was
captured until then is written first. A script that reaches no step says so and exits with
its own status.
"""

from __future__ import annotations

import importlib.util
import os
import runpy
import sys
from dataclasses import dataclass
from typing import Sequence, TextIO

from ..errors import OptionError, TracebridgeError
from ..model.trace import Trace
from .schedule import Schedule
from .step_hooks import StepHooks

DEFAULT_STEPS = "2-4"
PREFIX = "tracebridge run: "
_RUNNER_MODULES = {"runpy", __name__}  # their frames are left out of the script's traceback


@dataclass(frozen=True)
class StepRange:
    """Steps ``first`` to ``last`` (both included), counted from 0."""

    first: int
    last: int

    @classmethod
    def parse(cls, text: str) -> "StepRange":
        """``"2-4"``, or ``"3"`` for one step; :class:`OptionError` for anything else."""
        first, dash, last = text.strip().partition("-")
        try:
            steps = cls(int(first), int(last) if dash else int(first))
        except ValueError:
            raise OptionError(f"--steps {text!r}: write FIRST-LAST, e.g. 2-4 (steps count from 0)") from None
        if steps.first < 0 or steps.last < steps.first:
            raise OptionError(f"--steps {text!r}: need 0 <= FIRST <= LAST")
        return steps

    @property
    def schedule(self) -> Schedule:
        return Schedule(warmup=self.first, steps=self.last - self.first + 1)

    def __str__(self) -> str:
        return f"{self.first}-{self.last}" if self.last != self.first else str(self.first)


class ScriptRun:
    """One run of a script (``module=True``: of a module, as ``python -m``) with its
    arguments; :meth:`run` runs it, writes what it caught and returns the exit status.

    Raises :class:`OptionError` or :class:`OutputError` before anything runs for a script
    that does not exist, bad ``steps``, or an output name without a format."""

    def __init__(self, target: str, args: Sequence[str] = (), *, module: bool = False,
                 steps: str = DEFAULT_STEPS, output: str | None = None):
        from ..formats import output_format
        self.target, self.args, self.module = target, list(args), module
        self.steps = StepRange.parse(steps)
        if module:
            if _find_module(target) is None:
                raise OptionError(f"no module named {target!r}")
        elif not os.path.isfile(target) and not os.path.isfile(os.path.join(target, "__main__.py")):
            raise OptionError(f"{target}: no such script")
        name = target.rpartition(".")[2] if module else os.path.splitext(os.path.basename(os.path.normpath(target)))[0]
        self.output = output or f"{name}.trace.json"
        self.format = output_format(self.output)  # a name without a format fails now, not after the run

    def run(self, log: TextIO | None = None) -> int:
        """Run the script, write its trace, print the report on ``log`` (stderr); the
        script's exit status."""
        log = log or sys.stderr
        hooks = StepHooks(self.steps.schedule)
        hooks.install()
        try:
            status = self._execute()
            trace = _finish(hooks)
        finally:
            hooks.remove()
        return self._report(hooks, trace, status, log)

    # --- running the script as Python would ------------------------------------------
    def _execute(self) -> int:
        saved_argv, saved_path = sys.argv[:], sys.path[:]
        sys.argv = [self.target, *self.args]
        here = os.getcwd() if self.module else os.path.dirname(os.path.realpath(self.target))
        sys.path[:1] = [here]
        try:
            if self.module:
                runpy.run_module(self.target, run_name="__main__", alter_sys=True)
            else:
                runpy.run_path(self.target, run_name="__main__")
            return 0
        except SystemExit as stop:
            return _exit_status(stop.code)
        except KeyboardInterrupt as interrupt:
            _print_exception(interrupt)
            return 130  # what a shell reports for a Python killed by Ctrl-C
        except BaseException as error:
            _print_exception(error)
            return 1
        finally:
            sys.argv, sys.path[:] = saved_argv, saved_path

    # --- what it caught -------------------------------------------------------------
    def _report(self, hooks: StepHooks, trace: Trace | None, status: int, log: TextIO) -> int:
        def say(line: str) -> None:
            print(PREFIX + line, file=log, flush=True)

        source = hooks.source
        if source is None:
            say("no step reached: the script made no TF1 session.run, Keras fit or train_on_batch, top-level "
                "tf.function call or tf.profiler.experimental.Trace(..., step_num=N) step; nothing written")
        elif trace is not None:
            seen = trace.metadata.get("steps_seen", trace.metadata.get("runs_seen"))
            seen = f" of {seen} seen" if seen is not None else ""
            if not trace.steps:
                say(f"caught {source.api}: no step in {self.steps}{seen} (--steps); nothing written")
            else:
                say(f"caught {source.api}: {_count(len(trace.steps), 'step')} traced ({_numbers(trace)}){seen}")
                status = self._write(trace.with_metadata(script=self.target, api=source.api), status, say)
            if trace.metadata.get("notes"):
                hooks.notes.insert(0, trace.metadata["notes"])
        for note in hooks.notes:
            say(f"note: {note}")
        return status

    def _write(self, trace: Trace, status: int, say) -> int:
        try:
            split = not self.format.keeps_steps and len(trace.steps) > 1
            written = trace.save(self.output, **({"split_steps": True} if split else {}))
        except TracebridgeError as error:
            say(f"error: {error}")
            return status or error.exit_code
        files = self.output if len(written) == 1 else f"{len(written)} files, one per step: {', '.join(written)}"
        events = len(trace)  # the writers' word for a trace's rows
        say(f"wrote {files} ({self.format.name}, {events:,} event{'s' * (events != 1)})")
        return status


def _finish(hooks: StepHooks) -> Trace | None:
    """The capture's trace, or None; a capture that cannot give one is noted."""
    try:
        return hooks.finish()
    except TracebridgeError as error:
        hooks.notes.append(f"the capture could not be read: {error}")
        return None


def _find_module(name: str):
    try:
        return importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None


def _exit_status(code) -> int:
    """What Python's exit makes of ``SystemExit(code)``: None is 0, a number itself,
    anything else is printed on stderr and is 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _print_exception(error: BaseException) -> None:
    """The traceback Python prints for the script, through ``sys.excepthook`` (which the
    script may have set): from the script's own frame on, without runpy's and ours."""
    tb = error.__traceback__
    while tb is not None and tb.tb_frame.f_globals.get("__name__") in _RUNNER_MODULES:
        tb = tb.tb_next
    sys.excepthook(type(error), error.with_traceback(tb), tb)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'s' * (n != 1)}"


def _numbers(trace: Trace) -> str:
    numbers = [step.number for step in trace.steps]
    if numbers == list(range(numbers[0], numbers[0] + len(numbers))) and len(numbers) > 1:
        return f"steps {numbers[0]}-{numbers[-1]}"
    return ("step " if len(numbers) == 1 else "steps ") + ", ".join(map(str, numbers))
