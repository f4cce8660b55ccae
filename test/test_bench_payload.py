"""ct_controllers.bench.payload: ``ct-bench payload`` identifies 0.5 and 1 kg in MuJoCo within
the issue's tolerances (or refuses), and computed torque with the identified payload tracks
within 2x of the exact model, far better than without it."""

from __future__ import annotations

import json

from ct_controllers.bench import payload


def test_bench_reports_identification_per_mass_and_tracking_side_by_side(capsys) -> None:
    """`ct-bench payload --json` (two noisy draws, 0.5 s of tracking) prints one object: per
    mass a noise-free result that is right (0.5 and 1 kg: mass within 5 %, COM within 1 cm) or
    refused, noisy draws likewise, and the tracking errors without, with the identified and
    with the exact payload, the identified within 2x of the exact."""
    assert payload.main(["--json", "--draws", "2", "--duration", "0.5"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [row["mass"] for row in report["identification"]] == list(payload.MASSES)
    for row in report["identification"]:
        for result in [row["noise_free"], *row["noisy"]]:
            if "refused" in result:
                continue
            assert abs(result["mass_error_percent"]) <= 5.0
            assert result["com_error_mm"] <= 10.0
        if row["mass"] >= 0.5:
            assert "refused" not in row["noise_free"]
    tracking = report["tracking"]
    assert tracking["identified"]["e_rms"] <= 2.0 * tracking["exact"]["e_rms"]
    assert tracking["without"]["e_rms"] >= 10.0 * tracking["identified"]["e_rms"]
