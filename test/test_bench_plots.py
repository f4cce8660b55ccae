"""The benches' plots (--plot): PNG files a reader can look at, made without a display."""

from __future__ import annotations

from pathlib import Path

import matplotlib.image
import numpy as np

from ct_controllers.bench import loop, tracking


def read_png(path: Path) -> np.ndarray:
    image = np.asarray(matplotlib.image.imread(str(path)))
    assert image.ndim == 3 and image.shape[0] > 200 and image.shape[1] > 400
    return image


def test_tracking_plot_draws_each_laws_error_per_joint(tmp_path: Path) -> None:
    """`ct-bench tracking --plot FILE.png` (1 s of the seed protocol) writes a PNG with content
    (not one flat colour) and still prints its report."""
    path = tmp_path / "tracking.png"
    assert tracking.main(["--duration", "1", "--plot", str(path), "--json"]) == 0
    image = read_png(path)
    assert float(image[..., :3].std()) > 0.05


def test_loop_plot_draws_histograms_of_stack_and_floor(tmp_path: Path) -> None:
    """loop.plot: one row of compute and jitter histograms per paced run, the stack beside its
    floor, from per-tick samples (here made up: 1 kHz, a few late ticks)."""
    rng = np.random.default_rng(0)
    samples = {
        "paced": {
            "compute": rng.normal(300e-6, 30e-6, 5000).clip(0),
            "jitter": np.concatenate([rng.exponential(5e-6, 4990), np.full(10, 700e-6)]),
            "floor_compute": rng.normal(300e-6, 10e-6, 5000).clip(0),
            "floor_jitter": rng.exponential(3e-6, 5000),
        }
    }
    report = {"paced": {"rate_hz": 1000.0, "overruns": 10, "floor": {"overruns": 0}}}
    path = tmp_path / "loop.png"
    loop.plot(str(path), report, samples)
    image = read_png(path)
    assert float(image[..., :3].std()) > 0.05
