"""The packages installed as ROS users install them, and the node run as launch_ros runs it.

A session fixture builds ct_interfaces and ct_controllers with colcon (from PyPI, pinned in
requirements.txt) into a temporary workspace, the plain (copying) install, against this venv's
ROS packages as the underlay (as /opt/ros/jazzy is on a ROS machine): once per test run, about
25 s on two cores, nearly all of it ct_interfaces' generated code. The installed node then runs
with the install's own environment (its ``local_setup.sh``), from another folder, with the
command line that ``launch_plan`` (what the launch files call) gives in that environment.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest
from ct_interfaces.action import MoveJoints
from ros_helpers import goal, ros_client

REPO = Path(__file__).resolve().parents[1]
VENV = Path(sys.executable).parent.parent  # this venv: the ROS underlay of the workspace
COLCON = Path(sys.executable).parent / "colcon"
PYTHON = str(Path(sys.executable))
# What a user's shell has before it sources anything (and what the venv's interpreter adds).
NOT_INHERITED = (
    "PYTHONPATH",
    "AMENT_PREFIX_PATH",
    "CMAKE_PREFIX_PATH",
    "COLCON_PREFIX_PATH",
    "LD_LIBRARY_PATH",
    "_ROS_WHEELS_BOOTSTRAP_COMPLETE",
)
# share/ct_controllers as setup.py's data_files lay it out (colcon adds its hooks beside them).
DATA_FILES = (
    "package.xml",
    "launch/common.py",
    "launch/sim.launch.py",
    "launch/hardware.launch.py",
    "config/controllers.yaml",
    "urdf/ct_arm.urdf.xacro",
)
INDEX = Path("share/ament_index/resource_index/packages")

pytestmark = pytest.mark.install


@dataclass(frozen=True)
class Workspace:
    root: Path
    install: Path  # the install base: install/<package> are the prefixes
    build_seconds: float

    @property
    def prefix(self) -> Path:
        return self.install / "ct_controllers"


def user_environment() -> dict[str, str]:
    """This session's environment (DDS on loopback, its ROS domain, ROS_HOME) without any ROS
    or Python search path: a shell that has sourced nothing yet."""
    return {k: v for k, v in os.environ.items() if k not in NOT_INHERITED}


def colcon_build(root: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    env = user_environment()
    env.update(
        AMENT_PREFIX_PATH=str(VENV),
        CMAKE_PREFIX_PATH=str(VENV),
        COLCON_HOME=str(root / "colcon_home"),  # no user defaults or mixins
    )
    return subprocess.run(
        [
            str(COLCON),
            "--log-base",
            str(root / "log"),
            "build",
            "--build-base",
            str(root / "build"),
            "--install-base",
            str(root / "install"),
            *arguments,
        ],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


@pytest.fixture(scope="session")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    """Both packages built and installed by colcon (plain install), once per test run."""
    root = tmp_path_factory.mktemp("colcon_ws")
    start = time.monotonic()
    result = colcon_build(
        root,
        "--event-handlers",
        "console_direct+",  # every package's output, CMake's included, in result.stdout
        "--paths",
        str(REPO),
        str(REPO / "ct_interfaces"),
        "--cmake-args",
        f"-DPython3_EXECUTABLE={PYTHON}",
        "-DBUILD_TESTING=OFF",
    )
    seconds = time.monotonic() - start
    assert result.returncode == 0, f"colcon build failed:\n{result.stdout[-4000:]}"
    # The PyPI wheels' CMake exports name the manylinux image's Python headers; CMakeLists.txt
    # re-points them, so configure reports no error at all (a "CMake Error" that the build
    # survives would be hidden by a zero exit code).
    assert "CMake Error" not in result.stdout, result.stdout[-4000:]
    return Workspace(root, root / "install", seconds)


def sourced_environment(install: Path, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment after ``. <install>/local_setup.sh`` on top of the venv as the underlay
    (AMENT_PREFIX_PATH, as sourcing /opt/ros/jazzy/setup.sh would set it)."""
    env = dict(user_environment() if base is None else base)
    env["AMENT_PREFIX_PATH"] = str(VENV)
    result = subprocess.run(
        ["sh", "-c", f'. "{install}/local_setup.sh" && env -0'],
        env=env,
        capture_output=True,
        check=True,
    )
    pairs = (entry.split("=", 1) for entry in result.stdout.decode().split("\0") if "=" in entry)
    return dict(pairs)


def run_python(code: str, env: Mapping[str, str], cwd: Path) -> dict:  # type: ignore[type-arg]
    """Run ``code`` in a fresh interpreter (from ``cwd``, never the checkout); its last output
    line is JSON."""
    result = subprocess.run(
        [PYTHON, "-c", code], env=dict(env), cwd=cwd, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


WHERE = """
import json
import ct_controllers
from ct_controllers.config import default_config_path
from ct_controllers.launch_plan import launch_plan
from ct_controllers.model.description import default_description_path
from ct_controllers.share import share_directory
print(json.dumps({
    "module": ct_controllers.__file__,
    "share": str(share_directory()),
    "config": str(default_config_path()),
    "urdf": str(default_description_path()),
    "plan_config": launch_plan("sim").parameter_files[0],
}))
"""


def test_colcon_install_and_the_venv_are_the_same_ament_prefix(workspace: Workspace) -> None:
    """A plain `colcon build` installs the ament index entry, share/ct_controllers (package.xml,
    launch, config, urdf) and an executable lib/ct_controllers/ct_control_node; after
    `make setup` the venv has the same entries with the same contents (each file linked to the
    checkout, found by `ros2 launch`'s walk of the share folder), and `ros2 run`'s lookup
    (ament index → lib/ct_controllers) finds the venv's executable, which runs."""
    for prefix in (workspace.prefix, VENV):
        assert (prefix / INDEX / "ct_controllers").is_file(), prefix
        node = prefix / "lib" / "ct_controllers" / "ct_control_node"
        assert node.is_file() and os.access(node, os.X_OK), node
        for name in DATA_FILES:
            installed = prefix / "share" / "ct_controllers" / name
            assert installed.is_file(), installed
        # `ros2 launch <package> <file>` walks the share folder without following links to
        # folders: every file must be found so.
        share = prefix / "share" / "ct_controllers"
        walked = {
            os.path.relpath(os.path.join(folder, name), share)
            for folder, _, names in os.walk(share)
            for name in names
        }
        assert set(DATA_FILES) <= walked, (prefix, walked)
    colcon_share = workspace.prefix / "share" / "ct_controllers"
    installed_data = sorted(
        str(path.relative_to(colcon_share))
        for path in colcon_share.rglob("*")
        if path.is_file() and path.parts[len(colcon_share.parts)] in ("launch", "config", "urdf")
    )
    assert installed_data == sorted(n for n in DATA_FILES if "/" in n)  # nothing forgotten here
    for name in DATA_FILES:
        venv_file = VENV / "share" / "ct_controllers" / name
        assert venv_file.read_bytes() == (colcon_share / name).read_bytes(), name
        assert venv_file.resolve() == (REPO / name).resolve(), "the venv's share is the checkout"
    env = {**user_environment(), "AMENT_PREFIX_PATH": str(VENV)}
    found = run_python(
        "import json; from ct_controllers.launch_plan import launch_plan; "
        "print(json.dumps(launch_plan('sim').executable_path()))",
        env,
        workspace.root,
    )
    assert found == str(VENV / "lib" / "ct_controllers" / "ct_control_node")
    result = subprocess.run(
        [found, "--help"], env=env, cwd=workspace.root, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0 and "ct_control_node" in result.stdout, result.stderr


def test_the_share_folder_is_found_through_the_ament_index_in_every_install(
    workspace: Workspace, tmp_path: Path
) -> None:
    """share_directory() — and through it the default config, the bundled URDF and the launch
    plan's parameter file — is the install's own share folder in a plain colcon install (sourced,
    or only on PYTHONPATH), a --symlink-install, the venv as an ament prefix, and the source
    checkout with nothing sourced; never the interpreter's prefix."""
    symlinked = tmp_path / "symlink_ws"
    symlinked.mkdir()
    result = colcon_build(symlinked, "--symlink-install", "--paths", str(REPO))
    assert result.returncode == 0, result.stdout[-4000:]
    python = f"python{sys.version_info.major}.{sys.version_info.minor}"
    plain_site = workspace.prefix / "lib" / python / "site-packages"
    cases = {
        "colcon install, sourced": (
            sourced_environment(workspace.install),
            workspace.prefix / "share" / "ct_controllers",
        ),
        "colcon install, PYTHONPATH only": (
            {**user_environment(), "PYTHONPATH": str(plain_site)},
            workspace.prefix / "share" / "ct_controllers",
        ),
        "colcon --symlink-install": (
            sourced_environment(symlinked / "install"),
            symlinked / "install" / "ct_controllers" / "share" / "ct_controllers",
        ),
        "venv, AMENT_PREFIX_PATH=.venv": (
            {**user_environment(), "AMENT_PREFIX_PATH": str(VENV)},
            VENV / "share" / "ct_controllers",
        ),
        "source checkout, nothing sourced": (user_environment(), REPO),
    }
    for case, (env, share) in cases.items():
        where = run_python(WHERE, env, tmp_path)
        assert Path(where["share"]) == share, (case, where)
        assert where["config"] == str(share / "config" / "controllers.yaml"), (case, where)
        assert where["plan_config"] == where["config"], (case, where)
        assert where["urdf"] == str(share / "urdf" / "ct_arm.urdf.xacro"), (case, where)
    installed = run_python(WHERE, cases["colcon install, sourced"][0], tmp_path)
    assert Path(installed["module"]).is_relative_to(workspace.prefix), installed


PLAN = """
import json
import ct_controllers
from ct_controllers.launch_plan import launch_plan
plan = launch_plan("sim")
print(json.dumps({"command": plan.command(), "environment": dict(plan.environment),
                  "node": plan.node, "module": ct_controllers.__file__}))
"""
# PYTHONVERBOSE lines naming a loaded module's file: "# code object from <file.py>" (quoted
# when it is a .pyc) and "# <cached .pyc> matches <file.py>".
LOADED = re.compile(r"^# (?:code object from '?([^']+?)'?|\S+ matches (\S+))$")


def _loaded_files(log: str) -> list[Path]:
    files = []
    for line in log.splitlines():
        match = LOADED.match(line)
        if match:
            files.append(Path(match.group(1) or match.group(2)))
    return files


@pytest.fixture
def installed_node(workspace: Workspace, tmp_path: Path) -> Iterator[tuple[dict, Path]]:  # type: ignore[type-arg]
    """The installed node, started with the plan's command line and environment as the
    installed package computes them in the install's sourced environment; its output (with
    PYTHONVERBOSE: every imported module's file) in a log file."""
    env = sourced_environment(workspace.install)
    plan = run_python(PLAN, env, tmp_path)
    node_env = dict(env)
    for name, value in plan["environment"].items():
        if value is None:
            node_env.pop(name, None)
        else:
            node_env[name] = value
    node_env["PYTHONVERBOSE"] = "1"
    log = tmp_path / "node.log"
    with open(log, "w") as output:
        process = subprocess.Popen(
            plan["command"],
            cwd=tmp_path,
            env=node_env,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        yield plan, log
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGINT)
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(5)


def test_the_installed_node_runs_as_launch_runs_it_and_reaches_a_goal(
    workspace: Workspace,
    installed_node: tuple[dict, Path],  # type: ignore[type-arg]
) -> None:
    """With the install's environment (local_setup.sh over the venv) and from another folder,
    the launch plan is lib/ct_controllers/ct_control_node of the install with launch_ros's
    arguments (name and namespace remaps, the installed controllers.yaml, the target's -p
    parameters) and DDS pinned to the install's loopback profile; started so, the node imports
    ct_controllers and ct_interfaces only from the install (nothing from the checkout) and a
    MoveJoints goal succeeds."""
    plan, log = installed_node
    prefix, share = workspace.prefix, workspace.prefix / "share" / "ct_controllers"
    assert plan["command"] == [
        str(prefix / "lib" / "ct_controllers" / "ct_control_node"),
        "--ros-args",
        "-r",
        "__node:=controller_manager",
        "-r",
        "__ns:=/ct",
        "--params-file",
        str(share / "config" / "controllers.yaml"),
        "-p",
        "backend:=mujoco\n...\n",
        "-p",
        "use_sim_time:=true\n...\n",
    ]
    assert plan["node"] == "/ct/controller_manager"
    profile = Path(plan["environment"]["FASTRTPS_DEFAULT_PROFILES_FILE"])
    assert profile.is_relative_to(prefix) and profile.name == "fastdds_loopback.xml"
    assert Path(plan["module"]).is_relative_to(prefix)
    with ros_client() as client:
        handle = client.send(goal(["joint1", "joint4"], [0.4, -1.4], 1.0))
        assert handle.accepted
        result = client.result(handle)
        assert result.error_code == MoveJoints.Result.SUCCESS, result.message
    loaded = _loaded_files(log.read_text(errors="replace"))
    ours = [f for f in loaded if "ct_controllers" in f.parts or "ct_interfaces" in f.parts]
    assert any(f.parts[-2:] == ("ros", "control_node.py") for f in ours), "no control_node import"
    assert any("ct_interfaces" in f.parts for f in ours), "no ct_interfaces import"
    outside = [f for f in ours if not f.is_relative_to(workspace.install)]
    assert not outside, f"imported from outside the install: {outside[:5]}"
