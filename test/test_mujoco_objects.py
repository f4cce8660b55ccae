"""ct_controllers.hardware.mujoco_objects: the simulated object sensor reports the object's pose
and each finger's normal contact force as MuJoCo's own per-contact extraction gives them."""

from __future__ import annotations

import math

import mujoco
import numpy as np
import pytest

from ct_controllers.bench.grasp import grasp_setup, top_down_grasp
from ct_controllers.config import load_config
from ct_controllers.hardware import mujoco_objects
from ct_controllers.tasks.phases import GraspGoal, Phase

CONFIG = load_config(overrides={"mujoco.mode": "lockstep"})
CUBE = (0.52, -0.05, math.radians(20))


def _forces_by_mj_contact_force(model, data, cube: int, fingers: tuple[int, ...]) -> np.ndarray:
    """Σ |normal force| per finger over the cube's contacts, one mj_contactForce call each."""
    forces = np.zeros(len(fingers))
    wrench = np.zeros(6)
    for i in range(data.ncon):
        contact = data.contact[i]
        bodies = {int(model.geom_bodyid[contact.geom1]), int(model.geom_bodyid[contact.geom2])}
        for k, finger in enumerate(fingers):
            if bodies == {cube, finger}:
                mujoco.mj_contactForce(model, data, i, wrench)
                forces[k] += abs(wrench[0])
    return forces


@pytest.mark.parametrize("few_contacts", [mujoco_objects.FEW_CONTACTS, 0])
def test_grasp_contact_forces_match_mujoco_per_contact_extraction(
    few_contacts: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While the fingers hold the cube (several contacts per finger), the sensor's finger forces
    equal the sum of mj_contactForce normals over the cube–finger contacts, and its pose equals
    the cube body's; both fingers press (> 1 N). Read contact by contact (a few contacts) and
    all at once (``FEW_CONTACTS`` 0: the path for many)."""
    monkeypatch.setattr(mujoco_objects, "FEW_CONTACTS", few_contacts)
    setup = grasp_setup(CONFIG, CUBE)
    try:
        setup.task.start(GraspGoal(grasp_pose=top_down_grasp(*CUBE)))
        loop = setup.stack.loop
        for _ in range(600):
            loop.run_ticks(10)
            if setup.task.phase is Phase.HOLD:
                break
        assert setup.task.phase is Phase.HOLD
        system, sensor = setup.stack.hardware, setup.sensor
        model, data = system.model, system.data
        observation = sensor.observe()
        expected = _forces_by_mj_contact_force(model, data, sensor.body_id, sensor.finger_ids)
        assert data.ncon > 2 and np.all(expected > 1.0)
        np.testing.assert_allclose(observation.contact_forces, expected, rtol=1e-12)
        np.testing.assert_allclose(observation.pose[:3, 3], data.xpos[sensor.body_id])
        np.testing.assert_allclose(
            observation.pose[:3, :3], data.xmat[sensor.body_id].reshape(3, 3)
        )
    finally:
        setup.stack.shut_down()
