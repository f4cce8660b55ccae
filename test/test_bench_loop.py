"""ct_controllers.bench.loop: the loop benchmark runs end to end and reports what it promises."""

from __future__ import annotations

import json

import pytest

from ct_controllers.bench import loop


def test_loop_benchmark_json_reports_lockstep_stages_and_paced_jitter(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A short run prints one JSON object with the lockstep real-time factor beside MuJoCo's
    floor, every stage of the chain (task, diff_ik, joint_controller, read, guard, limiter,
    write), and paced jitter percentiles in order with an overrun count, loaded and not, each
    beside the machine's floor measured alike, and the compute of each goal's first ticks."""
    assert loop.main(["--sim-seconds", "1", "--paced-seconds", "1", "--json"]) == 0
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    step = report["lockstep"]
    assert 0 < step["rtf"] < step["floor_rtf"]
    # MuJoCo's share of the run, measured inside the backend, is part of the write stage.
    assert 0 < step["physics_mean_us"] < 1e3 / step["rtf"]  # < the wall time of a 1 ms tick
    assert {
        "read",
        "guard",
        "controller",
        "task",
        "diff_ik",
        "joint_controller",
        "limiter",
        "write",
    } <= set(step["stages"])
    for figures in step["stages"].values():
        assert 0 < figures["p50_us"] <= figures["p99_us"]
    for key in ("paced", "paced_loaded"):
        run = report[key]
        assert run["rate_hz"] == 1000.0 and run["ticks"] > 500
        assert run["jitter_p50_us"] <= run["jitter_p99_us"] <= run["jitter_max_us"]
        assert run["overruns"] >= 0
        assert run["scheduling"].startswith(("SCHED_FIFO", "SCHED_OTHER"))  # what the thread got
        # The machine's floor ran after each trial and as long, paced and scheduled alike, its
        # fixed work per tick calibrated to the first trial's median compute.
        floor = run["floor"]
        assert floor["rate_hz"] == run["rate_hz"]
        segments = run["segments"]
        assert sum(segment["floor"] for segment in segments) == floor["overruns"]
        assert sum(segment["overruns"] for segment in segments) == run["overruns"]
        assert floor["ticks"] == sum(round(segment["seconds"] * 1000) for segment in segments)
        assert 1.0 <= sum(segment["seconds"] for segment in segments) < 1.5
        assert floor["scheduling"] == run["scheduling"]
        assert 0 < floor["work_us"] <= run["compute_p99_us"]
        assert floor["chunks"] >= 1
        assert floor["compute_p50_us"] <= floor["compute_p99_us"] <= floor["compute_max_us"]
        assert floor["jitter_p50_us"] <= floor["jitter_p99_us"] <= floor["jitter_max_us"]
        # The goal's start: the compute of the chain's first ticks after its switch.
        start = run["goal_start"]
        assert start["goals"] >= 1 and start["ticks"] == loop.GOAL_START_TICKS
        assert 0 < start["compute_max_p50_us"] <= start["compute_max_max_us"]
        assert 0 <= start["overruns"] <= run["overruns"]
    assert "busy loop" in report["paced_loaded"]["load"]
