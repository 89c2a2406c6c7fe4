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
BENCHMARKS = (ROOT / "benchmarks" / "README.md").read_text()


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


# -- the start-line estimates quoted beside the README examples' measured times ---------------------------------
def start_line_words(label: str, total: int, unit: str, per_unit: float, cost, threads: int = 1, **kw) -> str:
    """What the command's start line says first ("typically ~X[, at most Y ...]") on a quiet machine: nothing else
    runnable (load 0), 2 cores, the threads of the measured run."""
    import io

    from dotattn.core.progress import CommandProgress

    progress = CommandProgress(label, total, unit, stream=io.StringIO(), tty=False)
    line = progress.estimate_line(per_unit, cost, kw.pop("workers", 1), threads, n_cores=2, load=0.0, **kw)
    return line.split("; ")[0]


def readme_example(start: str, arguments: str) -> None:
    """The README example the estimate below is computed for runs these arguments."""
    line = next(ln for ln in README.splitlines() if ln.startswith(f"dotattn {start} "))
    assert arguments in line, (line, arguments)


def estimate_phase_diagram() -> str:
    from dotattn.cli.main import cli
    from dotattn.cli.options import parse_grid
    from dotattn.cli.solve import build_quadrature

    from dotattn.positional_semantic.phase_diagram import PHASE_DIAGRAM_COST, SweepSettings, estimate_seconds
    from dotattn.positional_semantic.problem import Problem
    from dotattn.positional_semantic.refine import RefineSpec

    readme_example("phase-diagram", "--omega 0.1,0.3 --alpha 0.5:2.5:21 --workers 2")
    command = cli.get_command(None, "phase-diagram")
    default = {p.name: p.default for p in command.params}
    problem = Problem(omega=0.1)
    quad = build_quadrature(problem, default["quad_kind"], default["quad_order"], default["coarse_order"])
    settings = SweepSettings(quad, refine=RefineSpec(default["refine_order"], default["refine_rules"]))
    per_column = estimate_seconds(problem, parse_grid("alpha", ("0.5:2.5:21",)), settings, 1, 1)
    return start_line_words("phase-diagram", 2, "columns", per_column, PHASE_DIAGRAM_COST, workers=2)


def estimate_train_erm() -> str:
    from dotattn.erm.config import ErmConfig
    from dotattn.erm.experiment import ERM_COST, config_units, erm_unit_seconds
    from dotattn.positional_semantic.problem import Problem

    readme_example("train-erm", "--d 1000 --alpha 0.25:2:8 --omega 0.3 --init both --seeds 4 --steps 5000 --lr 1.5")
    config = ErmConfig(
        d=1000,
        alphas=tuple(0.25 * i for i in range(1, 9)),
        inits=("semantic", "positional"),
        seeds=4,
        steps=5000,
        lr=1.5,
    )
    units = config_units(config)
    return start_line_words("train-erm", len(units), "seeds", erm_unit_seconds(Problem(omega=0.3), units[0]), ERM_COST)


def estimate_erm_restarts() -> str:
    from dotattn.erm.restarts import RESTART_COST, RestartConfig, restart_seconds
    from dotattn.positional_semantic.problem import Problem

    readme_example("erm-restarts", "--d 1000 --alpha 2 --teacher-rank 2 --sector semantic --random 12 --semantic 12")
    config = RestartConfig(d=1000, alpha=2.0, seeds=(0, 1), starts=("random",) * 12 + ("semantic",) * 12)
    bound, typical = restart_seconds(Problem(omega=0.3, teacher_rank=2), config)
    return start_line_words("erm-restarts", 48, "runs", bound, RESTART_COST, typical=typical)


def estimate_aim(estimator: str) -> str:
    from dotattn.aim.algo_study import AMP_COST, GD_COST, GD_START, StudySpec, run_seconds
    from dotattn.aim.amp import AMPConfig
    from dotattn.aim.gd import GDConfig

    if estimator == "amp":
        readme_example(
            "aim amp", "--d 100 --rho 0.5 --tokens 2 --channel softmax --alpha 0.05,0.1,0.15 --seeds 8 --out"
        )
        spec, config, cost, threads = StudySpec(100, 0.5, 2, (0.05, 0.1, 0.15), seeds=8), AMPConfig(), AMP_COST, 1
    else:
        readme_example(
            "aim gd", "--d 40 --rho 0.5 --tokens 2 --channel softmax --alpha 0.05,0.1,0.2 --seeds 8 --inits 4 --out"
        )
        spec, config, cost, threads = StudySpec(40, 0.5, 2, (0.05, 0.1, 0.2), seeds=8), GDConfig(inits=4), GD_COST, 2
    total = len(spec.alphas) * spec.seeds  # GD: torch's default of one thread per core
    fixed = GD_START if estimator == "gd" else 0.0
    return start_line_words(
        f"aim {estimator}", total, "runs", run_seconds(spec, config, estimator), cost, threads, fixed=fixed
    )


def estimate_paths_sample() -> str:
    from dotattn.paths.sampler import NUTS_COST, SAMPLER_START, SamplerConfig, chain_seconds

    readme_example("paths sample", "--task markov --N 10 --chains 4 --warmup 300 --draws 300 --out")
    per_chain = chain_seconds(SamplerConfig(chains=4, warmup=300, draws=300), 100, 10.0)  # P = 100: the default
    return start_line_words("paths sample", 4, "chains", per_chain, NUTS_COST, fixed=SAMPLER_START)


@pytest.mark.parametrize(
    "row, estimate",
    [
        ("`phase-diagram --omega 0.1,0.3 …`", estimate_phase_diagram),
        ("`train-erm --d 1000 …`", estimate_train_erm),
        ("`erm-restarts --d 1000 …`", estimate_erm_restarts),
        ("`aim amp --d 100 …`", lambda: estimate_aim("amp")),
        ("`aim gd --d 40 …`", lambda: estimate_aim("gd")),
        ("`paths sample --task markov --N 10 …`", estimate_paths_sample),
    ],
)
def test_cli_doc_quotes_the_start_line_estimates(row, estimate):
    """docs/cli.md's table of the README examples quotes, beside each measured time, what the start line says on
    a quiet machine, computed here by the functions the command calls."""
    line = next(ln for ln in CLI_DOC.splitlines() if ln.startswith(f"| {row} |"))
    assert f"(start line: {estimate()})" in line, (line, estimate())


def test_benchmarks_readme_quotes_the_committed_estimate_ratios():
    """benchmarks/README.md's estimate / measured per command, and which are outside 1.5x, are those of
    benchmarks/results/estimates.json, which was made from a clean tree."""
    made = json.loads((ROOT / "benchmarks" / "results" / "estimates.json").read_text())
    assert not made["git_commit"].endswith("-dirty")
    quoted = ", ".join(f"{c['command']} {c['ratio']:.2f}" for c in made["cases"])
    load = made["load"]
    before, after = load["before"]["one_minute"], load["after"]["one_minute"]
    said = f"Estimate / measured in the committed file (nice {load['nice']}, load average {before:.1f} → {after:.1f}"
    assert said in flat(BENCHMARKS), said
    outside = [c["command"] for c in made["cases"] if not c["within_1.5x"]]
    verdict = "all within 1.5×" if not outside else "outside 1.5×: " + ", ".join(outside)
    assert f"{quoted}; {verdict}." in flat(BENCHMARKS), (quoted, verdict)
