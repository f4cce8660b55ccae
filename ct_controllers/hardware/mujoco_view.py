"""Looking at a simulated run: offscreen video (:class:`VideoRecorder`) and MuJoCo's passive
viewer (:class:`PassiveViewer`), both from a backend's simulated scene
(``SystemInterface.simulated_scene()``), never by naming the backend.

Video: MuJoCo's ``Renderer`` draws the scene offscreen (headless: OpenGL through EGL, which
``ct_controllers`` selects with ``MUJOCO_GL=egl`` when no display is set, before MuJoCo is
imported) from a camera on the workspace, and imageio's ffmpeg plug-in (its own ffmpeg binary)
encodes H.264 MP4. The recorder is an observer of a lockstep run (``sim_demo.RunObserver``):
frames are taken between ticks, at ``fps`` of sim time, outside every tick's timing; the scene
is copied under the backend's lock and drawn after it is released. Never in a paced run.

Viewer: ``mujoco.viewer.launch_passive`` on the running node's scene, synchronised at 30 Hz by a
thread of its own under the backend's lock (never the control thread). It needs a display; where
there is none, :func:`viewer_unavailable` says why.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import mujoco

from ct_controllers.hardware.interface import SimulatedScene


@dataclass(frozen=True)
class CameraView:
    """A free camera looking at ``lookat`` [m] from ``distance`` [m], ``azimuth`` and
    ``elevation`` [deg] (MuJoCo's mjvCamera)."""

    lookat: tuple[float, float, float] = (0.3, 0.0, 0.3)  # between the base and the cube
    distance: float = 1.8
    azimuth: float = 140.0
    elevation: float = -20.0

    def camera(self) -> mujoco.MjvCamera:
        camera = mujoco.MjvCamera()
        camera.type = mujoco.mjtCamera.mjCAMERA_FREE
        camera.lookat[:] = self.lookat
        camera.distance = self.distance
        camera.azimuth = self.azimuth
        camera.elevation = self.elevation
        return camera


WORKSPACE = CameraView()


def mujoco_scene(stack: Any) -> SimulatedScene:
    """The stack's simulated MuJoCo scene; ValueError naming what is missing."""
    scene = stack.hardware.simulated_scene()
    if scene is None:
        raise ValueError("this hardware backend has no simulated scene to render")
    if scene.engine != "mujoco":
        raise ValueError(f"cannot render a {scene.engine} scene (MuJoCo only)")
    return scene


@dataclass(frozen=True)
class VideoSummary:
    path: str
    frames: int
    fps: float
    size: tuple[int, int]  # width, height [px]
    render_seconds: float  # [s] of wall time spent rendering and encoding

    def describe(self) -> str:
        return (
            f"video {self.path}: {self.frames} frames at {self.fps:g} fps, "
            f"{self.size[0]}x{self.size[1]} ({self.render_seconds:.1f} s rendering)"
        )


class VideoRecorder:
    """Renders a lockstep run to an MP4 at ``fps`` [frames per s of sim time] and ``size``
    (width, height [px]; multiples of 16 encode without rescaling)."""

    def __init__(
        self,
        path: str,
        fps: float = 30.0,
        size: tuple[int, int] = (640, 480),
        view: CameraView = WORKSPACE,
    ) -> None:
        if not (fps > 0 and size[0] > 0 and size[1] > 0):
            raise ValueError(f"video: fps and size must be positive, got {fps}, {size}")
        self.path, self.fps, self.size, self.view = path, fps, size, view
        self.frames = 0
        self._renderer: mujoco.Renderer | None = None
        self._writer: Any = None
        self._scene: SimulatedScene | None = None
        self._next = 0.0  # [s] sim time of the next frame
        self._busy = 0.0  # [s] wall time spent

    def started(self, stack: Any) -> None:
        import imageio.v2 as imageio

        self._scene = mujoco_scene(stack)
        width, height = self.size
        model = self._scene.model
        assert isinstance(model, mujoco.MjModel)
        # The offscreen buffer must hold the frame: grow the model's if it is smaller.
        model.vis.global_.offwidth = max(model.vis.global_.offwidth, width)
        model.vis.global_.offheight = max(model.vis.global_.offheight, height)
        self._renderer = mujoco.Renderer(model, height=height, width=width)
        self._camera = self.view.camera()
        self._writer = imageio.get_writer(
            self.path, fps=self.fps, codec="libx264", quality=7, macro_block_size=16
        )
        self._next = 0.0
        self.ticked(stack)

    def ticked(self, stack: Any) -> None:
        assert self._scene is not None and self._renderer is not None, "started() first"
        data = self._scene.data
        assert isinstance(data, mujoco.MjData)
        if data.time + 1e-9 < self._next:
            return
        start = time.perf_counter()
        self._next = max(self._next + 1.0 / self.fps, data.time)
        with self._scene.lock:  # type: ignore[attr-defined]
            self._renderer.update_scene(data, camera=self._camera)  # copies what it draws
        self._writer.append_data(self._renderer.render())
        self.frames += 1
        self._busy += time.perf_counter() - start

    def close(self) -> VideoSummary:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None
        return VideoSummary(self.path, self.frames, self.fps, self.size, self._busy)


def viewer_unavailable(environ: Mapping[str, str] | None = None) -> str | None:
    """Why MuJoCo's viewer cannot open here (no display), or None if it can try."""
    env = os.environ if environ is None else environ
    if not (env.get("DISPLAY") or env.get("WAYLAND_DISPLAY")):
        return (
            "no display (DISPLAY and WAYLAND_DISPLAY are not set): MuJoCo's viewer needs one; "
            "record a video instead (ct-sim --video FILE.mp4)"
        )
    return None


class PassiveViewer:
    """MuJoCo's passive viewer on a running simulation, synchronised at ``rate`` [Hz] by a
    thread of its own under the backend's lock; closed by :meth:`close` or by its window."""

    def __init__(self, scene: SimulatedScene, rate: float = 30.0) -> None:
        import mujoco.viewer

        self.scene = scene
        self.period = 1.0 / rate
        self._handle = mujoco.viewer.launch_passive(scene.model, scene.data)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ct-viewer", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.period) and self._handle.is_running():
            with self.scene.lock:  # type: ignore[attr-defined]
                self._handle.sync()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2.0)
        self._handle.close()
