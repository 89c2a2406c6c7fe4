"""Numbers the README and docs quote from committed files agree with those files (issue 47: docs that contradicted
each other and their sources). A number quoted here is read from its source; numbers that only a run of the test
suite could produce (test counts) are not quoted at all."""

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
PERFORMANCE = (ROOT / "docs" / "performance.md").read_text()
CLI_DOC = (ROOT / "docs" / "cli.md").read_text()


def flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def phase_summary(omega: float) -> dict:
    rows = json.loads((ROOT / "results" / "phase_diagram" / "summary.json").read_text())["omegas"]
    return next(s for s in rows if abs(s["omega"] - omega) < 1e-9)


@pytest.mark.parametrize("omega, with_error", [(0.3, True), (0.2, False), (0.1, True)])
def test_readme_alpha_c_is_the_committed_phase_diagram(omega, with_error):
    s = phase_summary(omega)
    quoted = f"{s['alpha_c']:.4f}" + (f" ± {s['alpha_c_error']:.4f}" if with_error else "")
    assert quoted in flat(README), quoted


def test_main_job_numbers_are_those_of_its_json():
    job = json.loads((ROOT / "benchmarks" / "results" / "main_job.json").read_text())["phase_diagram"]
    wall, cpu, fixed_points = job["wall_seconds"], job["cpu_seconds"], job["fixed_points"]
    readme = flat(README)
    assert f"10 ω × 25 α, on all cores: {cpu:.0f} s of CPU" in readme and f"{wall:.0f} s wall" in readme
    assert f"**{wall:.1f} s**" in PERFORMANCE and f"**{cpu:.1f} s**" in PERFORMANCE  # the table's newest row
    current = flat(PERFORMANCE[PERFORMANCE.index("## The default phase") :])
    low = re.search(r"costs \*\*(\d+)–\d+ CPU-s\*\*", current)
    assert low and int(low[1]) == round(cpu), "the current range starts at the main job"
    assert f"{cpu:.1f} CPU-s and {wall:.1f} s wall" in current
    for m in re.finditer(r"solved (\d[\d,]*) fixed points", current):
        assert int(m[1].replace(",", "")) == fixed_points, m[0]  # the current default run's count


def test_verify_recursive_folder_count_is_the_committed_one():
    from dotattn.core.integrity import folders_with_manifest

    counts = re.findall(r"`verify --recursive` \| `results` \((\d+) folders\)", PERFORMANCE)
    assert counts and all(int(c) == len(folders_with_manifest(ROOT / "results")) for c in counts)


def test_no_test_counts_in_the_docs():
    """How many tests the suite has changes with every commit and comes from no committed file: not quoted."""
    for name, text in (("README.md", README), ("docs/cli.md", CLI_DOC), ("docs/performance.md", PERFORMANCE)):
        found = re.findall(r"\b\d[\d,]* (?:tests|passed)\b", text)
        assert not found, (name, found)


def test_aim_gd_example_steps_match_what_it_runs():
    """The README's `aim gd` example and performance.md's row for it state the steps the command runs."""
    from dotattn.aim.gd import GDConfig

    example = next(ln for ln in README.splitlines() if ln.startswith("dotattn aim gd "))
    m = re.search(r"--steps (\d+)", example)
    steps = int(m[1]) if m else GDConfig().steps
    row = next(ln for ln in PERFORMANCE.splitlines() if ln.startswith("| `aim gd` |") and "(the example)" in ln)
    assert f"{steps} Adam steps (the example)" in row, row
