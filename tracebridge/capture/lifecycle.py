"""A TF2 capture's lifecycle: its states, the events that move it, and what each does.

:class:`~tracebridge.capture.profiler.ProfileTrace` turns every call into one
:class:`Event` and runs the actions this table gives for its current :class:`State`
(the shape of ``torch.profiler``'s action map). The capture class binds each
:class:`Action` to one of its methods in a :class:`Lifecycle`, which holds the methods
themselves, not their names: a method renamed or missing fails when the class is built. The state is read from what is running
(the with-block, the profiling session, the step marker), never stored beside it, so it
cannot disagree with them, even after an interrupt half-way through a transition.

Actions run in order. Once one fails, the remaining *setup* actions (taking the capture
turn, opening the block, starting a session, marking a step) are skipped and the
*cleanup* ones still run, as ``finally`` clauses would; the first error is raised after
them, an interrupt in preference to an ordinary error. A setup action that fails undoes
its own part (a session that failed to start is aborted, and the turn given back outside
a block), so the state afterwards is one the caller's failure event handles.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from ..errors import CaptureError


class State(enum.Enum):
    IDLE = "idle"                         # nothing runs: before, between sessions, after
    RECORDING = "recording"               # a session runs between steps (no with-block)
    IN_STEP = "in a step"                 # a session runs and a step is marked
    BLOCK = "block"                       # a with-block holds the capture turn; no session
    BLOCK_RECORDING = "block, recording"  # the block's session runs between steps
    BLOCK_IN_STEP = "block, in a step"    # ... and a step is marked


class Event(enum.Enum):
    ENTER = "enter"                       # a with-block begins; its schedule picks the steps
    ENTER_WHOLE_BLOCK = "enter whole"     # a with-block begins that is profiled as a whole
    ENTER_FAILED = "enter failed"         # undo an enter that failed half-way
    STEP = "step"                         # a step begins that the schedule selects
    STEP_SKIPPED = "step skipped"         # a step begins that it does not
    STEP_ENDED = "step ended"             # profiling goes on: next step selected, or a whole block
    LAST_STEP_ENDED = "last step ended"   # the schedule selects no next step
    STEP_FAILED = "step failed"           # the step raised
    PAUSE = "pause"                       # stop between steps, keep the data (Keras validation)
    STOP = "stop"                         # stop, keep the data
    ABORT = "abort"                       # stop as after a failed step (the driving call raised)
    DISCARD = "discard"                   # stop, drop everything recorded
    EXIT = "exit"                         # the with-block ends
    EXIT_FAILED = "exit failed"           # the with-block ends by an exception


class Action(enum.Enum):
    """What a capture does; a :class:`Lifecycle` binds each to a method of the capture
    class. Each does nothing when there is nothing to do (no session to stop, no turn to
    give back)."""
    TAKE_TURN = "take_turn"               # the process-wide capture turn (capture_lock)
    OPEN_BLOCK = "open_block"
    START = "start_session"
    MARK = "mark_step"
    UNMARK = "unmark_step"                # close the step marker: the step is recorded
    FORGET_MARK = "forget_step"           # drop it after the stop: the step is not recorded
    SAVE = "save_session"                 # stop the session, keep its profile
    FAIL = "fail_session"                 # stop it, keep its profile only with keep_on_error
    DROP = "drop_session"                 # stop it, keep nothing
    FORGET_DATA = "forget_profiles"       # drop the profiles of sessions already stopped
    GIVE_TURN_BACK = "give_turn_back"
    CLOSE_BLOCK = "close_block"


SETUP = frozenset({Action.TAKE_TURN, Action.OPEN_BLOCK, Action.START, Action.MARK})

S, E, A = State, Event, Action
TRANSITIONS: dict[tuple[State, Event], tuple[Action, ...]] = {
    # --- outside a with-block: a traced function, a callback's capture ------------------------
    (S.IDLE, E.ENTER): (A.TAKE_TURN, A.OPEN_BLOCK),
    (S.IDLE, E.ENTER_WHOLE_BLOCK): (A.TAKE_TURN, A.OPEN_BLOCK, A.START),
    (S.IDLE, E.STEP): (A.TAKE_TURN, A.START, A.MARK),
    (S.IDLE, E.DISCARD): (A.FORGET_DATA,),

    (S.RECORDING, E.STEP): (A.MARK,),
    (S.RECORDING, E.STEP_SKIPPED): (A.MARK,),  # reached only as a session outlives its schedule
    (S.RECORDING, E.LAST_STEP_ENDED): (A.SAVE, A.GIVE_TURN_BACK),
    (S.RECORDING, E.STEP_FAILED): (A.FAIL, A.GIVE_TURN_BACK),
    (S.RECORDING, E.PAUSE): (A.SAVE, A.GIVE_TURN_BACK),
    (S.RECORDING, E.STOP): (A.SAVE, A.GIVE_TURN_BACK),
    (S.RECORDING, E.ABORT): (A.FAIL, A.GIVE_TURN_BACK),
    (S.RECORDING, E.DISCARD): (A.DROP, A.GIVE_TURN_BACK, A.FORGET_DATA),
    (S.RECORDING, E.EXIT): (A.SAVE, A.GIVE_TURN_BACK),          # a block discarded, then stepped
    (S.RECORDING, E.EXIT_FAILED): (A.FAIL, A.GIVE_TURN_BACK),

    (S.IN_STEP, E.STEP): (A.MARK,),
    (S.IN_STEP, E.STEP_SKIPPED): (A.MARK,),
    (S.IN_STEP, E.STEP_ENDED): (A.UNMARK,),
    (S.IN_STEP, E.LAST_STEP_ENDED): (A.UNMARK, A.SAVE, A.GIVE_TURN_BACK),
    (S.IN_STEP, E.STEP_FAILED): (A.UNMARK, A.FAIL, A.GIVE_TURN_BACK),
    (S.IN_STEP, E.STOP): (A.UNMARK, A.SAVE, A.GIVE_TURN_BACK),
    (S.IN_STEP, E.ABORT): (A.FAIL, A.FORGET_MARK, A.GIVE_TURN_BACK),
    (S.IN_STEP, E.DISCARD): (A.DROP, A.FORGET_MARK, A.GIVE_TURN_BACK, A.FORGET_DATA),
    (S.IN_STEP, E.EXIT): (A.UNMARK, A.SAVE, A.GIVE_TURN_BACK),
    (S.IN_STEP, E.EXIT_FAILED): (A.UNMARK, A.FAIL, A.GIVE_TURN_BACK),

    # --- inside a with-block: the block keeps the turn until it ends --------------------------
    (S.BLOCK, E.ENTER_FAILED): (A.GIVE_TURN_BACK, A.CLOSE_BLOCK),
    (S.BLOCK, E.STEP): (A.START, A.MARK),
    (S.BLOCK, E.DISCARD): (A.GIVE_TURN_BACK, A.CLOSE_BLOCK, A.FORGET_DATA),
    (S.BLOCK, E.EXIT): (A.GIVE_TURN_BACK, A.CLOSE_BLOCK),
    (S.BLOCK, E.EXIT_FAILED): (A.GIVE_TURN_BACK, A.CLOSE_BLOCK),

    (S.BLOCK_RECORDING, E.ENTER_FAILED): (A.DROP, A.GIVE_TURN_BACK, A.CLOSE_BLOCK),
    (S.BLOCK_RECORDING, E.STEP): (A.MARK,),
    (S.BLOCK_RECORDING, E.STEP_SKIPPED): (A.MARK,),
    (S.BLOCK_RECORDING, E.LAST_STEP_ENDED): (A.SAVE,),
    (S.BLOCK_RECORDING, E.STEP_FAILED): (A.FAIL,),
    (S.BLOCK_RECORDING, E.ABORT): (A.FAIL,),
    (S.BLOCK_RECORDING, E.DISCARD): (A.DROP, A.GIVE_TURN_BACK, A.CLOSE_BLOCK, A.FORGET_DATA),
    (S.BLOCK_RECORDING, E.EXIT): (A.SAVE, A.GIVE_TURN_BACK, A.CLOSE_BLOCK),
    (S.BLOCK_RECORDING, E.EXIT_FAILED): (A.FAIL, A.GIVE_TURN_BACK, A.CLOSE_BLOCK),

    (S.BLOCK_IN_STEP, E.STEP): (A.MARK,),
    (S.BLOCK_IN_STEP, E.STEP_SKIPPED): (A.MARK,),
    (S.BLOCK_IN_STEP, E.STEP_ENDED): (A.UNMARK,),
    (S.BLOCK_IN_STEP, E.LAST_STEP_ENDED): (A.UNMARK, A.SAVE),
    (S.BLOCK_IN_STEP, E.STEP_FAILED): (A.UNMARK, A.FAIL),
    (S.BLOCK_IN_STEP, E.ABORT): (A.FAIL, A.FORGET_MARK),
    (S.BLOCK_IN_STEP, E.DISCARD): (A.DROP, A.FORGET_MARK, A.GIVE_TURN_BACK, A.CLOSE_BLOCK, A.FORGET_DATA),
    (S.BLOCK_IN_STEP, E.EXIT): (A.UNMARK, A.SAVE, A.GIVE_TURN_BACK, A.CLOSE_BLOCK),
    (S.BLOCK_IN_STEP, E.EXIT_FAILED): (A.UNMARK, A.FAIL, A.GIVE_TURN_BACK, A.CLOSE_BLOCK),
}
# Every other pair does nothing (a step end with no session, a pause inside a block...),
# except these, which are refused before anything changes:
ALREADY_RUNNING = "this capture is running already; it cannot be entered again"
BLOCK_STOPS_AT_ITS_END = "a with-block's capture stops when the block ends, not with stop()"
REFUSALS: dict[tuple[State, Event], str] = {
    **{(state, event): ALREADY_RUNNING for state in State if state is not S.IDLE
       for event in (E.ENTER, E.ENTER_WHOLE_BLOCK)},
    **{(state, E.STOP): BLOCK_STOPS_AT_ITS_END for state in (S.BLOCK, S.BLOCK_RECORDING, S.BLOCK_IN_STEP)},
}
del S, E, A


class Lifecycle:
    """The table compiled for one capture class: every :class:`Action` bound to the
    class's method that does it (``methods``), and each (state, event) turned once into
    its refusal and its methods in order, since :meth:`run` is on every traced call.

    The methods are the class's functions, called with the capture, rather than one
    instance's bound methods: a table of bound methods on the instance would be a
    reference cycle, and a traced function dropped while it holds the profiler would then
    wait for the garbage collector to give it back."""

    def __init__(self, methods: Mapping[Action, Callable[[Any], None]]):
        missing = [action.name for action in Action if not callable(methods.get(action))]
        if missing:
            raise TypeError(f"lifecycle actions without a method: {', '.join(missing)}")
        self.methods = MappingProxyType(dict(methods))
        self._plans: dict[tuple[State, Event], tuple[str | None, tuple[tuple[Callable, bool], ...]]] = {
            (state, event): (REFUSALS.get((state, event)),
                             tuple((methods[action], action in SETUP)
                                   for action in TRANSITIONS.get((state, event), ())))
            for state in State for event in Event}

    def actions(self, state: State, event: Event) -> tuple[Callable[[Any], None], ...]:
        """The methods that ``(state, event)`` runs, in order."""
        return tuple(method for method, _ in self._plans[state, event][1])

    def check(self, state: State, event: Event) -> None:
        """Raise :class:`CaptureError` if ``event`` is refused in ``state``."""
        refusal = self._plans[state, event][0]
        if refusal is not None:
            raise CaptureError(refusal)

    def run(self, capture: Any, event: Event) -> None:
        """Run the actions of ``(capture.state, event)`` on ``capture`` (see the module)."""
        refusal, actions = self._plans[capture.state, event]
        if refusal is not None:
            raise CaptureError(refusal)
        failure: BaseException | None = None
        taken = 0
        while taken < len(actions):
            # The try encloses the loop's own steps too: an interrupt landing between two
            # actions is caught like an error raised inside one, and the cleanup goes on.
            try:
                while taken < len(actions):
                    method, setup = actions[taken]
                    taken += 1
                    if failure is None or not setup:
                        method(capture)
            except BaseException as error:
                if failure is None or (isinstance(failure, Exception) and not isinstance(error, Exception)):
                    failure = error
        if failure is not None:
            try:
                raise failure
            finally:
                failure = None  # no reference cycle through this frame
