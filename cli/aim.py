"""``dotattn aim``: Bayes-optimal learning of the attention-indexed model: the state evolution
(``state-evolution``), the algorithms at finite d against it (``amp``, ``gd``) and figures (``figure``).
The commands only parse options and map them onto :mod:`dotattn.aim`; bad input ends with one line and
exit status 2 before anything is computed or created."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import click

from dotattn.core.validation import ParameterError, check_int

from .main import cli
from .options import command_line, output_file, output_folder, parse_grid


@cli.group("aim")
def aim() -> None:
    """Attention-indexed model: Bayes-optimal learning of tied attention from n = alpha d^2 samples
    (state evolution, AMP, GD, figures)."""


@aim.command("state-evolution", short_help="Bayes-optimal MMSE(alpha): state-evolution fixed points, thresholds.")
@click.option("--channel", type=str, default="softmax", show_default=True, help="Output channel: softmax or hardmax.")
@click.option("--rho", type=float, required=True, help="Width ratio rho = r/d, in [1e-4, 1e4].")
@click.option(
    "--tokens", "T", type=int, default=2, show_default=True, help="Tokens T, in [2, 64] (hardmax: T = 2 only)."
)
@click.option(
    "--alpha",
    "alphas",
    multiple=True,
    required=True,
    help="alpha = n/d^2 grid: repeat, comma list or start:stop:count; each in (0, 1e4].",
)
@click.option(
    "--nodes",
    type=int,
    default=None,
    help="Gauss-Legendre nodes per panel of the prior quadrature, in [8, 512] (default 48).",
)
@click.option(
    "--hardmax-nodes",
    type=int,
    default=None,
    help="Nodes per axis of the hardmax q_hat quadrature, in [16, 512] (default 48).",
)
@click.option(
    "--hardmax-derivative",
    type=click.Choice(["gradient", "published"]),
    default="gradient",
    show_default=True,
    help="published: the public script's phi2/Phi2 in place of the gradient of "
    "log Z_out (wrong; only to measure its effect).",
)
@click.option(
    "--json", "as_json", is_flag=True, help="Print one JSON object (points, thresholds) instead of the table."
)
@click.option(
    "--out",
    type=click.Path(file_okay=False),
    default=None,
    help="Output folder: points.csv, summary.json, mmse.png, manifest.json.",
)
@click.option("--quiet", is_flag=True, help="No progress lines (the table of results is still printed).")
def state_evolution(channel, rho, T, alphas, nodes, hardmax_nodes, hardmax_derivative, as_json, out, quiet):
    """MMSE(alpha) of the Bayes-optimal estimator: fixed points of the state evolution and thresholds.

    The prior channel is matrix denoising of S = W W^T/sqrt(r d) (free convolution, quadrature by
    bulk); the output channel is softmax (noiseless: depends on alpha and T only through
    alpha_bar = alpha (T^2 + T - 2), not on beta) or hardmax (T = 2, deterministic quadrature).
    """
    from dotattn.aim.channels import HARDMAX_NODES
    from dotattn.aim.prior import DEFAULT_NODES
    from dotattn.aim.state_evolution import POINT_COLUMNS, check_inputs, check_quadrature, solve_curve, thresholds

    grid = parse_grid("alpha", alphas)
    channel, rho, T, grid = check_inputs(channel, rho, T, grid)
    nodes, hardmax_nodes, hardmax_derivative = check_quadrature(
        channel,
        DEFAULT_NODES if nodes is None else nodes,
        HARDMAX_NODES if hardmax_nodes is None else hardmax_nodes,
        hardmax_derivative,
    )
    from dotattn.core.io import provenance, to_jsonable

    params = {
        "channel": channel,
        "rho": rho,
        "tokens": T,
        "alpha": grid,
        "nodes": nodes,
        "hardmax_nodes": hardmax_nodes,
        "hardmax_derivative": hardmax_derivative,
    }
    say = (
        None
        if (quiet or as_json)
        else (lambda p: click.echo(f"alpha={p.alpha:g}: mmse={p.mmse:.8g} ({p.status}, {p.seconds:.2f} s)", err=True))
    )
    # the folder is opened (checked, locked, refused if it holds another run) before anything is solved
    with (
        output_folder(out, "aim state-evolution", "aim-state-evolution", params)
        if out is not None
        else contextlib.nullcontext()
    ) as folder:
        t0 = time.perf_counter()
        points = solve_curve(
            channel,
            grid,
            rho,
            T,
            progress=say,
            nodes=nodes,
            hardmax_nodes=hardmax_nodes,
            hardmax_derivative=hardmax_derivative,
        )
        seconds = time.perf_counter() - t0
        thr = thresholds(channel, rho, T)
        prov = provenance({**params, "command": command_line()}, seconds=seconds)
        summary = {
            "channel": channel,
            "rho": rho,
            "tokens": T,
            "hardmax_derivative": hardmax_derivative,
            "points": [p.to_row() for p in points],
            "thresholds": thr,
            "provenance": prov,
        }
        if folder is not None:
            from dotattn.aim.plotting import mmse_figure
            from dotattn.core.io import save_figure, write_csv, write_json, write_manifest

            comment = "dotattn aim state-evolution; provenance: " + json.dumps(to_jsonable(prov), separators=(",", ":"))
            write_csv(folder / "points.csv", [p.to_row() for p in points], POINT_COLUMNS, comment=comment)
            write_json(folder / "summary.json", summary)
            fig = mmse_figure([points], thresholds=[thr])
            save_figure(
                fig, folder / "mmse.png", {"command": prov["parameters"]["command"], "git_commit": prov["git_commit"]}
            )
            write_manifest(
                folder,
                ["points.csv", "summary.json", "mmse.png"],
                params,
                command=prov["parameters"]["command"],
                provenance_record=prov,
            )
    if as_json:
        click.echo(json.dumps(to_jsonable(summary), allow_nan=False))
        return
    lines = [
        f"{channel}, rho = {rho:g}, T = {T} ({seconds:.2f} s)",
        f"{'alpha':>12} {'alpha_bar':>12} {'mmse':>14} {'q':>12} {'q_hat':>12} {'uncert.':>9}  status",
    ]
    for p in points:
        lines.append(
            f"{p.alpha:12.6g} {p.alpha_bar:12.6g} {p.mmse:14.9g} {p.q:12.8g} {p.q_hat:12.6g} "
            f"{p.uncertainty:9.1e}  {p.status} ({p.regime})"
        )
    lines.append(
        "thresholds: " + ", ".join(f"{k} = {v:.6g}" if isinstance(v, float) else f"{k} = {v}" for k, v in thr.items())
    )
    if out is not None:
        lines.append(f"wrote {Path(out) / 'summary.json'}")
    click.echo("\n".join(lines))


@aim.command("free-entropy", short_help="Free entropy from both starts, selection, Bayes-optimal test error.")
@click.option("--channel", type=str, default="softmax", show_default=True, help="Output channel: softmax or hardmax.")
@click.option("--rho", type=float, required=True, help="Width ratio rho = r/d, in [1e-4, 1e4].")
@click.option(
    "--tokens", "T", type=int, default=2, show_default=True, help="Tokens T, in [2, 64] (hardmax: T = 2 only)."
)
@click.option(
    "--beta",
    type=float,
    default=1.0,
    show_default=True,
    help="Softmax inverse temperature of the test error, in (0, 1000] (the MMSE does not depend on it).",
)
@click.option(
    "--alpha",
    "alphas",
    multiple=True,
    required=True,
    help="alpha = n/d^2 grid: repeat, comma list or start:stop:count; each in (0, 1e4].",
)
@click.option(
    "--test-samples",
    type=int,
    default=200_000,
    show_default=True,
    help="Monte-Carlo pairs of the Bayes-optimal test error, in [100, 1e7] (hardmax T = 2: closed form).",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False),
    default=None,
    help="Output folder: free_entropy.csv, summary.json, manifest.json.",
)
@click.option("--quiet", is_flag=True, help="No progress lines (the table of results is still printed).")
def free_entropy_command(channel, rho, T, beta, alphas, test_samples, out, quiet):
    """Free entropy along the state evolution from the uninformed (prior mean) and informed (teacher)
    starts, the fixed point selected by the free entropy, and the Bayes-optimal test error there.

    Per alpha two rows (uninformed, informed): the fixed point each start reaches, its MMSE, q, q_hat,
    the free entropy phi, whether it is selected (largest phi) and the number of fixed points on the scan.
    A first-order transition shows as the selected start changing with alpha; a hard region as alpha where
    the uninformed start (what AMP follows) is not selected.
    """
    from dotattn.aim.free_entropy import FREE_ENTROPY_COLUMNS, solve_free_entropy
    from dotattn.aim.state_evolution import check_inputs
    from dotattn.core.validation import check_number

    grid = parse_grid("alpha", alphas)
    channel, rho, T, grid = check_inputs(channel, rho, T, grid)
    beta = check_number("beta", beta, 0.0, True, 1e3, "in (0, 1000]")
    test_samples = check_int("test-samples", test_samples, 100, 10_000_000)
    params = {"channel": channel, "rho": rho, "tokens": T, "beta": beta, "alpha": grid, "test_samples": test_samples}
    with (
        output_folder(out, "aim free-entropy", "aim-free-entropy", params)
        if out is not None
        else contextlib.nullcontext()
    ) as folder:
        t0 = time.perf_counter()
        rows = []
        for a in grid:
            pair = solve_free_entropy(channel, a, rho, T, beta=beta, test_samples=test_samples)
            rows.extend(pair)
            if not quiet:
                u, i = pair
                click.echo(
                    f"alpha={a:g}: mmse {u.mmse:.6g} (uninformed) / {i.mmse:.6g} (informed), phi {u.phi:.8g} / "
                    f"{i.phi:.8g}, {u.fixed_points} fixed point(s) on the scan, {time.perf_counter() - t0:.0f} s",
                    err=True,
                )
        seconds = time.perf_counter() - t0
        hard = [r.alpha for r in rows if r.start == "uninformed" and not r.selected]
        coexist = [r.alpha for r in rows if r.start == "uninformed" and r.fixed_points > 1]
        from dotattn.core.io import provenance, to_jsonable

        prov = provenance({**params, "command": command_line()}, seconds=seconds)
        summary = {
            **params,
            "alpha_where_uninformed_not_selected": hard,
            "alpha_with_several_fixed_points": coexist,
            "provenance": prov,
        }
        if folder is not None:
            from dotattn.core.io import write_csv, write_json, write_manifest

            comment = "dotattn aim free-entropy; provenance: " + json.dumps(to_jsonable(prov), separators=(",", ":"))
            write_csv(folder / "free_entropy.csv", [r.to_row() for r in rows], FREE_ENTROPY_COLUMNS, comment=comment)
            write_json(folder / "summary.json", summary)
            write_manifest(
                folder,
                ["free_entropy.csv", "summary.json"],
                params,
                command=prov["parameters"]["command"],
                provenance_record=prov,
            )
    lines = [
        f"{channel}, rho = {rho:g}, T = {T}, beta = {beta:g} ({seconds:.1f} s)",
        f"{'alpha':>10} {'start':>10} {'mmse':>12} {'phi':>14} {'selected':>8} {'fixed':>5} {'test error':>11} "
        f"{'+-':>8}",
    ]
    for r in rows:
        lines.append(
            f"{r.alpha:10.5g} {r.start:>10} {r.mmse:12.7g} {r.phi:14.8g} {str(r.selected):>8} "
            f"{r.fixed_points:>5} {r.test_error:11.6f} {r.test_error_se:8.1e}"
        )
    lines.append(
        "uninformed start not selected (hard region) at alpha: "
        + (", ".join(f"{a:g}" for a in hard) or "none")
        + "; several fixed points at alpha: "
        + (", ".join(f"{a:g}" for a in coexist) or "none")
    )
    if out is not None:
        lines.append(f"wrote {Path(out) / 'summary.json'}")
    click.echo("\n".join(lines))


@aim.command("figure", short_help="MMSE or test error against alpha from folders, with AMP/GD points.")
@click.option(
    "--from",
    "folders",
    multiple=True,
    required=True,
    type=click.Path(file_okay=False, exists=True),
    help="Folders written by `dotattn aim state-evolution --out` (--y mmse) or `dotattn aim free-entropy "
    "--out` (--y test_error), repeatable.",
)
@click.option(
    "--y",
    "yaxis",
    type=click.Choice(["mmse", "test_error"]),
    default="mmse",
    show_default=True,
    help="Vertical axis: the MMSE, or the test error (1/T) E||y_hat - y||^2 (Bayes-optimal curve and the "
    "estimators' plug-in predictors).",
)
@click.option(
    "--x",
    "xaxis",
    type=click.Choice(["alpha", "alpha_bar", "alpha_over_rho"]),
    default="alpha",
    show_default=True,
    help="Horizontal axis (alpha_bar = alpha (T^2 + T - 2): the softmax collapse).",
)
@click.option(
    "--points",
    "point_folders",
    multiple=True,
    type=click.Path(file_okay=False, exists=True),
    help="Folders of `dotattn aim amp|gd` (alphas.csv: mean error and its standard error per alpha), repeatable.",
)
@click.option("--title", type=str, default="", help="Figure title.")
@click.option("--out", type=click.Path(dir_okay=False), required=True, help="PNG file to write.")
def figure(folders, yaxis, xaxis, point_folders, title, out):
    """One figure of the MMSE (thresholds marked) or of the test error against alpha, from several folders,
    with the algorithms' points in the colour of their problem."""
    with output_file(out, "aim figure") as path:
        _figure(folders, yaxis, xaxis, point_folders, title, path)
    click.echo(f"wrote {out}")


def _figure(folders, yaxis, xaxis, point_folders, title, out) -> None:
    from dotattn.aim.plotting import (
        mmse_figure,
        read_algorithm_points,
        read_free_entropy,
        read_state_evolution,
        test_error_figure,
    )
    from dotattn.core.io import git_commit, save_figure

    extra = [pts for f in point_folders for pts in read_algorithm_points(f)]
    if yaxis == "mmse":
        runs = [read_state_evolution(f) for f in folders]
        fig = mmse_figure(
            [r[0] for r in runs], thresholds=[r[1] for r in runs], xaxis=xaxis, title=title, algorithm_points=extra
        )
    else:
        fig = test_error_figure(
            [read_free_entropy(f) for f in folders], xaxis=xaxis, title=title, algorithm_points=extra
        )
    save_figure(
        fig,
        out,
        {"command": command_line(), "git_commit": git_commit(), "inputs": [str(f) for f in folders + point_folders]},
    )


# ---- the algorithms at finite d: dotattn aim amp | gd -------------------------------------------


class BadInput(click.ClickException):
    """Invalid input: one line, exit status 2 (as :func:`dotattn.cli.main.main` does for ParameterError)."""

    exit_code = 2


def study_options(func: Callable) -> Callable:
    """The problem, grid and output options shared by amp and gd."""
    opts = [
        click.option(
            "--d", "d", type=str, default="100", show_default=True, help="Dimension d, an integer in [2, 2000]."
        ),
        click.option(
            "--rho",
            type=str,
            default="0.5",
            show_default=True,
            help="Width ratio rho = r/d, in [1e-4, 1e4] (and rho d >= 1/2).",
        ),
        click.option(
            "--tokens", "T", type=str, default="2", show_default=True, help="Tokens T, an integer in [2, 64]."
        ),
        click.option(
            "--alpha",
            multiple=True,
            required=True,
            help="Sample ratios alpha = n/d^2: comma lists or start:stop:count ranges, each in (0, 1e4] (and within memory).",
        ),
        click.option(
            "--channel", type=str, default="softmax", show_default=True, help="Output: softmax or hardmax (T = 2)."
        ),
        click.option(
            "--beta", type=str, default="1", show_default=True, help="Softmax inverse temperature, in (0, 1000]."
        ),
        click.option(
            "--seeds", type=str, default="8", show_default=True, help="Data sets (seeds 0..K-1), in [1, 10000]."
        ),
        click.option(
            "--test-samples",
            type=str,
            default="2000",
            show_default=True,
            help="Fresh samples per data set for the test error of each estimate, in [2, 1e6].",
        ),
        click.option(
            "--out",
            type=click.Path(file_okay=False),
            required=True,
            help="Output folder: runs.csv, alphas.csv, summary.json, manifest.json (amp also "
            "iterations.csv: the error per iteration beside AMP's state evolution).",
        ),
        click.option("--quiet", is_flag=True, help="No progress lines (the table of results is still printed)."),
    ]
    for opt in reversed(opts):
        func = opt(func)
    return func


def _spec(d, rho, T, alpha, channel, beta, seeds, test_samples="2000"):
    from dotattn.aim.algo_study import StudySpec

    from .options import parse_grid

    return StudySpec(
        d=_number("d", d),
        rho=_number("rho", rho),
        T=_number("tokens (T)", T),
        alphas=tuple(parse_grid("alpha", alpha)),
        channel=channel,
        beta=_number("beta", beta),
        seeds=_number("seeds", seeds),
        test_samples=_number("test-samples", test_samples),
    )


def _number(name: str, text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ParameterError(f"{name} must be a number, got {text!r}") from None


def _table(summary: dict) -> str:
    """The per-α rows: mean error ± its standard error over data sets, the Bayes-optimal MMSE, the gap in
    standard errors, the same for the test error, data sets whose runs all converged and that diverged."""

    def val(a, k):
        return float("nan") if a.get(k) is None else a[k]

    # stderr: standard error over data sets; BO: the Bayes-optimal value at the state evolution's overlap
    lines = [
        f"{'estimator':<12} {'alpha':>8} {'mse':>9} {'stderr':>8} {'BO mmse':>9} {'gap/stderr':>10} {'test':>8} "
        f"{'stderr':>7} {'BO test':>8} {'gap/stderr':>10} {'conv/sets':>9} {'div':>4}  flag"
    ]
    for a in summary["alphas"]:
        flag = " ".join(
            f
            for f, on in (("BEATS BOUND (mse)", a["beats_bound"]), ("BEATS BOUND (test)", a.get("test_beats_bound")))
            if on
        )
        lines.append(
            f"{a['estimator']:<12} {a['alpha']:>8.4g} {val(a, 'mse_mean'):>9.5f} {val(a, 'mse_se'):>8.5f} "
            f"{a['mmse_se_theory']:>9.5f} {val(a, 'gap_in_se'):>10.2f} {val(a, 'test_mean'):>8.5f} "
            f"{val(a, 'test_se'):>7.5f} {val(a, 'test_error_bo'):>8.5f} {val(a, 'test_gap_in_se'):>10.2f} "
            f"{a['converged']:>5}/{a['runs']:<3} {a['diverged']:>4}  {flag}"
        )
    made_for = summary.get("made_for", {})
    if made_for.get("estimator") == "gd":
        lines.append(
            f"conv/sets: data sets all of whose {made_for.get('inits')} initialisations converged "
            f"(RMS gradient <= grad_tol), of the data sets; gd: mean over the initialisations of each set"
        )
    else:
        lines.append("conv/sets: data sets whose run converged, of the data sets (seeds)")
    return "\n".join(lines)


def _say(quiet: bool) -> Callable[[str], None] | None:
    return None if quiet else (lambda line: click.echo(line, err=True))


def _torch_threads() -> int:
    """The threads torch will use for GD (its default: the cores)."""
    import torch

    return int(torch.get_num_threads())


@contextlib.contextmanager
def _study_progress(label: str, spec, config, folder: Path, quiet: bool, what: str) -> Iterator[Callable[[bool], None]]:
    """The shared start line (what will run, how much is cached, where it is written, an estimate) and progress
    with rate and ETA after each run (:class:`dotattn.core.progress.CommandProgress`); an interruption says how
    many finished runs are kept, those of earlier runs included, and how to resume. Yields the
    ``on_run(cached)`` callback of the study."""
    from dotattn.aim.algo_study import AMP_COST, GD_COST, GD_START, cached_runs, run_seconds
    from dotattn.core.progress import CommandProgress
    from dotattn.core.runner import Interrupted

    estimator = label.split()[-1]
    total = len(spec.alphas) * spec.seeds
    cached = cached_runs(folder / "cache", estimator, spec, config)
    progress = CommandProgress(label, total, "runs", cached=cached, quiet=quiet)
    progress.start(
        f"{len(spec.alphas)} alpha x {spec.seeds} seeds = {total} {what} (d = {spec.d}, n up to "
        f"{spec.n(max(spec.alphas))} samples)",
        progress.estimate_line(
            run_seconds(spec, config, estimator),
            AMP_COST if estimator == "amp" else GD_COST,
            threads=_torch_threads() if estimator == "gd" else 1,  # AMP: NumPy on small matrices, one core
            fixed=GD_START if estimator == "gd" and cached < total else 0.0,
        ),
        str(folder),
    )

    def on_run(was_cached: bool) -> None:
        if not was_cached:  # the cached ones are counted from the start
            progress.unit_done()

    try:
        yield on_run
    except Interrupted as err:
        raise Interrupted(
            err.signum,
            err.detail,
            f"{label}: interrupted; {progress.kept(str(folder / 'cache'))}"
            + (", run the same command again to resume" if progress.done else ""),
        ) from None
    finally:
        progress.close()


@aim.command("amp", short_help="GAMP with the rotationally invariant denoiser at finite d, against the MMSE.")
@study_options
@click.option("--max-iter", type=str, default="300", show_default=True, help="AMP iterations at most, in [1, 100000].")
@click.option(
    "--tol",
    type=str,
    default="1e-5",
    show_default=True,
    help="Stop when the relative change of S_hat per iteration is below tol, in (0, 1].",
)
@click.option(
    "--damping",
    type=str,
    default="0.5",
    show_default=True,
    help="Damping of S_hat, in [0, 1) (0: none; undamped AMP diverges at d = 100-200).",
)
def amp_command(d, rho, T, alpha, channel, beta, seeds, test_samples, out, quiet, max_iter, tol, damping) -> None:
    """GAMP with the rotationally invariant denoiser on n = alpha d^2 samples, against the state evolution.

    Per (alpha, seed) one seeded data set and AMP's error (1/d)||S_hat - S*||_F^2; per alpha the mean
    over seeds, its standard error, the Bayes-optimal MMSE and the gap in standard errors; per
    iteration the error beside AMP's own state evolution (iterations.csv).
    """
    try:
        from dotattn.aim.algo_study import check_memory, run_amp_study, write_study
        from dotattn.aim.amp import AMPConfig

        spec = _spec(d, rho, T, alpha, channel, beta, seeds, test_samples)
        config = AMPConfig(
            max_iter=_number("max_iter", max_iter), tol=_number("tol", tol), damping=_number("damping", damping)
        )
        check_memory(spec)
    except ParameterError as err:
        raise BadInput(str(err)) from None
    settings = {"estimator": "amp", **config.to_dict()}
    with output_folder(out, "aim amp", "aim-algorithms", {**spec.to_dict(), **settings}) as folder:
        with _study_progress(
            "aim amp", spec, config, folder, quiet, f"runs of up to {config.max_iter} iterations"
        ) as on_run:
            runs, rows, iters, seconds = run_amp_study(
                spec, config, progress=_say(quiet), cache_dir=folder / "cache", on_run=on_run
            )
        summary = write_study(folder, spec, settings, runs, rows, command_line(), seconds, iterations=iters)
    click.echo(_table(summary))
    if any(r.status == "not_converged" for r in runs):
        click.echo(
            "not_converged: the relative change of S_hat stayed above tol for max_iter iterations; at d ~ 100 "
            "it stalls at the level of the finite-d fluctuations while the error has settled "
            "(iterations.csv), so this is expected; the error reported is the last iterate's"
        )
    click.echo(f"wrote {Path(folder) / 'summary.json'} ({seconds:.1f} s)")


@aim.command("gd", short_help="Gradient descent and its average over starts at finite d, against the MMSE.")
@study_options
@click.option(
    "--inits",
    type=str,
    default="16",
    show_default=True,
    help="Random initialisations per data set, trained together (their mean S is the averaged "
    "estimator), in [1, 1000].",
)
@click.option("--optimizer", type=str, default="adam", show_default=True, help="adam or gd (full batch).")
@click.option("--steps", type=str, default="1000", show_default=True, help="Optimiser steps, in [1, 1e6].")
@click.option("--lr", type=str, default="0.1", show_default=True, help="Learning rate, in (0, 100].")
@click.option(
    "--grad-tol",
    type=str,
    default="1e-7",
    show_default=True,
    help="A run is converged when its RMS gradient per weight is at most this, in (0, 1].",
)
@click.option("--device", type=str, default="auto", show_default=True, help="Torch device: auto, cpu, cuda, cuda:N.")
def gd_command(
    d, rho, T, alpha, channel, beta, seeds, test_samples, out, quiet, inits, optimizer, steps, lr, grad_tol, device
) -> None:
    """Gradient descent on the tied student S = W W^T/sqrt(r d) (squared loss, full batch), and the
    averaged estimator (mean of S over initialisations on the same data), against the MMSE.

    Needs the erm extra (PyTorch). All initialisations of a data set are trained as one batched tensor
    program (float64). Reports per run the error, final loss, RMS gradient and test error on fresh samples;
    per alpha the mean errors, their standard errors and any point below the Bayes-optimal MMSE or test error.
    """
    try:
        from dotattn.aim.algo_study import check_memory

        spec = _spec(d, rho, T, alpha, channel, beta, seeds, test_samples)
        if spec.channel != "softmax":
            raise ParameterError(f"channel must be softmax for gd (a softmax student), got {spec.channel!r}")
        n_inits = _number("inits", inits)
        settings = dict(
            optimizer=optimizer,
            steps=_number("steps", steps),
            lr=_number("lr", lr),
            inits=n_inits,
            grad_tol=_number("grad_tol", grad_tol),
        )
        from dotattn.erm.config import check_device_name

        check_device_name(device)
        # the batched program keeps K (n, T, r) and K (n, T, T) tensors (dotattn.aim.gd.gd_bytes) and the tokens
        k = int(n_inits) if n_inits >= 1 else 1
        check_memory(spec, extra_per_sample=8 * (spec.T * spec.d + k * (3 * spec.T * spec.r + 6 * spec.T**2)))
    except ParameterError as err:
        raise BadInput(str(err)) from None
    try:
        import torch  # noqa: F401
    except ModuleNotFoundError as err:
        from .main import missing_extra

        extra = missing_extra("aim gd", err)
        if extra is None:
            raise
        raise extra from None
    try:
        from dotattn.aim.gd import GDConfig
        from dotattn.erm.experiment import resolve_device

        config = GDConfig(**settings)
        dev = resolve_device(device)
    except ParameterError as err:
        raise BadInput(str(err)) from None
    from dotattn.aim.algo_study import run_gd_study, write_study

    settings = {"estimator": "gd", "device": str(dev), **config.to_dict()}
    with output_folder(out, "aim gd", "aim-algorithms", {**spec.to_dict(), **settings}) as folder:
        with _study_progress(
            "aim gd", spec, config, folder, quiet, f"data sets of {config.inits} initialisations x {config.steps} steps"
        ) as on_run:
            runs, rows, seconds = run_gd_study(
                spec, config, device=str(dev), progress=_say(quiet), cache_dir=folder / "cache", on_run=on_run
            )
        summary = write_study(folder, spec, settings, runs, rows, command_line(), seconds)
    click.echo(_table(summary))
    click.echo(f"wrote {Path(folder) / 'summary.json'} ({seconds:.1f} s)")
