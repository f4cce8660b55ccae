"""Offscreen video of a simulated run (ct_controllers.hardware.mujoco_view): MuJoCo's Renderer,
headless (EGL), encoded to MP4 with imageio's ffmpeg plug-in, read back here."""

from __future__ import annotations

from pathlib import Path

import imageio.v2 as imageio
import numpy as np
from helpers import lockstep_config

from ct_controllers.cli import sim_main
from ct_controllers.hardware.mujoco_view import VideoRecorder, viewer_unavailable
from ct_controllers.sim_demo import run_scripted_motion


def frames_of(path: Path) -> list[np.ndarray]:
    reader = imageio.get_reader(str(path))
    try:
        return [np.asarray(frame) for frame in reader]
    finally:
        reader.close()


def test_a_lockstep_run_renders_headless_to_a_video_where_the_arm_moves(tmp_path: Path) -> None:
    """The scripted ct-sim motion rendered at 10 fps, 160x128: one frame per 0.1 s of sim time
    (the first at t = 0), none blank (the scene has contrast), consecutive frames differ while the
    arm moves to its first waypoint, and the first and the 2 s frame differ over a region as an
    arm's swing does (the camera does not move: only the scene does)."""
    path = tmp_path / "run.mp4"
    video = VideoRecorder(str(path), fps=10.0, size=(160, 128))
    summary = run_scripted_motion(lockstep_config(), [video])
    result = video.close()
    assert summary.ok
    assert result.frames == len(frames_of(path))
    assert abs(result.frames - (summary.sim_time * 10 + 1)) <= 1
    frames = frames_of(path)
    assert frames[0].shape == (128, 160, 3)
    for frame in frames:
        assert float(np.std(frame)) > 10.0, "a blank frame"
    moving = [np.abs(frames[i + 1].astype(int) - frames[i]).mean() for i in range(1, 15)]
    assert min(moving) > 0.05, moving
    changed = np.abs(frames[20].astype(int) - frames[0]).max(axis=2) > 40
    assert changed.mean() > 0.01, f"only {changed.mean():.3%} of the pixels changed"


def test_ct_sim_video_option_writes_the_file_at_the_asked_size(tmp_path: Path) -> None:
    """`ct-sim --video FILE.mp4 --fps 5 --size 96x64` writes an MP4 of that size and rate
    (5 frames per s of sim time) and says so; a malformed size is refused with exit 2."""
    path = tmp_path / "sim.mp4"
    assert sim_main(["--video", str(path), "--fps", "5", "--size", "96x64"]) == 0
    frames = frames_of(path)
    assert frames[0].shape == (64, 96, 3)
    assert 49 <= len(frames) <= 52  # 10.05 s of sim time
    assert sim_main(["--video", str(tmp_path / "x.mp4"), "--size", "big"]) == 2


def test_the_viewer_says_why_it_cannot_open_without_a_display() -> None:
    """MuJoCo's viewer needs a display: without DISPLAY or WAYLAND_DISPLAY the reason names
    them and the headless alternative; with one, nothing stands in its way here."""
    reason = viewer_unavailable({})
    assert reason is not None and "DISPLAY" in reason and "--video" in reason
    assert viewer_unavailable({"DISPLAY": ":0"}) is None
    assert viewer_unavailable({"WAYLAND_DISPLAY": "wayland-0"}) is None
