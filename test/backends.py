"""The three backends as test rigs (imported by name, not a conftest): the whole stack built by
``build_stack`` for ``mujoco`` (lockstep), ``ros2_control_bridge`` (against the plant process
over loopback DDS) and ``canopen`` (against simulated drives on a virtual bus), each wrapped in
:class:`InjectingSystem` so the same sensor faults can be injected into all three, and each
able to say what its plant last applied, by joint name."""

from __future__ import annotations

import itertools
import os
import time
from dataclasses import dataclass, field
from typing import Any

from helpers import bundled_description, home_by_name, new_robot_model

from ct_controllers.bench.faults import SLOW_LOOP_GAINS
from ct_controllers.bench.ros2_control_plant import PlantProcess
from ct_controllers.config import StackConfig, load_config
from ct_controllers.hardware import cia402
from ct_controllers.hardware.canopen_cia402 import CanopenCia402System
from ct_controllers.hardware.fault_injection import InjectingSystem
from ct_controllers.hardware.mujoco_system import MujocoSystem
from ct_controllers.hardware.sim_drive import SimulatedDrives, simulated_drives_for
from ct_controllers.runtime.stack import Stack, build_stack

BACKENDS = ("mujoco", "ros2_control_bridge", "canopen")
REAL_RATE = 100.0  # [Hz] for the real-drive backends (pure-Python bus and DDS round trips)
_unique = itertools.count()


@dataclass
class Rig:
    """A backend's whole stack (``stack.hardware`` is the :class:`InjectingSystem`) and its
    plant."""

    backend: str
    config: StackConfig
    stack: Stack
    plant: Any = None  # PlantProcess | SimulatedDrives | None (MuJoCo is its own plant)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def injector(self) -> InjectingSystem:
        assert isinstance(self.stack.hardware, InjectingSystem)
        return self.stack.hardware

    def applied(self) -> dict[str, float]:
        """Joint → the effort [N·m | N] the plant last took in."""
        if self.backend == "mujoco":
            inner = self.injector.inner
            assert isinstance(inner, MujocoSystem)
            report = inner.actuation_report()
            return dict(zip(report.joint_names, report.requested.tolist(), strict=True))
        if self.backend == "ros2_control_bridge":
            time.sleep(0.05)  # the last command crosses DDS
            return dict(self.plant.report()["last_command"])
        inner = self.injector.inner
        assert isinstance(inner, CanopenCia402System)
        latest: dict[str, float] = {}
        scalings = {d.joint: d.scaling for d in inner.drives}
        for record in list(self.plant.log)[-3 * len(scalings) :]:
            latest[record.joint] = scalings[record.joint].permille_to_effort(record.target_torque)
        return latest

    def max_applied(self) -> dict[str, float]:
        """Joint → the largest |effort| the plant ever took in (MuJoCo: the last one)."""
        if self.backend == "ros2_control_bridge":
            return dict(self.plant.report()["max_command"])
        if self.backend == "canopen":
            inner = self.injector.inner
            assert isinstance(inner, CanopenCia402System)
            scalings = {d.joint: d.scaling for d in inner.drives}
            peak: dict[str, float] = {}
            for record in list(self.plant.log):
                if record.mode == cia402.CYCLIC_SYNC_TORQUE:
                    value = abs(scalings[record.joint].permille_to_effort(record.target_torque))
                    peak[record.joint] = max(peak.get(record.joint, 0.0), value)
            return peak
        return {k: abs(v) for k, v in self.applied().items()}

    def close(self) -> None:
        self.stack.shut_down()
        if isinstance(self.plant, SimulatedDrives):
            self.plant.close()
        elif isinstance(self.plant, PlantProcess):
            self.plant.stop()


def make_rig(backend: str, **overrides: Any) -> Rig:
    """The stack for ``backend``, configured and active (brought up), not yet ticking."""
    if backend == "mujoco":
        config = load_config(overrides={"mujoco.mode": "lockstep", **overrides})
        stack = build_stack(config, bundled_description(), wrap_hardware=InjectingSystem)
        stack.bring_up()
        return Rig(backend, config, stack)
    if backend == "ros2_control_bridge":
        n = next(_unique)
        states = f"/ct_contract_{os.getpid()}_{n}/joint_states"
        commands = f"/ct_contract_{os.getpid()}_{n}/commands"
        config = load_config(
            overrides={
                "backend": backend,
                "hardware.armed": True,
                "update_rate": REAL_RATE,
                "ros2_control_bridge.joint_states_topic": states,
                "ros2_control_bridge.command_topic": commands,
                # Generous deadlines: two Python processes and DDS on a shared 2-core machine
                # pause for tens of ms now and then (once just over 100 ms in CI); the contract
                # bounds scale with these.
                "watchdog.state_timeout": 0.2,
                "watchdog.command_timeout": 0.2,
                **SLOW_LOOP_GAINS,
                **overrides,
            }
        )
        assert config.bridge is not None
        plant = PlantProcess(
            states, commands, list(config.joint_names), interface=config.bridge.command_interface
        )
        stack = build_stack(config, bundled_description(backend), wrap_hardware=InjectingSystem)
        rig = Rig(backend, config, stack, plant)
        try:
            stack.bring_up()
        except Exception:
            rig.close()
            raise
        return rig
    if backend == "canopen":
        config = load_config(
            overrides={
                "backend": backend,
                "hardware.armed": True,
                "update_rate": REAL_RATE,
                "canopen.channel": f"ct_contract_can_{next(_unique)}",
                "canopen.heartbeat_timeout": 0.1,  # python-can's software timers: slack
                "canopen.master_heartbeat_timeout": 0.1,  # the drives watching us: the same
                # 6 periods, not the default 3: the pure-Python bus jitters by several ms (a
                # 30 ms deadline was missed by 1.8 ms in CI); the contract bounds scale with it.
                "watchdog.state_timeout": 0.06,
                "watchdog.command_timeout": 0.06,
                "canopen.pdo_timeout": 0.06,
                **SLOW_LOOP_GAINS,
                **overrides,
            }
        )
        stack = build_stack(config, bundled_description(backend), wrap_hardware=InjectingSystem)
        inner = stack.hardware.inner  # type: ignore[attr-defined]
        drives = simulated_drives_for(inner, new_robot_model(), home_by_name(config))
        rig = Rig(backend, config, stack, drives)
        try:
            stack.bring_up()
        except Exception:
            rig.close()
            raise
        return rig
    raise ValueError(f"unknown backend '{backend}'")
