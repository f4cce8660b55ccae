"""Payload identification through the whole stack on the MuJoCo backend (lockstep): the loop moves
the arm to the planned holds with its own motions and controller, the backend's measured effort
is averaged, the payload identified, then staged on the controllers — after which the held arm
no longer sags under it."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest
from helpers import lockstep_config

from ct_controllers.config import load_config
from ct_controllers.model.payload import Payload
from ct_controllers.model.payload_identification import (
    PayloadEstimate,
    identify_payload,
    plan_holds,
    supporting_joints,
)
from ct_controllers.runtime.payload import stage_payload
from ct_controllers.runtime.payload_holds import HoldError, measure_holds
from ct_controllers.runtime.stack import build_stack
from ct_controllers.sim.payload_plant import PayloadPlant, load_mujoco_scene

TRUTH = Payload(1.0, (0.01, -0.015, 0.04))


def test_composing_the_payload_into_the_backends_scene_matches_a_payload_body() -> None:
    """The payload composed into the compiled scene's TCP body (mass, COM, inertia in principal
    axes) gives the gravity torques and joint-space inertia of a scene built with the payload
    as a body of its own (MuJoCo's compiler composing it), at random configurations."""
    stack = build_stack(lockstep_config())
    hardware = stack.hardware
    stack.bring_up()
    try:
        payload = Payload(1.0, (0.01, -0.015, 0.04), np.diag([2e-3, 3e-3, 1e-3]))
        model, data = hardware.model, hardware.data
        with hardware.lock:
            load_mujoco_scene(model, stack.config.tcp_frame, payload)
        reference = PayloadPlant(stack.description, stack.model, payload)
        rng = np.random.default_rng(4)
        names = stack.model.joint_names
        ours = np.array([model.joint(n).dofadr[0] for n in names])
        theirs = reference._dof
        scratch = mujoco.MjData(model)
        for _ in range(3):
            q = rng.uniform(stack.model.limits.lower, stack.model.limits.upper)
            scratch.qpos[[model.joint(n).qposadr[0] for n in names]] = q
            mujoco.mj_forward(model, scratch)
            reference.reset(q, np.zeros_like(q))
            np.testing.assert_allclose(
                scratch.qfrc_bias[ours], reference.data.qfrc_bias[theirs], atol=1e-9
            )
            full = np.zeros((model.nv, model.nv))
            expected = np.zeros((reference.model.nv, reference.model.nv))
            mujoco.mj_fullM(model, scratch, full)
            mujoco.mj_fullM(reference.model, reference.data, expected)
            np.testing.assert_allclose(
                full[np.ix_(ours, ours)], expected[np.ix_(theirs, theirs)], atol=1e-9
            )
        assert data.time >= 0.0  # the backend's own data untouched and usable
    finally:
        stack.shut_down()


def test_holds_through_the_stack_identify_the_payload_and_staging_it_removes_the_sag() -> None:
    """MuJoCo backend in lockstep carrying 1 kg (composed into its TCP body), the default joint
    impedance holding with the unloaded model's gravity compensation: holds are refused while a
    motion of the loop runs; once it has ended (it is ended by waiting), the eight planned holds
    reached by the loop's own motions and measured from the backend's effort identify the
    payload (mass within 5 %, COM within 1 cm); staged on the controllers through the rated
    payload check, the arm held at home comes back to within a tenth of its sag without it."""
    config = load_config(overrides={"mujoco.mode": "lockstep", "payload.rated_mass": 3.0})
    stack = build_stack(config)
    stack.bring_up()
    loop, hardware, model = stack.loop, stack.hardware, stack.model
    try:
        with hardware.lock:
            load_mujoco_scene(hardware.model, config.tcp_frame, TRUTH)
        home = model.neutral()
        home[model.indices(config.joint_names)] = config.home_positions

        def advance(seconds: float) -> None:
            loop.run_ticks(max(1, round(seconds / loop.period)))

        plan = plan_holds(model, home)
        arm = supporting_joints(model)
        moving = home.copy()
        moving[model.q_index(arm[0])] += 0.3
        motion = loop.request_motion(model.joint_names, moving)
        advance(0.1)
        with pytest.raises(HoldError, match="is running"):
            measure_holds(loop, plan.configurations, arm, advance)
        while loop.motion_status(motion).state == "running":  # type: ignore[union-attr]
            advance(0.1)
        holds = measure_holds(loop, plan.configurations, arm, advance)
        result = identify_payload(model, holds.q, holds.effort, holds.v)
        assert isinstance(result, PayloadEstimate), result
        assert abs(result.payload.mass - TRUTH.mass) <= 0.05 * TRUTH.mass, result
        assert np.linalg.norm(result.payload.com - TRUTH.com) <= 0.01, result

        def sag() -> float:
            """[rad] how far the arm held at home settles from it (largest joint)."""
            (held,) = measure_holds(loop, [home], arm, advance).q
            return float(np.max(np.abs((held - home)[model.indices(arm)])))

        unloaded = sag()
        stage_payload(stack.controllers, result.payload, config.payload_limits)
        loaded = sag()
        assert unloaded > 5e-3, unloaded  # the payload's weight is felt without it
        assert loaded < 0.1 * unloaded, (unloaded, loaded)
    finally:
        stack.shut_down()
