"""``dotattn paths``: the finite-width theory of multi-head, multi-layer attention (attention paths):
``theory`` (saddle point, GP limit, figures), ``sample`` (NUTS, the ``paths`` extra) and ``images``
(one-shot image episodes: Omniglot in distribution, FashionMNIST and digits out of distribution, a
network with queries and keys trained by gradient descent, theory vs GP limit, head scores, pruning)."""

from __future__ import annotations

import contextlib
import importlib.util
import math
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import click

from dotattn.core.validation import ParameterError

from .main import cli, missing_extra
from .options import command_line, output_folder, parse_grid


@cli.group("paths")
def paths() -> None:
    """Attention paths: finite-width Bayesian theory of multi-head, multi-layer attention (theory, sample, images)."""


def _require(command: str, *modules: str) -> None:
    """End ``command`` with the line naming its extra if one of the optional ``modules`` is not installed
    (checked without importing them)."""
    for name in modules:
        if importlib.util.find_spec(name) is None:
            err = ModuleNotFoundError(f"No module named {name!r}", name=name)
            raise missing_extra(command, err) or err


def task_options(func: Callable) -> Callable:
    """--task and the Markov task's parameters."""
    opts = [
        click.option("--task", type=str, default="markov", show_default=True, help="Task: markov."),
        click.option(
            "--variant",
            type=str,
            default="4paths",
            show_default=True,
            help="4paths (layer 2: uniform + random head) or 2paths (layer 2: uniform head only).",
        ),
        click.option(
            "--noise-perp",
            type=float,
            default=1.0,
            show_default=True,
            help="Out-of-plane token noise sigma_perp, in [0, 100] (5 in the 2-path study).",
        ),
        click.option(
            "--P", "P", type=int, default=100, show_default=True, help="Training sequences (even), in [2, 20000]."
        ),
        click.option(
            "--P-test",
            "P_test",
            type=int,
            default=1000,
            show_default=True,
            help="Test sequences (even), in [2, 100000].",
        ),
        click.option(
            "--T",
            "T",
            type=int,
            default=30,
            show_default=True,
            help="Tokens per sequence (BOS not counted), in [2, 1000].",
        ),
        click.option(
            "--beta",
            type=float,
            default=10.0,
            show_default=True,
            help="Inverse temperature of the heads, in [0, 1000].",
        ),
        click.option(
            "--seed", type=int, default=0, show_default=True, help="Seed of the data and the random heads, >= 0."
        ),
        click.option(
            "--temperature", type=float, default=0.01, show_default=True, help="Posterior temperature, in [1e-8, 1e4]."
        ),
        click.option(
            "--sigma2",
            type=float,
            default=1.0,
            show_default=True,
            help="Prior variance of every weight, in [1e-4, 1e4].",
        ),
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
@click.option(
    "--N",
    "N",
    multiple=True,
    default=("10,30,50,100,300,500,1000",),
    show_default=True,
    help="Widths: comma lists or start:stop:count ranges, each in [1, 1e12].",
)
@click.option(
    "--subsets",
    type=str,
    default="all,good,good+denoising",
    show_default=True,
    help="Networks solved: all, good (good path only), good+denoising.",
)
@click.option(
    "--outputs",
    type=int,
    default=1,
    show_default=True,
    help="Outputs M of the network, 1 or 2: 1 fits the label +-1; 2 fits one-hot targets of the two classes "
    "(the theory with M outputs: U over paths x outputs; accuracy of the argmax).",
)
@click.option(
    "--sampled",
    multiple=True,
    type=click.Path(file_okay=False),
    help="Folders written by `dotattn paths sample` on the same task (repeatable).",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False),
    required=True,
    help="Output folder (points.csv, heads.csv, alignment.csv, summary.json, figures).",
)
@click.option("--quiet", is_flag=True, help="No progress lines.")
def theory(
    task: str,
    variant: str,
    noise_perp: float,
    P: int,
    P_test: int,
    T: int,
    beta: float,
    seed: int,
    temperature: float,
    sigma2: float,
    N: tuple[str, ...],
    subsets: str,
    outputs: int,
    sampled: tuple[str, ...],
    out: str,
    quiet: bool,
) -> None:
    """The saddle point U(N) of the action, the GP limit, accuracy and loss, head scores and pruning.

    For each width and network (head subset) minimises S(U) = entropy + alpha * energy and writes the
    mean predictor's test accuracy and loss, U, head scores with pruning, kernel-label alignments and
    figures; --sampled adds NUTS runs (accuracy, U, z-scores, diagnostics) to summary.json. --outputs 2 solves
    the theory with two outputs on one-hot targets of the two classes.
    """
    from dotattn.paths.study import StudyConfig, read_sample_run, run_theory_study, write_theory_study

    tk = _task(task, variant, noise_perp, P, P_test, T, beta, seed)
    widths = tuple(parse_grid("N", N))
    names = tuple(s.strip() for s in subsets.split(",") if s.strip())
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise ParameterError(f"subsets: {dup!r} is given twice; give each network once")
    config = StudyConfig(task=tk, widths=widths, temperature=temperature, sigma2=sigma2, subsets=names, outputs=outputs)
    if sampled and config.outputs != 1:
        raise ParameterError("--sampled runs have one output; give them with --outputs 1")
    samples = [read_sample_run(d, config) for d in sampled]
    from dotattn.core.resources import check_memory
    from dotattn.paths.data import path_data_bytes

    # the kernels of every subset and the solver's and predictor's P x P and P_test x P arrays beside the data
    # (M outputs: M P x M P and M P_test x M P)
    M2 = config.outputs**2
    n_kernel = 16 * (tk.P**2 + tk.P_test * tk.P)
    check_memory(
        path_data_bytes(tk) + 8 * (n_kernel + M2 * (10 * tk.P**2 + 3 * tk.P_test * tk.P)),
        f"paths theory at P = {tk.P}, P_test = {tk.P_test}, T = {tk.T}",
        "choose a smaller P, P_test or T",
    )
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
        raise Interrupted(
            err.signum, err.detail, f"{label}: interrupted ({signal.Signals(err.signum).name}); nothing was written"
        ) from None


@paths.command("sample", short_help="NUTS samples of the posterior: U, accuracy and loss against the theory.")
@task_options
@click.option(
    "--N",
    "N",
    type=float,
    default=10,
    show_default=True,
    help="Width N, an integer in [1, 200] ([1, 1e6] with --collapsed).",
)
@click.option(
    "--collapsed",
    is_flag=True,
    help="Sample the order parameters (U_1, ..., U_L, U_a) of the exact collapsed posterior instead of "
    "the weights: same posterior of U, a chain whose dimension does not grow with N.",
)
@click.option(
    "--chains", type=int, default=4, show_default=True, help="NUTS chains (run one after the other), in [1, 64]."
)
@click.option("--warmup", type=int, default=300, show_default=True, help="Warm-up steps per chain, in [1, 1e5].")
@click.option("--draws", type=int, default=300, show_default=True, help="Kept draws per chain, in [4, 1e5].")
@click.option("--target-accept", type=float, default=0.8, show_default=True, help="NUTS target acceptance, in (0, 1).")
@click.option("--max-tree-depth", type=int, default=10, show_default=True, help="NUTS maximum tree depth, in [1, 15].")
@click.option("--sampler-seed", type=int, default=0, show_default=True, help="Seed of the chains, >= 0.")
@click.option(
    "--processes",
    type=int,
    default=1,
    show_default=True,
    help="With --collapsed: processes that share the chains (all in step, one block of draws at a time; each "
    "holds a copy of the kernels), in [1, chains].",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False),
    required=True,
    help="Output folder (sample.json, U_draws.csv, sample.png).",
)
@click.option("--quiet", is_flag=True, help="No progress and no table.")
def sample(
    task: str,
    variant: str,
    noise_perp: float,
    P: int,
    P_test: int,
    T: int,
    beta: float,
    seed: int,
    temperature: float,
    sigma2: float,
    N: float,
    chains: int,
    warmup: int,
    draws: int,
    target_accept: float,
    max_tree_depth: int,
    sampler_seed: int,
    out: str,
    quiet: bool,
    collapsed: bool = False,
    processes: int = 1,
) -> None:
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
    config = SamplerConfig(
        chains=chains,
        warmup=warmup,
        draws=draws,
        target_accept=target_accept,
        max_tree_depth=max_tree_depth,
        seed=sampler_seed,
    )
    if collapsed:
        from dotattn.paths.collapsed import check_collapsed, check_processes

        check_collapsed(model, config)
        check_processes(processes, config.chains)
    else:
        config.check(model)
        if processes != 1:
            raise ParameterError(
                f"processes must be 1 without --collapsed (the chains run one after the other), got {processes}"
            )
    _require("paths sample", "jax", "numpyro")  # present, but not imported here: JAX runs in the sampler's own process
    from dotattn.core.resources import check_memory
    from dotattn.core.runner import run_isolated
    from dotattn.paths.data import markov_path_data, path_data_bytes
    from dotattn.paths.sampler import run_nuts, sampled_evaluation
    from dotattn.paths.study import sample_parameters, write_sample_run
    from dotattn.paths.theory import minimise_action

    # beside the data: the sampler process's copy of the kernels, the kernels as JAX arrays, their gradient
    # and the P x P matrices of each leapfrog step
    check_memory(
        path_data_bytes(tk) + 8 * (4 * 16 * tk.P**2 + 20 * tk.P**2),
        f"paths sample at P = {tk.P}, P_test = {tk.P_test}, T = {tk.T}",
        "choose a smaller P, P_test or T",
    )
    made_for = sample_parameters(model, tk, config)
    from dotattn.core.progress import CommandProgress, UnitReport
    from dotattn.core.runner import Interrupted
    from dotattn.paths.sampler import NUTS_COST, SAMPLER_START, cached_chains, chain_seconds

    with output_folder(out, "paths sample", "paths-sample", made_for) as folder:
        cache = Path(folder) / "cache"
        kind = "collapsed" if collapsed else "weights"
        cached = 0 if collapsed else cached_chains(cache, made_for, config)
        progress = CommandProgress("paths sample", config.chains, "chains", cached=cached, quiet=quiet)
        progress.start(
            f"NUTS over the {kind} at N = {N:g}, {config.warmup} warm-up + {config.draws} draws per chain, "
            f"P = {tk.P}, T = {tk.T}" + ("" if collapsed else "; each finished chain is cached"),
            progress.estimate_line(chain_seconds(config, tk.P, N, collapsed), NUTS_COST, 1, 1, fixed=SAMPLER_START),
            str(folder),
        )
        try:
            data = markov_path_data(tk)
            theory_result = minimise_action(data.C_train, data.y_train, model)
            # NUTS in a process of its own: a signal stops it between two Python steps here, never inside JAX
            if collapsed:
                from dotattn.paths.collapsed import run_collapsed

                result = run_isolated(
                    run_collapsed, data.C_train, data.y_train, model, config, None, None, False, processes
                )
                progress.unit_done(config.chains)
            else:
                report = UnitReport("paths sample", config.chains, "chains", cached=cached, quiet=quiet)
                result = run_isolated(
                    run_nuts, data, model, config, not quiet and sys.stderr.isatty(), cache, made_for, report
                )
        except Interrupted as err:
            kept = 0 if collapsed else cached_chains(cache, made_for, config)
            raise Interrupted(
                err.signum,
                err.detail,
                f"paths sample: interrupted ({signal.Signals(err.signum).name}); "
                + (
                    f"the {kept} chains finished are kept in {cache}, run the same command again to resume"
                    if kept
                    else "no chain finished, nothing was kept"
                ),
            ) from None
        evaluation = sampled_evaluation(result, data, model)
        s = write_sample_run(folder, result, data, model, tk, config, theory_result, evaluation, command_line())
    if not quiet:
        d = s["diagnostics"]
        ess = (
            f"{d['ess_min']:.0f}"
            if math.isfinite(d["ess_min"])
            else f"not computable ({'one chain' if d['chains'] < 2 else 'an entry has no positive estimate'})"
        )
        click.echo(
            f"N={N:g}: accuracy sampled {s['accuracy_sampled']:.4f} +- {s['accuracy_error']:.4f}, theory "
            f"{s['accuracy_theory']:.4f}; R-hat max {d['rhat_max']:.4f}, ESS min {ess}, "
            f"divergences {d['divergences']} ({s['status']}, {result.seconds:.0f} s)"
        )
        click.echo(f"wrote {Path(folder) / 'sample.json'}")


@paths.command("images", short_help="One-shot images: trained queries and keys, theory vs GP limit, head pruning.")
@click.option(
    "--omniglot",
    type=str,
    required=True,
    help="Omniglot images: a .zip, a folder of zips, or the extracted <set>/<alphabet>/characterNN/*.png "
    "layout (a SHA256SUMS file beside the zips is checked).",
)
@click.option(
    "--fashion-mnist",
    "fashion_mnist",
    type=str,
    default="/usr/share/datasets/fashion-mnist",
    show_default=True,
    help="Folder with the four FashionMNIST IDX files (plain or .gz).",
)
@click.option(
    "--ways",
    type=int,
    default=2,
    show_default=True,
    help="Classes per episode, in [2, 10]: 2 is the two-way task (one output, label +-1); N >= 3 has N supports, "
    "N one-hot outputs and the accuracy of the argmax (FashionMNIST and digits: classes 0..N-1).",
)
@click.option(
    "--P", "P", type=int, default=600, show_default=True, help="Training episodes of the theory, in [10, 5000]."
)
@click.option(
    "--P-validation",
    "P_validation",
    type=int,
    default=500,
    show_default=True,
    help="Validation episodes (validation characters: temperature choice, early stopping), >= 10.",
)
@click.option("--P-test", "P_test", type=int, default=1000, show_default=True, help="Test episodes, >= 10.")
@click.option(
    "--P-ood",
    "P_ood",
    type=int,
    default=1000,
    show_default=True,
    help="Episodes of each out-of-distribution set, >= 10.",
)
@click.option(
    "--N",
    "N",
    multiple=True,
    default=("10,20,50,100,200,500,1000,10000",),
    show_default=True,
    help="Widths of the theory: comma lists or start:stop:count ranges, each in [1, 1e12].",
)
@click.option(
    "--temperatures",
    multiple=True,
    default=("0.01,0.1,1",),
    show_default=True,
    help="Temperature grid (chosen per width on the validation episodes), each in [1e-8, 1e4].",
)
@click.option(
    "--theory-tol",
    type=float,
    default=1e-8,
    show_default=True,
    help="Relative stationarity at which a saddle point counts as converged, in [1e-14, 1e-2].",
)
@click.option(
    "--gd-width", type=int, default=32, show_default=True, help="Width N of the trained network, in [2, 1024]."
)
@click.option("--qk-dim", type=int, default=16, show_default=True, help="Query/key dimension G, in [1, 256].")
@click.option("--lr", type=float, default=3e-3, show_default=True, help="Adam learning rate, in (0, 1].")
@click.option("--batch", type=int, default=64, show_default=True, help="Episodes per Adam step, in [1, 4096].")
@click.option(
    "--epoch-episodes",
    type=int,
    default=6400,
    show_default=True,
    help="Fresh training episodes per epoch, in [1, 1e6].",
)
@click.option("--max-epochs", type=int, default=60, show_default=True, help="Most epochs, in [1, 1e4].")
@click.option(
    "--patience",
    type=int,
    default=10,
    show_default=True,
    help="Stop after this many epochs without a better validation accuracy, in [1, 1e4].",
)
@click.option(
    "--sample-N",
    "sample_N",
    type=int,
    default=10,
    show_default=True,
    help="Width of the posterior-sampling check (NUTS), in [0, 200]; 0: no check.",
)
@click.option(
    "--sample-P",
    "sample_P",
    type=int,
    default=None,
    help="Training episodes of the sampling check (the first of the theory's), in [10, 2000] and at most "
    "--P (default: 100, or --P if smaller).",
)
@click.option("--sample-chains", type=int, default=2, show_default=True, help="NUTS chains, in [1, 64].")
@click.option("--sample-warmup", type=int, default=200, show_default=True, help="NUTS warm-up steps per chain.")
@click.option("--sample-draws", type=int, default=200, show_default=True, help="NUTS kept draws per chain, >= 4.")
@click.option(
    "--sample-tree-depth", type=int, default=10, show_default=True, help="NUTS maximum tree depth, in [1, 15]."
)
@click.option(
    "--sample-collapsed",
    is_flag=True,
    help="Sampling check on the exact collapsed posterior of the order parameters (U_1, U_2, U_a) "
    "instead of the weights: same posterior of U, a chain of fixed dimension.",
)
@click.option(
    "--bootstrap",
    type=int,
    default=1000,
    show_default=True,
    help="Bootstrap resamples of the test episodes for the rank-correlation interval, in [10, 1e5].",
)
@click.option("--split-seed", type=int, default=0, show_default=True, help="Seed of the character split, >= 0.")
@click.option(
    "--seed",
    type=int,
    default=0,
    show_default=True,
    help="Seed of the episodes, the network's initial weights and the sampler, >= 0.",
)
@click.option(
    "--train-seed",
    type=int,
    default=None,
    help="Seed of the network's initial weights and of its training episodes, >= 0 (default: --seed); a "
    "sample of trained networks varies it with every other option fixed.",
)
@click.option(
    "--network",
    "network_file",
    type=click.Path(dir_okay=False),
    default=None,
    help="A gd_network.npz written by another paths images run with the same network and data settings: used "
    "without training (verified against its folder's manifest.json, or its own metadata; refused if made for other "
    "settings) and recorded in provenance.",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False),
    required=True,
    help="Output folder (summary.json, CSVs, gd_network.npz, figures, manifest.json).",
)
@click.option("--quiet", is_flag=True, help="No progress lines.")
def images(
    omniglot: str,
    fashion_mnist: str,
    ways: int,
    P: int,
    P_validation: int,
    P_test: int,
    P_ood: int,
    N: tuple[str, ...],
    temperatures: tuple[str, ...],
    theory_tol: float,
    gd_width: int,
    qk_dim: int,
    lr: float,
    batch: int,
    epoch_episodes: int,
    max_epochs: int,
    patience: int,
    sample_N: int,
    sample_P: int,
    sample_chains: int,
    sample_warmup: int,
    sample_draws: int,
    sample_tree_depth: int,
    bootstrap: int,
    split_seed: int,
    seed: int,
    train_seed: int | None,
    out: str,
    quiet: bool,
    sample_collapsed: bool = False,
    network_file: str | None = None,
) -> None:
    """One-shot image classification: trained queries and keys, theory against its GP limit, head pruning.

    Splits Omniglot by character (train / validation / test), trains the attention-paths network with
    learned queries and keys (2 layers x 4 heads) by Adam with early stopping on the validation
    characters, then, with its queries and keys frozen, solves the finite-width theory per width and
    temperature, keeps per width the temperature best on the validation episodes, and reports
    accuracy and loss on the test characters, FashionMNIST and digits; head scores from U at the
    smallest width against the accuracy drops of pruning each head of the trained network. With
    --ways N >= 3 every episode has N supports and the network and the theory N outputs. A
    finished training is reused from the output folder; an interrupted one resumes; --network uses a
    network trained by another run instead. Needs torch
    (erm extra), scikit-learn (images extra) and, for the sampling check, NumPyro (paths extra).
    """
    from dotattn.paths.images_gd import GDConfig
    from dotattn.paths.images_study import ImageStudyConfig

    gd = GDConfig(
        N=gd_width,
        qk_dim=qk_dim,
        lr=lr,
        batch=batch,
        epoch_episodes=epoch_episodes,
        max_epochs=max_epochs,
        patience=patience,
        seed=seed if train_seed is None else train_seed,
    )
    config = ImageStudyConfig(
        omniglot=omniglot,
        fashion_mnist=fashion_mnist,
        gd=gd,
        ways=ways,
        P=P,
        P_validation=P_validation,
        P_test=P_test,
        P_ood=P_ood,
        widths=tuple(parse_grid("N", N)),
        temperatures=tuple(parse_grid("temperatures", temperatures)),
        theory_tol=theory_tol,
        seed=seed,
        split_seed=split_seed,
        bootstrap=bootstrap,
        sample_N=sample_N,
        sample_P=min(100, P) if sample_P is None else sample_P,
        sample_chains=sample_chains,
        sample_warmup=sample_warmup,
        sample_draws=sample_draws,
        sample_tree_depth=sample_tree_depth,
        sample_collapsed=sample_collapsed,
    )
    _require("paths images", "torch")
    if sample_N:
        _require("paths images (sampling check; --sample-N 0 skips it)", "jax", "numpyro")
    from dotattn.paths.images_study import load_image_data, read_network_file, run_image_study, write_image_study

    network = None if network_file is None else read_network_file(network_file, config)  # refused before any folder
    say = None if quiet else (lambda line: click.echo(line, err=True))
    data = load_image_data(config)  # refuses bad data before any folder exists
    if say:
        c = data.counts()
        say(f"data: {c['characters']} characters, images {c['images']}, episodes {c['episodes']}")
    from dotattn.core.runner import Interrupted

    with output_folder(out, "paths images", "paths-images") as folder:
        from dotattn.core.progress import CommandProgress
        from dotattn.paths.images_study import IMAGES_COST, WAYS_COST, study_seconds

        saddles = len(config.widths) * len(config.temperatures)
        start = CommandProgress("paths images", 1, "study", quiet=quiet)
        start.start(
            f"train the query-key network (at most {config.gd.max_epochs} epochs), {saddles} saddle points "
            f"({len(config.widths)} widths x {len(config.temperatures)} temperatures) at P = {config.P}, head pruning"
            + (
                f", a sampling check ({config.sample_chains} chains at N = {config.sample_N:g})"
                if config.sample_N
                else ""
            ),
            start.estimate_line(
                study_seconds(config, gd_reused=network is not None), IMAGES_COST if config.ways == 2 else WAYS_COST
            ),
            str(folder),
            first_line=False,  # progress: one line per stage below
        )
        try:
            study = run_image_study(config, data, Path(folder), progress=say, network=network)
            write_image_study(study, Path(folder), command_line())
        except Interrupted as err:
            raise Interrupted(
                err.signum,
                err.detail,
                "paths images: interrupted; the same command resumes the "
                "training from its checkpoint (or reuses the trained network) in "
                f"{folder}",
            ) from None
    if not quiet:
        click.echo(f"wrote {Path(folder) / 'summary.json'} ({study.timings['total_seconds']:.0f} s)")


@paths.command("networks", short_help="The two image claims over many trained networks (paths images folders).")
@click.option(
    "--runs",
    "root",
    required=True,
    type=click.Path(file_okay=False),
    help="A folder holding finished `paths images` folders below it (any layout, e.g. ROOT/w32/seed0/), which "
    "differ only in --train-seed, --gd-width and --qk-dim.",
)
@click.option(
    "--out",
    required=True,
    type=click.Path(file_okay=False),
    help="Output folder (networks.csv, heads.csv, claims.csv, summary.json, figures, a copy of each network's "
    "summary.json, manifest.json).",
)
@click.option("--quiet", is_flag=True, help="No table.")
def networks(root: str, out: str, quiet: bool) -> None:
    """The image claims as distributions over trained networks: per network and set N* (chosen on validation), the
    gain over the GP and the network - theory gap at N*, Spearman's rho of head scores against pruning drops and the
    change when the two lowest-scoring heads are pruned; per set and size mean, se and n, the pooled permutation p of
    the mean rho (1e5 seeded permutations) and the verdicts of the rule in
    results/paths/omniglot_networks/README.md. Every folder is checked against the others and verified before
    anything is written.
    """
    import time

    from dotattn.paths.networks import PERMUTATIONS, analyse
    from dotattn.paths.networks_output import made_for, plan_networks, read_networks, write_networks

    t0 = time.perf_counter()
    plan = plan_networks(root)  # every refusal of mismatched folders, before anything is verified or created
    results, heads = read_networks(plan)  # IntegrityError (one line, exit 2) before OUT exists
    study = analyse(results, heads, PERMUTATIONS)
    params = made_for(plan, PERMUTATIONS)
    with output_folder(out, "paths networks", "paths-networks") as folder:
        summary = write_networks(study, plan, Path(folder), params, command_line(), seconds=time.perf_counter() - t0)
    if quiet:
        return
    claims = summary["claims"]
    click.echo(f"{len(plan.folders)} networks: " + ", ".join(f"width {w} ({q})" for w, q in study.sizes))
    click.echo(f"{'set':>14s} {'width':>6s} {'n':>3s} {'gain':>16s} {'gap':>16s} {'change':>16s} {'rho':>7s} {'p':>8s}")
    for c in study.claims:
        click.echo(
            f"{c.set:>14s} {c.width:6d} {c.n:3d} {_ms(c.gain_mean, c.gain_se):>16s} {_ms(c.gap_mean, c.gap_se):>16s} "
            f"{_ms(c.change_mean, c.change_se):>16s} {c.rho_mean:7.3f} {c.p:8.2g}"
        )
    for width, v in claims["verdicts"].items():
        click.echo(f"width {width}: claim 1 {v['claim1']['outcome']}; claim 2 {v['claim2']['outcome']}")
    click.echo(f"wrote {Path(folder) / 'summary.json'} ({time.perf_counter() - t0:.1f} s)")


def _ms(mean: float, se: float) -> str:
    return f"{mean:+.3f}+-{se:.3f}"
