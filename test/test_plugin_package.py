"""A third party's plugins run the stack by configuration alone (docs/extending.md).

``test/plugins`` is a package of its own, outside ``ct_controllers``: a controller and a hardware
backend declared as entry points in its pyproject.toml. It is installed here the way a user
installs one (pip, from its own metadata; offline, into a temporary folder put on ``sys.path``),
and the stack resolves both names through :func:`ct_controllers.plugins.load_plugin`, the path
controllers.yaml and the URDF's ``<plugin>`` tag take.
"""

from __future__ import annotations

import importlib
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from ct_controllers.config import load_config
from ct_controllers.model.description import load_description
from ct_controllers.plugins import CONTROLLERS, HARDWARE, known_plugins, load_plugin
from ct_controllers.runtime.stack import build_stack

PACKAGE = Path(__file__).parent / "plugins"
CONTROLLER = "ct_test_plugins/Damping"
BACKEND = "ct_test_plugins/DoubleIntegrator"


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The test package pip-installed (no index, no build isolation: nothing fetched) from a
    copy of its source into a temporary target folder, which goes on ``sys.path`` while the
    module's tests run. Nothing is written outside the temporary folders."""
    work = tmp_path_factory.mktemp("ct_test_plugins")
    source, target = work / "src", work / "site"
    shutil.copytree(PACKAGE, source, ignore=shutil.ignore_patterns("__pycache__", "build"))
    subprocess.run(
        [
            sys.executable,
            *("-m", "pip", "install", "--quiet", "--no-deps", "--no-index"),
            *("--no-build-isolation", "--disable-pip-version-check"),
            *("--target", str(target), str(source)),
        ],
        check=True,
        cwd=work,
    )
    sys.path.insert(0, str(target))
    importlib.invalidate_caches()
    try:
        yield target
    finally:
        sys.path.remove(str(target))
        for name in [m for m in sys.modules if m.split(".")[0] == "ct_test_plugins"]:
            del sys.modules[name]
        importlib.invalidate_caches()


def test_entry_points_resolve_by_name(installed: Path) -> None:
    """The installed package's entry points are known by name in both groups, and resolve to
    classes loaded from the installed copy."""
    assert CONTROLLER in known_plugins(CONTROLLERS)
    assert BACKEND in known_plugins(HARDWARE)
    backend = load_plugin(HARDWARE, BACKEND)
    assert Path(sys.modules[backend.__module__].__file__ or "").is_relative_to(installed)


def test_stack_runs_on_third_party_plugins_by_configuration(
    installed: Path, tmp_path: Path
) -> None:
    """build_stack on a configuration naming only the test plugins — the controller by its type
    in the controller list, the backend by the URDF's <ros2_control> plugin tag — moves two joints
    0.3 rad and holds them: the motion succeeds, no fault, every joint within 1 mrad of its goal
    after 1 s of hold."""
    bundled = load_description(mappings={"backend": "mujoco"}).urdf
    tag = "<plugin>ct_controllers/MujocoSystem</plugin>"
    assert bundled.count(tag) == 1
    urdf = tmp_path / "arm_on_double_integrator.urdf"
    urdf.write_text(bundled.replace(tag, f"<plugin>{BACKEND}</plugin>"))
    config = load_config(
        overrides={
            "robot_description": str(urdf),
            "backend": "double_integrator",  # an xacro argument only: the URDF names the plugin
            "controllers": ["damping"],
            "default_controller": "damping",
            "damping.type": CONTROLLER,
            "damping.damping": [50.0] * 9,  # [N·m·s/rad | N·s/m]
        }
    )
    stack = build_stack(config)
    assert type(stack.hardware).__name__ == "DoubleIntegratorSystem"
    assert type(stack.controller).__name__ == "DampingController"
    assert not stack.hardware.loop_paced and stack.hardware.measurement_delay == 0
    loop = stack.loop
    joints = ("joint1", "joint4")
    index = stack.model.indices(joints)
    home = np.array(config.home_positions)[[config.joint_names.index(n) for n in joints]]
    goal = home + 0.3
    stack.bring_up()
    try:
        motion = loop.request_motion(joints, goal, 1.0)
        for _ in range(400):  # at most 4 s of sim time
            loop.run_ticks(10)
            status = loop.motion_status(motion)
            if status is not None and status.state != "running":
                break
        assert status is not None and status.state == "succeeded", status
        loop.run_ticks(1000)  # hold for 1 s
        snapshot = loop.snapshot()
        assert snapshot is not None and not snapshot.fault, snapshot and snapshot.fault
        assert np.abs(snapshot.position[index] - goal).max() < 1e-3
        others = np.setdiff1d(np.arange(stack.model.nv), index)
        start = np.empty(stack.model.nv)
        start[stack.model.indices(config.joint_names)] = config.home_positions
        assert np.abs(snapshot.position[others] - start[others]).max() < 1e-3
        assert 1.9 < snapshot.stamp <= stack.hardware.now()  # [s] on the backend's own clock
    finally:
        stack.shut_down()


def test_a_third_party_backend_gets_the_backend_check(installed: Path, tmp_path: Path) -> None:
    """A third-party backend says which `backend:` value selects it (its BACKEND), and gets the
    bundled ones' check without editing ct_controllers: a description naming it under another
    `backend:` is refused, naming both."""
    from ct_controllers.errors import ConfigError

    assert load_plugin(HARDWARE, BACKEND).BACKEND == "double_integrator"
    bundled = load_description(mappings={"backend": "mujoco"}).urdf
    urdf = tmp_path / "arm_on_double_integrator.urdf"
    urdf.write_text(
        bundled.replace(
            "<plugin>ct_controllers/MujocoSystem</plugin>", f"<plugin>{BACKEND}</plugin>"
        )
    )
    config = load_config(overrides={"robot_description": str(urdf), "backend": "mujoco"})
    with pytest.raises(ConfigError, match=rf"'mujoco'.*{BACKEND}"):
        build_stack(config)
