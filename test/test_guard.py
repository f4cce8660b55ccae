"""ct_controllers.hardware.guard: every check of the boundary guard on state samples and
commands, its per-reason counters, and (property tests) that no random, NaN, ±inf, stale or
future-stamped sample is ever accepted."""

from __future__ import annotations

import math

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given, settings

from ct_controllers.hardware.guard import (
    CLOCK_DOMAIN,
    DUPLICATE_JOINT,
    FRAME,
    FUTURE,
    INTERFACE,
    LENGTH,
    MISSING_JOINT,
    NO_STAMP,
    NON_FINITE,
    SEQUENCE,
    STALE,
    UNKNOWN_JOINT,
    BoundaryGuard,
    GuardLimits,
)
from ct_controllers.hardware.interface import JointCommand, StateSample

JOINTS = ("a", "b", "c")
NOW = 100.0  # [s]
LIMITS = GuardLimits(max_state_age=0.01, future_tolerance=0.001, expected_frame="base")


def sample(
    stamp: float = NOW,
    names=JOINTS,
    position=(0.1, 0.2, 0.3),
    velocity=(1.0, 2.0, 3.0),
    effort=(10.0, 20.0, 30.0),
    sequence: int | None = None,
    frame_id: str | None = None,
) -> StateSample:
    return StateSample(
        stamp=stamp,
        joint_names=tuple(names),
        position=np.array(position, dtype=np.float64),
        velocity=np.array(velocity, dtype=np.float64),
        effort=np.array(effort, dtype=np.float64),
        sequence=sequence,
        frame_id=frame_id,
    )


def test_valid_sample_is_accepted_fresh_and_reordered_by_name():
    """A sample with names in another order is accepted and re-ordered by name."""
    guard = BoundaryGuard(JOINTS, LIMITS)
    result = guard.check_state(
        sample(names=("c", "a", "b"), position=(3.0, 1.0, 2.0), velocity=(30, 10, 20)), NOW
    )
    assert result.accepted and result.fresh and result.reason is None
    assert result.sample is not None and result.sample.joint_names == JOINTS
    np.testing.assert_array_equal(result.sample.position, [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(result.sample.velocity, [10, 20, 30])
    np.testing.assert_array_equal(result.sample.effort, [20.0, 30.0, 10.0])
    assert guard.counts() == {}


BAD_SAMPLES = [
    ("NaN stamp", sample(stamp=math.nan), NO_STAMP, "stamp"),
    ("other clock", sample(stamp=1.7e9), CLOCK_DOMAIN, "clock domain"),
    ("stale", sample(stamp=NOW - 0.02), STALE, "20.000 ms old"),
    ("future", sample(stamp=NOW + 0.005), FUTURE, "5.000 ms in the future"),
    ("NaN position", sample(position=(0.1, math.nan, 0.3)), NON_FINITE, "b=nan"),
    ("inf velocity", sample(velocity=(1.0, 2.0, -math.inf)), NON_FINITE, "c=-inf"),
    ("inf effort", sample(effort=(math.inf, 0, 0)), NON_FINITE, "a"),
    ("unknown joint", sample(names=("a", "b", "ghost")), UNKNOWN_JOINT, "ghost"),
    (
        "missing joint",
        sample(names=("a", "b"), position=(0, 0), velocity=(0, 0), effort=(0, 0)),
        MISSING_JOINT,
        "c",
    ),
    ("duplicate joint", sample(names=("a", "b", "a")), DUPLICATE_JOINT, "a"),
    ("length", sample(position=(0.1, 0.2)), LENGTH, "2 positions"),
    ("frame", sample(frame_id="world"), FRAME, "'world'"),
]


@pytest.mark.parametrize(
    ("case", "bad", "reason", "named"), BAD_SAMPLES, ids=[c[0] for c in BAD_SAMPLES]
)
def test_bad_sample_is_rejected_with_its_reason_and_counted(case, bad, reason, named):
    """Each bad sample is rejected (no sample handed on) with the reason and a message naming
    the problem, counted once under state.<reason>; the guard's last accepted stamp does not
    move, so the next good sample is still fresh."""
    guard = BoundaryGuard(JOINTS, LIMITS)
    result = guard.check_state(bad, NOW)
    assert not result.accepted and not result.fresh and result.sample is None
    assert result.reason == reason
    assert named in result.message
    assert guard.counts() == {f"state.{reason}": 1}
    assert named in guard.last_rejection
    assert guard.check_state(sample(stamp=NOW - 0.001), NOW).fresh


def test_unmeasured_effort_nan_is_allowed():
    """NaN effort means 'not measured' (a JointState without efforts) and is accepted."""
    guard = BoundaryGuard(JOINTS, LIMITS)
    assert guard.check_state(sample(effort=(math.nan,) * 3), NOW).accepted


def test_repeated_sample_is_accepted_but_not_fresh_and_older_is_rejected():
    """The same stamp again is accepted but not fresh; an older stamp or a lower sequence is
    rejected as going backwards."""
    guard = BoundaryGuard(JOINTS, LIMITS)
    assert guard.check_state(sample(stamp=NOW - 0.002, sequence=7), NOW).fresh
    again = guard.check_state(sample(stamp=NOW - 0.002, sequence=7), NOW)
    assert again.accepted and not again.fresh
    older = guard.check_state(sample(stamp=NOW - 0.003, sequence=8), NOW)
    assert older.reason == SEQUENCE
    lower = guard.check_state(sample(stamp=NOW - 0.001, sequence=6), NOW)
    assert lower.reason == SEQUENCE
    same_sequence_new_stamp = guard.check_state(sample(stamp=NOW - 0.001, sequence=7), NOW)
    assert same_sequence_new_stamp.accepted and not same_sequence_new_stamp.fresh
    assert guard.counts() == {"state.sequence": 2}
    guard.reset()  # a restarted source may start over
    assert guard.check_state(sample(stamp=NOW - 0.005, sequence=0), NOW).fresh


def test_frame_is_checked_only_where_the_source_carries_one():
    """A sample without a frame id (None) passes; with an expected frame of "" none is checked."""
    assert BoundaryGuard(JOINTS, LIMITS).check_state(sample(frame_id=None), NOW).accepted
    assert BoundaryGuard(JOINTS, LIMITS).check_state(sample(frame_id="base"), NOW).accepted
    assert BoundaryGuard(JOINTS).check_state(sample(frame_id="anything"), NOW).accepted


def test_limits_are_validated():
    """Non-positive or non-finite limits are refused, naming the parameter."""
    with pytest.raises(ValueError, match="max_state_age"):
        GuardLimits(max_state_age=0.0)
    with pytest.raises(ValueError, match="future_tolerance"):
        GuardLimits(future_tolerance=math.nan)


# --- commands ---------------------------------------------------------------------------------
INTERFACES = {"a": "effort", "b": "effort", "c": "position"}


def command(
    sequence=5, stamp=NOW, names=JOINTS, interfaces=("effort", "effort", "position"), values=None
) -> JointCommand:
    return JointCommand(
        stamp=stamp,
        sequence=sequence,
        joint_names=tuple(names),
        interfaces=tuple(interfaces),
        values=np.array(values if values is not None else (1.0, 2.0, 0.5)),
    )


BAD_COMMANDS = [
    ("sequence", command(sequence=4), SEQUENCE, "sequence 4"),
    ("NaN", command(values=(1.0, math.nan, 0.5)), NON_FINITE, "'b'"),
    ("stamp", command(stamp=math.inf), NO_STAMP, "stamp"),
    ("future", command(stamp=NOW + 1.0), FUTURE, "in the future"),
    ("interface", command(interfaces=("effort",) * 3), INTERFACE, "'c'"),
    ("unknown", command(names=("a", "b", "x")), UNKNOWN_JOINT, "x"),
    ("length", command(values=(1.0, 2.0)), LENGTH, "2 values"),
]


@pytest.mark.parametrize(
    ("case", "bad", "reason", "named"), BAD_COMMANDS, ids=[c[0] for c in BAD_COMMANDS]
)
def test_bad_command_is_rejected_and_counted(case, bad, reason, named):
    """Each bad command is rejected with its reason, named, counted under command.<reason>."""
    guard = BoundaryGuard(JOINTS, LIMITS)
    result = guard.check_command(bad, INTERFACES, last_sequence=4, now=NOW)
    assert not result.accepted and result.values is None
    assert result.reason == reason and named in result.message
    assert guard.counts() == {f"command.{reason}": 1}


def test_command_is_reordered_by_name():
    """A valid command in another order comes back in the guard's joint order."""
    guard = BoundaryGuard(JOINTS, LIMITS)
    result = guard.check_command(
        command(names=("c", "a", "b"), interfaces=("position", "effort", "effort"),
                values=(0.5, 1.0, 2.0)),
        INTERFACES,
        last_sequence=4,
        now=NOW,
    )  # fmt: skip
    assert result.accepted and result.values is not None
    np.testing.assert_array_equal(result.values, [1.0, 2.0, 0.5])


def test_command_interfaces_are_rechecked_when_the_claim_changes():
    """The same interface tuple, accepted against one claim, is rejected against a changed claim
    (the verified tuple is remembered with the claim it was verified against)."""
    guard = BoundaryGuard(JOINTS, LIMITS)
    good = command(sequence=5)
    assert guard.check_command(good, INTERFACES, last_sequence=4, now=NOW).accepted
    changed = dict(INTERFACES) | {"c": "effort"}
    again = JointCommand(good.stamp, 6, good.joint_names, good.interfaces, good.values)
    result = guard.check_command(again, changed, last_sequence=5, now=NOW)
    assert not result.accepted and result.reason == INTERFACE and "'c'" in result.message


def test_huge_finite_values_are_still_accepted():
    """Values whose sum of squares overflows (1e200) are finite, and accepted: the vectorised
    check only hands them to the per-value one."""
    guard = BoundaryGuard(JOINTS, LIMITS)
    result = guard.check_state(sample(position=(1e200, 0.2, 0.3)), NOW)
    assert result.accepted and result.sample is not None
    assert result.sample.position[0] == 1e200
    huge = command(values=(1e200, 2.0, 0.5))
    assert guard.check_command(huge, INTERFACES, last_sequence=4, now=NOW).accepted


# --- property tests ---------------------------------------------------------------------------
finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)
anything = st.floats(allow_nan=True, allow_infinity=True)
vector = st.lists(anything, min_size=3, max_size=3)


@settings(max_examples=300, deadline=None)
@given(position=vector, velocity=vector, effort=vector, offset=anything)
def test_property_accepted_samples_are_finite_fresh_enough_and_in_order(
    position, velocity, effort, offset
):
    """For arbitrary values (NaN, ±inf, huge) and stamps (stale, future, non-finite), a sample
    is accepted only if every position and velocity is finite, no effort is infinite, and its
    age lies within [−future_tolerance, max_state_age]; an accepted one is in joint order."""
    guard = BoundaryGuard(JOINTS, LIMITS)
    stamp = NOW + offset
    result = guard.check_state(sample(stamp, JOINTS, position, velocity, effort), NOW)
    valid = (
        all(math.isfinite(x) for x in position + velocity)
        and not any(math.isinf(x) for x in effort)
        and math.isfinite(stamp)
        and -LIMITS.future_tolerance <= NOW - stamp <= LIMITS.max_state_age
    )
    assert result.accepted == valid
    if result.accepted:
        assert result.sample is not None and result.sample.joint_names == JOINTS
        assert np.all(np.isfinite(result.sample.position))
        assert np.all(np.isfinite(result.sample.velocity))
    else:
        assert result.sample is None and result.reason and result.message
        assert sum(guard.counts().values()) == 1


@settings(max_examples=200, deadline=None)
@given(
    names=st.lists(st.sampled_from(["a", "b", "c", "d", "a "]), min_size=0, max_size=5),
    values=st.lists(finite, min_size=0, max_size=5),
)
def test_property_names_must_match_exactly(names, values):
    """A sample is accepted only when its names are exactly the guard's joints (any order, no
    duplicates) with one value each; then every value lands on the joint that names it."""
    guard = BoundaryGuard(JOINTS)
    n = len(values)
    result = guard.check_state(sample(NOW, names, values, values, values), NOW)
    valid = sorted(names) == sorted(JOINTS) and n == len(names)
    assert result.accepted == valid
    if valid:
        assert result.sample is not None
        for name, value in zip(names, values, strict=True):
            assert result.sample.position[JOINTS.index(name)] == value
