"""ct_controllers.cli: the console entry points as a user runs them (separate processes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

BIN = os.path.dirname(sys.executable)


def _run(*arguments: str, timeout: float = 120.0) -> subprocess.CompletedProcess:  # type: ignore[type-arg]
    return subprocess.run(
        [os.path.join(BIN, arguments[0]), *arguments[1:]],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=dict(os.environ),
    )


def test_bringup_on_hardware_refuses_when_not_armed() -> None:
    """`ct-bringup hardware` with hardware.armed false stops at activation with exit code 2 and a
    message naming the parameter — no traceback, nothing left running."""
    result = _run("ct-bringup", "hardware")
    assert result.returncode == 2, result.stderr
    assert "hardware.armed" in result.stderr and "REAL HARDWARE" in result.stderr
    assert "Traceback" not in result.stderr


def test_sim_json_reports_the_scripted_motion() -> None:
    """`ct-sim --json` prints one object: the arm ended within the stated error of home, with
    the loop's timing and stages."""
    result = _run("ct-sim", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["ok"] is True
    assert report["final_error_rad"] <= report["final_error_limit_rad"]
    assert {"read", "guard", "controller", "limiter", "write"} <= set(report["stages"])


def test_sim_rejects_an_unknown_controller_by_name() -> None:
    """`ct-sim --controller nope` exits 2 naming the controller."""
    result = _run("ct-sim", "--controller", "nope")
    assert result.returncode == 2 and "'nope'" in result.stderr
