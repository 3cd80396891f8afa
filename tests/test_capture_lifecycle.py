"""The TF2 capture's lifecycle table (tracebridge/capture/lifecycle.py), without TensorFlow:
how its actions run when one fails, what is refused, and that ProfileTrace implements
every action the table names."""

from __future__ import annotations

import pytest

from tracebridge import CaptureError
from tracebridge.capture import lifecycle
from tracebridge.capture.lifecycle import Action, Event, State
from tracebridge.capture.profiler import ProfileTrace


class Recorder:
    """A capture stand-in: records the actions run, fails the ones told to."""

    def __init__(self, state: State, failures: dict[str, BaseException] | None = None):
        self.state, self.failures, self.ran = state, failures or {}, []

    def __getattr__(self, name: str):
        def action():
            self.ran.append(name)
            if name in self.failures:
                raise self.failures[name]
        return action


def test_actions_run_in_order():
    capture = Recorder(State.IDLE)
    lifecycle.run(capture, Event.STEP)
    assert capture.ran == ["_take_turn", "_start_session", "_mark_step"]


def test_a_failed_setup_action_skips_the_rest_of_the_setup():
    refused = CaptureError("another capture")
    capture = Recorder(State.IDLE, {"_take_turn": refused})
    with pytest.raises(CaptureError) as info:
        lifecycle.run(capture, Event.STEP)
    assert info.value is refused and capture.ran == ["_take_turn"]


def test_cleanup_runs_after_a_failure_and_an_interrupt_wins():
    written = OSError("disk full")
    capture = Recorder(State.BLOCK_IN_STEP, {"_unmark_step": written, "_save_session": KeyboardInterrupt()})
    with pytest.raises(KeyboardInterrupt):
        lifecycle.run(capture, Event.EXIT)
    assert capture.ran == ["_unmark_step", "_save_session", "_give_turn_back", "_close_block"]
    capture = Recorder(State.BLOCK_IN_STEP, {"_unmark_step": written, "_save_session": ValueError()})
    with pytest.raises(OSError) as info:
        lifecycle.run(capture, Event.EXIT)
    assert info.value is written  # the first ordinary error
    assert capture.ran[-2:] == ["_give_turn_back", "_close_block"]


def test_refusals_change_nothing():
    for state in (State.RECORDING, State.BLOCK):
        capture = Recorder(state)
        with pytest.raises(CaptureError, match="running already"):
            lifecycle.run(capture, Event.ENTER)
        assert capture.ran == []
    capture = Recorder(State.BLOCK_RECORDING)
    with pytest.raises(CaptureError, match="stops when the block ends"):
        lifecycle.run(capture, Event.STOP)
    assert capture.ran == []


def test_pairs_outside_the_table_do_nothing():
    for state, event in [(State.IDLE, Event.STEP_ENDED), (State.IDLE, Event.STOP),
                         (State.BLOCK_RECORDING, Event.PAUSE), (State.IN_STEP, Event.PAUSE)]:
        capture = Recorder(state)
        lifecycle.run(capture, event)
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


def test_profile_trace_implements_every_action():
    for action in Action:
        assert callable(getattr(ProfileTrace, "_" + action.value, None)), action
