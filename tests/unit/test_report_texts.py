"""The reliability command's text: the interval sweep's table, by hand (report.reliability)."""

from __future__ import annotations

from simcluster.report.reliability import sweep_text

SWEEP = {"interval_sweep": [{"interval_min": 5.0, "goodput": 0.95, "ci95": 0.01,
                             "daly_goodput": 0.951, "time_to_train_days": 10.0},
                            {"interval_min": 20.0, "goodput": 0.97, "ci95": 0.012,
                             "daly_goodput": 0.972, "time_to_train_days": None}],
         "optimal_interval_min": 20.0, "young_interval_min": 21.0, "daly_interval_min": 22.5,
         "sweep_replicas": 16}


def test_the_interval_sweep_table_by_hand() -> None:
    lines = sweep_text(SWEEP).splitlines()
    assert [c.strip() for c in lines[0].split("  ") if c.strip()] == [
        "interval (min)", "goodput", "95% CI", "Daly Eq. 9", "days to train"]
    assert lines[2].split() == ["5.0", "0.9500", "0.0100", "0.9510", "10.00"]
    assert lines[3].split() == ["20.0", "0.9700", "0.0120", "0.9720", "-"]
    assert lines[-1].startswith("optimum: simulated 20")
    assert "(16 replicas per interval, common random numbers)" in lines[-1]
