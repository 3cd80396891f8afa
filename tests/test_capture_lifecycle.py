"""The TF2 capture's lifecycle table (tracebridge/capture/lifecycle.py), without TensorFlow
but for the last test: how its actions run when one fails, what is refused, and that
ProfileTrace binds every action the table names to a method of its own when the class is
built (a method renamed in the class fails then, with a NameError in its body)."""

from __future__ import annotations

import gc
import weakref

import pytest

from tracebridge import CaptureError
from tracebridge.capture import lifecycle
from tracebridge.capture.lifecycle import Action, Event, Lifecycle, State
from tracebridge.capture.profiler import ProfileTrace

A = Action


def _recorded(action: Action):
    def method(capture: "Recorder") -> None:
        capture.ran.append(action)
        if action in capture.failures:
            raise capture.failures[action]
    method.__name__ = f"_{action.name.lower()}"
    return method


# A capture stand-in's table: each action records itself, and fails where told to.
RECORDING = Lifecycle({action: _recorded(action) for action in Action})


class Recorder:
    def __init__(self, state: State, failures: dict[Action, BaseException] | None = None):
        self.state, self.failures, self.ran = state, failures or {}, []


def test_actions_run_in_order():
    capture = Recorder(State.IDLE)
    RECORDING.run(capture, Event.STEP)
    assert capture.ran == [A.TAKE_TURN, A.START, A.MARK]


def test_a_failed_setup_action_skips_the_rest_of_the_setup():
    refused = CaptureError("another capture")
    capture = Recorder(State.IDLE, {A.TAKE_TURN: refused})
    with pytest.raises(CaptureError) as info:
        RECORDING.run(capture, Event.STEP)
    assert info.value is refused and capture.ran == [A.TAKE_TURN]


def test_cleanup_runs_after_a_failure_and_an_interrupt_wins():
    written = OSError("disk full")
    capture = Recorder(State.BLOCK_IN_STEP, {A.UNMARK: written, A.SAVE: KeyboardInterrupt()})
    with pytest.raises(KeyboardInterrupt):
        RECORDING.run(capture, Event.EXIT)
    assert capture.ran == [A.UNMARK, A.SAVE, A.GIVE_TURN_BACK, A.CLOSE_BLOCK]
    capture = Recorder(State.BLOCK_IN_STEP, {A.UNMARK: written, A.SAVE: ValueError()})
    with pytest.raises(OSError) as info:
        RECORDING.run(capture, Event.EXIT)
    assert info.value is written  # the first ordinary error
    assert capture.ran[-2:] == [A.GIVE_TURN_BACK, A.CLOSE_BLOCK]


def test_refusals_change_nothing():
    for state in (State.RECORDING, State.BLOCK):
        capture = Recorder(state)
        with pytest.raises(CaptureError, match="running already"):
            RECORDING.run(capture, Event.ENTER)
        assert capture.ran == []
    capture = Recorder(State.BLOCK_RECORDING)
    with pytest.raises(CaptureError, match="stops when the block ends"):
        RECORDING.run(capture, Event.STOP)
    assert capture.ran == []


def test_pairs_outside_the_table_do_nothing():
    for state, event in [(State.IDLE, Event.STEP_ENDED), (State.IDLE, Event.STOP),
                         (State.BLOCK_RECORDING, Event.PAUSE), (State.IN_STEP, Event.PAUSE)]:
        capture = Recorder(state)
        RECORDING.run(capture, event)
        assert capture.ran == [], (state, event)


def test_the_table_is_coherent():
    for (state, event), actions in lifecycle.TRANSITIONS.items():
        assert (state, event) not in lifecycle.REFUSALS
        in_block = state.name.startswith("BLOCK")
        # Outside a block the turn goes back with the session; inside, only as the block ends.
        stops = {Action.SAVE, Action.FAIL, Action.DROP} & set(actions)
        if stops and not in_block:
            assert Action.GIVE_TURN_BACK in actions, (state, event)
        if in_block and Action.GIVE_TURN_BACK in actions:
            assert Action.CLOSE_BLOCK in actions, (state, event)
        # Setup comes before cleanup: a failed setup must not skip a cleanup listed before it.
        kinds = [action in lifecycle.SETUP for action in actions]
        assert kinds == sorted(kinds, reverse=True), (state, event)


def test_profile_trace_binds_every_action_to_a_method_of_its_own():
    table = ProfileTrace.LIFECYCLE
    assert set(table.methods) == set(Action)
    for action, method in table.methods.items():
        assert callable(method), action
        assert getattr(ProfileTrace, method.__name__) is method, action  # the class's own, by its name
    assert table.actions(State.IDLE, Event.STEP) == (
        ProfileTrace._take_turn, ProfileTrace._start_session, ProfileTrace._mark_step)
    assert table.actions(State.BLOCK_IN_STEP, Event.EXIT) == (
        ProfileTrace._unmark_step, ProfileTrace._save_session, ProfileTrace._give_turn_back,
        ProfileTrace._close_block)


def test_a_table_without_a_method_for_each_action_fails_when_built():
    methods = {action: _recorded(action) for action in Action}
    with pytest.raises(TypeError, match="MARK"):
        Lifecycle({action: method for action, method in methods.items() if action is not Action.MARK})
    with pytest.raises(TypeError, match="SAVE"):
        Lifecycle({**methods, Action.SAVE: "_save_session"})  # a name is not a method


def test_a_dropped_capture_is_freed_at_once(tf):
    """The table holds the class's functions, not bound methods, so a capture is no
    reference cycle: dropped, it goes at once, without the garbage collector (a traced
    function that holds the profiler gives it back then, see _stop_orphan)."""
    ProfileTrace(len)  # the first one loads TF's lazy modules, whose import frames may linger
    gc.collect()
    gc.disable()
    try:
        traced = ProfileTrace(len)
        dropped = weakref.ref(traced)
        del traced
        assert dropped() is None
    finally:
        gc.enable()
