"""ct_controllers.bench.gil: the GIL benchmark runs end to end and reports what it promises."""

from __future__ import annotations

import json
import sys

import pytest

from ct_controllers.bench import gil
from ct_controllers.runtime.realtime import GIL_SWITCH_INTERVAL


def test_gil_benchmark_reports_the_baseline_and_each_switch_interval(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A short run prints, as JSON, the loop alone (at the project's switch interval) and then
    beside a goal-building thread for each switch interval asked for: ticks at about 1 kHz,
    overruns counted, builds done only where a builder ran, the interval restored after."""
    before = sys.getswitchinterval()
    argv = ["--seconds", "0.5", "--every", "0.05", "--switch-intervals", "0.5", "0.1", "--json"]
    assert gil.main(argv) == 0
    runs = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["runs"]
    assert [run["switch_interval_ms"] for run in runs] == pytest.approx(
        [GIL_SWITCH_INTERVAL * 1e3, 0.5, 0.1]
    )
    assert runs[0]["builder_every_s"] is None and runs[0]["builds"] == 0
    for run in runs:
        assert 400 <= run["ticks"] <= 600
        assert 0 <= run["overruns"] <= run["ticks"]
        assert 0 <= run["jitter_p99_us"] <= run["jitter_max_us"]
    for run in runs[1:]:
        assert run["builder_every_s"] == 0.05 and run["builds"] >= 5
    assert sys.getswitchinterval() == before


@pytest.mark.parametrize(
    "argv", [["--seconds", "0"], ["--every", "-1"], ["--switch-intervals", "0"]]
)
def test_bad_arguments_are_refused(argv: list[str]) -> None:
    """Non-positive durations or intervals exit with a usage error."""
    with pytest.raises(SystemExit):
        gil.main(argv)
