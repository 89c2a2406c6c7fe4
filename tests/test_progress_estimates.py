"""The start line's estimate: one wording for typical time and bound (dotattn.core.progress.estimate_words), the
fraction of the budget a unit typically uses, and the load it assumes, read from the threads runnable now (a faked
/proc/loadavg), so that a command started right after another is not charged for the one that has ended."""

import csv
import io
import json
import os
import re
from pathlib import Path

import pytest

from dotattn.core.progress import (
    CommandProgress,
    Cost,
    estimate_words,
    load_factor,
    present_load,
    runnable_others,
)


# -- the one wording ----------------------------------------------------------------------------------------
def test_typical_alone_where_there_is_no_bound():
    assert estimate_words(40.0) == "typically ~40 s"
    assert estimate_words(600.0, None) == "typically ~10 min"


def test_typical_and_bound_where_they_differ():
    assert estimate_words(180.0, 720.0) == "typically ~3 min, at most 12 min if every run uses its whole budget"


def test_no_bound_stated_where_it_rounds_to_the_typical_time():
    # 40.2 s and 40.4 s both print as "40 s": a bound equal to the typical time in the printed digits says nothing
    assert estimate_words(40.2, 40.4) == "typically ~40 s"
    assert estimate_words(300.0, 300.0) == "typically ~5 min"


def test_zero_budget_edge_cases():
    assert estimate_words(0.0) == "nothing left to compute"
    assert estimate_words(0.0, 0.0) == "nothing left to compute"
    # a zero typical time with a budget left: the bound is still stated
    assert estimate_words(0.0, 120.0) == "typically under 1 s, at most 2 min if every run uses its whole budget"
    assert estimate_words(0.3) == "typically under 1 s"  # not "~0 s": something is left to compute
    assert estimate_words(0.3, 0.4) == "typically under 1 s"


@pytest.mark.parametrize(
    "typical, bound", [(-1.0, None), (float("nan"), None), (float("inf"), None), (1.0, -1.0), (10.0, 5.0)]
)
def test_impossible_times_are_refused(typical, bound):
    with pytest.raises(ValueError):
        estimate_words(typical, bound)


@pytest.mark.parametrize("typical", [0.0, -0.1, 1.5, float("nan")])
def test_cost_typical_fraction_is_in_0_1(typical):
    with pytest.raises(ValueError, match="typical"):
        Cost(1.0, "here", typical)


def line(progress: CommandProgress, per_unit: float, cost: Cost, **kw) -> str:
    return progress.estimate_line(per_unit, cost, n_cores=2, load=0.0, **kw)


def test_estimate_line_states_bound_and_typical_from_the_cost():
    p = CommandProgress("aim amp", 24, "runs", stream=io.StringIO(), tty=False)
    text = line(p, 30.0, Cost(1.0, "SRC", typical=0.25))  # 24 x 30 CPU-s at most, a quarter of it typically
    assert text.startswith("typically ~3 min, at most 12 min if every run uses its whole budget; the 24 runs left")
    assert "30 CPU-s per run with its whole budget, typically 25 % of it; calibrated in SRC" in text
    tiny = line(p, 30.0, Cost(1.0, "SRC", typical=0.0021))  # a restart typically uses 0.21 % of 20,000 steps
    assert "typically 0.21 % of it" in tiny
    assert "at the present load 0 " in text


def test_estimate_line_without_early_stopping_states_one_time():
    p = CommandProgress("train-erm", 4, "seeds", stream=io.StringIO(), tty=False)
    text = line(p, 60.0, Cost(1.0, "SRC"))
    assert text.startswith("typically ~4 min; the 4 seeds left") and "at most" not in text
    # the settings can rule out stopping early (a tolerance of 0): the command passes typical=1
    assert "at most" not in line(p, 60.0, Cost(1.0, "SRC", typical=0.25), typical=1.0)


def test_estimate_line_counts_only_the_units_left_and_the_fixed_cost_once():
    p = CommandProgress("paths sample", 4, "chains", cached=4, stream=io.StringIO(), tty=False)
    assert line(p, 30.0, Cost(1.0, "SRC")).startswith("nothing left to compute; the 0 chains left")
    assert line(p, 30.0, Cost(1.0, "SRC"), fixed=4.0).startswith("typically ~4 s; the 0 chains left")
    q = CommandProgress("paths sample", 4, "chains", cached=2, stream=io.StringIO(), tty=False)
    assert line(q, 30.0, Cost(1.0, "SRC"), fixed=4.0).startswith("typically ~64 s; the 2 chains left")


def test_estimate_line_refuses_a_fraction_outside_0_1():
    p = CommandProgress("x", 2, "runs", stream=io.StringIO(), tty=False)
    for bad in (0.0, 1.2):
        with pytest.raises(ValueError, match="typical"):
            line(p, 1.0, Cost(1.0, "SRC"), typical=bad)


# -- the load ------------------------------------------------------------------------------------------------
def test_runnable_others_reads_the_instantaneous_count():
    # 1-min average 4.2 (it still counts a command that has just ended); 3 runnable now, this reader among them
    assert runnable_others("4.20 3.10 2.00 3/412 12345\n") == 2.0
    assert runnable_others("0.50 0.40 0.30 1/99 7") == 0.0  # only the reader itself
    assert runnable_others("0.00 0.00 0.00 0/99 7") == 0.0  # never negative
    for bad in ("", "1.0 2.0 3.0", "1.0 2.0 3.0 x 5"):
        with pytest.raises(ValueError):
            runnable_others(bad)


def test_present_load_ignores_the_one_minute_average(tmp_path):
    """Right after a 2-thread command ended the one-minute average is still near 2; only 1 thread is runnable
    now besides the reader: the load is 1, not 2, so the next command is neither given fewer threads nor told
    a longer time."""
    fake = tmp_path / "loadavg"
    fake.write_text("2.31 1.20 0.70 2/180 4242\n")
    assert present_load(str(fake)) == 1.0
    assert load_factor(1, present_load(str(fake)), 2) == 1.0  # one thread beside one other on 2 cores: no stretch
    assert load_factor(1, 2.31, 2) > 1.0  # what the one-minute average would have said


def test_present_load_falls_back_to_the_average_without_proc(tmp_path):
    missing = str(tmp_path / "no-such-file")
    expected = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    assert present_load(missing) == pytest.approx(expected, abs=5.0)  # the average moves between two reads
    assert present_load(missing) >= 0


def test_threads_follow_the_instantaneous_load(tmp_path, monkeypatch):
    """threads_per_worker reads present_load: a command that has just ended does not cost the next one a thread."""
    from dotattn.cli import options

    from dotattn.core import progress

    fake = tmp_path / "loadavg"
    fake.write_text("1.90 1.00 0.50 1/150 99\n")  # the average still near 2; only the reader runnable now
    monkeypatch.setattr(progress, "LOADAVG", str(fake))
    assert options.threads_per_worker(0, 1, cores=None) == progress.cores()
    fake.write_text("0.10 0.10 0.10 3/150 99\n")  # the other way: two threads runnable now besides the reader
    assert options.threads_per_worker(0, 1, cores=None) == max(1, progress.cores() - 2)


# -- the typical fractions are those of the committed runs ---------------------------------------------------
ROOT = Path(__file__).resolve().parents[1]


def committed_rows(path: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(line for line in path.read_text().splitlines() if not line.startswith("#")))


def test_amp_typical_fraction_is_that_of_the_committed_studies():
    from dotattn.aim.algo_study import AMP_COST, AMP_TYPICAL_STUDIES

    used = budget = 0
    for name in AMP_TYPICAL_STUDIES:
        folder = ROOT / "results" / "aim" / name
        max_iter = int(json.loads((folder / "summary.json").read_text())["made_for"]["max_iter"])
        runs = [r for r in committed_rows(folder / "runs.csv") if r["estimator"] == "amp"]
        assert runs, name
        used += sum(int(r["iterations"]) for r in runs)
        budget += max_iter * len(runs)
    assert AMP_COST.typical == pytest.approx(used / budget, abs=0.005)  # the constant is written to 2 digits


@pytest.mark.parametrize("study", ["omega0.3_d1000", "omega0.3_d1000_lr1.5"])
def test_erm_typical_fraction_is_one_as_in_the_committed_studies(study):
    """A seed's batch stops when its last run stops; in both committed studies every seed ran its whole budget."""
    from dotattn.erm.experiment import ERM_COST

    rows = committed_rows(ROOT / "results" / "erm" / study / "runs.csv")
    summary = json.loads((ROOT / "results" / "erm" / study / "summary.json").read_text())
    text = json.dumps(summary)
    budget = int(re.search(r'"steps": (\d+)', text)[1])
    per_seed: dict[str, int] = {}
    for r in rows:
        per_seed[r["seed"]] = max(per_seed.get(r["seed"], 0), int(r["steps"]))
    assert per_seed and all(s == budget for s in per_seed.values()), per_seed
    assert ERM_COST.typical == 1.0
