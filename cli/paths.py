"""``dotattn paths``: the finite-width theory of multi-head, multi-layer attention (attention paths):
``theory`` (saddle point, GP limit, figures) and ``sample`` (NUTS, the ``paths`` extra)."""

from __future__ import annotations

import contextlib
import importlib.util
import signal
import sys
from pathlib import Path
from typing import Callable, Iterator

import click

from dotattn.cli.main import cli, missing_extra
from dotattn.cli.options import command_line, output_folder, parse_grid
from dotattn.core.validation import ParameterError


@cli.group("paths")
def paths() -> None:
    """Attention paths: finite-width Bayesian theory of multi-head, multi-layer attention (theory, sample, images)."""


def task_options(func: Callable) -> Callable:
    """--task and the Markov task's parameters."""
    opts = [
        click.option("--task", type=str, default="markov", show_default=True, help="Task: markov."),
        click.option("--variant", type=str, default="4paths", show_default=True,
                     help="4paths (layer 2: uniform + random head) or 2paths (layer 2: uniform head only)."),
        click.option("--noise-perp", type=float, default=1.0, show_default=True,
                     help="Out-of-plane token noise sigma_perp, in [0, 100] (5 in the 2-path study)."),
        click.option("--P", "P", type=int, default=100, show_default=True, help="Training sequences (even), in [2, 20000]."),
        click.option("--P-test", "P_test", type=int, default=1000, show_default=True,
                     help="Test sequences (even), in [2, 100000]."),
        click.option("--T", "T", type=int, default=30, show_default=True, help="Tokens per sequence (BOS not counted), in [2, 1000]."),
        click.option("--beta", type=float, default=10.0, show_default=True, help="Inverse temperature of the heads, in [0, 1000]."),
        click.option("--seed", type=int, default=0, show_default=True, help="Seed of the data and the random heads, >= 0."),
        click.option("--temperature", type=float, default=0.01, show_default=True,
                     help="Posterior temperature, in [1e-8, 1e4]."),
        click.option("--sigma2", type=float, default=1.0, show_default=True,
                     help="Prior variance of every weight, in [1e-4, 1e4]."),
    ]
    for opt in reversed(opts):
        func = opt(func)
    return func


def _task(task: str, variant: str, noise_perp: float, P: int, P_test: int, T: int, beta: float, seed: int):
    from dotattn.paths.task import TASKS, MarkovTask

    if task not in TASKS:
        raise ParameterError(f"task must be one of {', '.join(TASKS)}, got {task!r}")
    return MarkovTask(T=T, P=P, P_test=P_test, noise_perp=noise_perp, beta=beta, variant=variant, seed=seed)


@paths.command("theory", short_help="Saddle point U(N), GP limit, accuracy and loss, head scores.")
@task_options
@click.option("--N", "N", multiple=True, default=("10,30,50,100,300,500,1000",), show_default=True,
              help="Widths: comma lists or start:stop:count ranges, each in [1, 1e12].")
@click.option("--subsets", type=str, default="all,good,good+denoising", show_default=True,
              help="Networks solved: all, good (good path only), good+denoising.")
@click.option("--sampled", multiple=True, type=click.Path(file_okay=False),
              help="Folders written by `dotattn paths sample` on the same task (repeatable).")
@click.option("--out", type=click.Path(file_okay=False), required=True,
              help="Output folder (points.csv, heads.csv, alignment.csv, summary.json, figures).")
@click.option("--quiet", is_flag=True, help="No progress lines.")
def theory(task: str, variant: str, noise_perp: float, P: int, P_test: int, T: int, beta: float, seed: int,
           temperature: float, sigma2: float, N: tuple[str, ...], subsets: str, sampled: tuple[str, ...], out: str,
           quiet: bool) -> None:
    """The saddle point U(N) of the action, the GP limit, accuracy and loss, head scores and pruning.

    For each width and network (head subset) minimises S(U) = entropy + alpha * energy and writes the
    mean predictor's test accuracy and loss, U, head scores with pruning, kernel-label alignments and
    figures; --sampled adds NUTS runs (accuracy, U, z-scores, diagnostics) to summary.json.
    """
    from dotattn.paths.study import StudyConfig, read_sample_run, run_theory_study, write_theory_study

    tk = _task(task, variant, noise_perp, P, P_test, T, beta, seed)
    widths = tuple(parse_grid("N", N))
    names = tuple(s.strip() for s in subsets.split(",") if s.strip())
    config = StudyConfig(task=tk, widths=widths, temperature=temperature, sigma2=sigma2, subsets=names)
    samples = [read_sample_run(d, config) for d in sampled]
    from dotattn.core.resources import check_memory
    from dotattn.paths.data import path_data_bytes

    # the kernels of every subset and the solver's and predictor's P x P and P_test x P arrays beside the data
    n_kernel = 16 * (tk.P ** 2 + tk.P_test * tk.P)
    check_memory(path_data_bytes(tk) + 8 * (n_kernel + 10 * tk.P ** 2 + 3 * tk.P_test * tk.P),
                 f"paths theory at P = {tk.P}, P_test = {tk.P_test}, T = {tk.T}", "choose a smaller P, P_test or T")
    say = None if quiet else (lambda line: click.echo(line, err=True))
    with _interruption("paths theory"), output_folder(out, "paths theory", "paths-theory", config.to_dict()) as folder:
        study = run_theory_study(config, samples, progress=say)
        write_theory_study(study, folder, command_line())
    if not quiet:
        click.echo(f"wrote {Path(folder) / 'summary.json'} ({study.seconds:.1f} s)")


@contextlib.contextmanager
def _interruption(label: str) -> Iterator[None]:
    """SIGINT/SIGTERM (:class:`dotattn.core.runner.Interrupted`, raised inside :func:`output_folder` between
    two Python steps of this process; the sampler runs in a process of its own) end the command with one
    line and exit status 128 + signal, after the folder was cleaned up and unlocked."""
    from dotattn.core.runner import Interrupted

    try:
        yield
    except Interrupted as err:
        raise Interrupted(err.signum, err.detail, f"{label}: interrupted ({signal.Signals(err.signum).name}); "
                                                  f"nothing was written") from None


@paths.command("sample", short_help="NUTS samples of the posterior: U, accuracy and loss against the theory.")
@task_options
@click.option("--N", "N", type=float, default=10, show_default=True,
              help="Width N, an integer in [1, 200] ([1, 1e6] with --collapsed).")
@click.option("--collapsed", is_flag=True,
              help="Sample the order parameters (U_1, ..., U_L, U_a) of the exact collapsed posterior instead of "
                   "the weights: same posterior of U, a chain whose dimension does not grow with N.")
@click.option("--chains", type=int, default=4, show_default=True, help="NUTS chains (run one after the other), in [1, 64].")
@click.option("--warmup", type=int, default=300, show_default=True, help="Warm-up steps per chain, in [1, 1e5].")
@click.option("--draws", type=int, default=300, show_default=True, help="Kept draws per chain, in [4, 1e5].")
@click.option("--target-accept", type=float, default=0.8, show_default=True, help="NUTS target acceptance, in (0, 1).")
@click.option("--max-tree-depth", type=int, default=10, show_default=True, help="NUTS maximum tree depth, in [1, 15].")
@click.option("--sampler-seed", type=int, default=0, show_default=True, help="Seed of the chains, >= 0.")
@click.option("--out", type=click.Path(file_okay=False), required=True,
              help="Output folder (sample.json, U_draws.csv, sample.png).")
@click.option("--quiet", is_flag=True, help="No progress and no table.")
def sample(task: str, variant: str, noise_perp: float, P: int, P_test: int, T: int, beta: float, seed: int,
           temperature: float, sigma2: float, N: float, chains: int, warmup: int, draws: int, target_accept: float,
           max_tree_depth: int, sampler_seed: int, out: str, quiet: bool, collapsed: bool = False) -> None:
    """NUTS samples of the posterior (float64, several chains): U, accuracy and loss against the theory.

    The read-in weights are integrated out exactly; the others are sampled (or, with --collapsed,
    the nested Wishart chain of the order parameters times the Gaussian marginal likelihood). Writes R-hat, ESS and
    divergences, the sampled U with its Monte-Carlo errors, the theory's U and the per-entry z-scores.
    Needs the paths extra (pip install "dotattn[paths]").
    """
    from dotattn.paths.sampler import SamplerConfig
    from dotattn.paths.theory import PathsModel

    tk = _task(task, variant, noise_perp, P, P_test, T, beta, seed)
    heads = (2, 2) if tk.variant == "4paths" else (2, 1)
    model = PathsModel(N=N, temperature=temperature, sigma2=sigma2, heads=heads)
    config = SamplerConfig(chains=chains, warmup=warmup, draws=draws, target_accept=target_accept,
                           max_tree_depth=max_tree_depth, seed=sampler_seed)
    if collapsed:
        from dotattn.paths.collapsed import check_collapsed
        check_collapsed(model, config)
    else:
        config.check(model)
    for name in ("jax", "numpyro"):  # present, but not imported here: JAX runs in the sampler's own process
        if importlib.util.find_spec(name) is None:
            raise missing_extra("paths sample", ModuleNotFoundError(name=name))
    from dotattn.core.resources import check_memory
    from dotattn.core.runner import run_isolated
    from dotattn.paths.data import markov_path_data, path_data_bytes
    from dotattn.paths.sampler import run_nuts, sampled_evaluation
    from dotattn.paths.study import sample_parameters, write_sample_run
    from dotattn.paths.theory import minimise_action

    # beside the data: the sampler process's copy of the kernels, the kernels as JAX arrays, their gradient
    # and the P x P matrices of each leapfrog step
    check_memory(path_data_bytes(tk) + 8 * (4 * 16 * tk.P ** 2 + 20 * tk.P ** 2),
                 f"paths sample at P = {tk.P}, P_test = {tk.P_test}, T = {tk.T}", "choose a smaller P, P_test or T")
    made_for = sample_parameters(model, tk, config)
    with _interruption("paths sample"), output_folder(out, "paths sample", "paths-sample", made_for) as folder:
        data = markov_path_data(tk)
        theory_result = minimise_action(data.C_train, data.y_train, model)
        # NUTS in a process of its own: a signal stops it between two Python steps here, never inside JAX
        if collapsed:
            from dotattn.paths.collapsed import run_collapsed
            result = run_isolated(run_collapsed, data.C_train, data.y_train, model, config, None)
        else:
            result = run_isolated(run_nuts, data, model, config, not quiet and sys.stderr.isatty())
        evaluation = sampled_evaluation(result, data, model)
        s = write_sample_run(folder, result, data, model, tk, config, theory_result, evaluation, command_line())
    if not quiet:
        d = s["diagnostics"]
        click.echo(f"N={N:g}: accuracy sampled {s['accuracy_sampled']:.4f} +- {s['accuracy_error']:.4f}, theory "
                   f"{s['accuracy_theory']:.4f}; R-hat max {d['rhat_max']:.4f}, ESS min {d['ess_min']:.0f}, "
                   f"divergences {d['divergences']} ({s['status']}, {result.seconds:.0f} s)")
        click.echo(f"wrote {Path(folder) / 'sample.json'}")


from dotattn.cli import paths_images  # noqa: E402,F401  (registers `dotattn paths images` on the group above)
