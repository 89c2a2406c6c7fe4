"""``dotattn aim``: Bayes-optimal learning of the attention-indexed model (state evolution, figures)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import click

from dotattn.cli.main import cli
from dotattn.cli.options import command_line, output_folder, parse_grid
from dotattn.problem import ParameterError, check_int


@cli.group("aim")
def aim() -> None:
    """Attention-indexed model: Bayes-optimal learning of tied attention from n = alpha d^2 samples
    (state evolution, figures)."""


@aim.command("state-evolution")
@click.option("--channel", type=str, default="softmax", show_default=True, help="Output channel: softmax or hardmax.")
@click.option("--rho", type=float, required=True, help="Width ratio rho = r/d, in [1e-4, 1e4].")
@click.option("--tokens", "T", type=int, default=2, show_default=True,
              help="Tokens T, in [2, 64] (hardmax: T = 2 only).")
@click.option("--alpha", "alphas", multiple=True, required=True,
              help="alpha = n/d^2 grid: repeat, comma list or start:stop:count; each in (0, 1e4].")
@click.option("--nodes", type=int, default=None, help="Gauss-Legendre nodes per panel of the prior quadrature, "
                                                      "in [8, 512] (default 48).")
@click.option("--hardmax-nodes", type=int, default=None, help="Nodes per axis of the hardmax q_hat quadrature, "
                                                              "in [16, 512] (default 48).")
@click.option("--hardmax-derivative", type=click.Choice(["gradient", "published"]), default="gradient",
              show_default=True, help="published: the public script's phi2/Phi2 in place of the gradient of "
                                      "log Z_out (wrong; only to measure its effect).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (points, thresholds) instead of the table.")
@click.option("--out", type=click.Path(file_okay=False), default=None,
              help="Output folder: points.csv, summary.json, mmse.png, manifest.json.")
@click.option("--quiet", is_flag=True, help="No progress lines.")
def state_evolution(channel, rho, T, alphas, nodes, hardmax_nodes, hardmax_derivative, as_json, out, quiet):
    """MMSE(alpha) of the Bayes-optimal estimator: fixed points of the state evolution and thresholds.

    The prior channel is matrix denoising of S = W W^T/sqrt(r d) (free convolution, quadrature by
    bulk); the output channel is softmax (noiseless: depends on alpha and T only through
    alpha_bar = alpha (T^2 + T - 2), not on beta) or hardmax (T = 2, deterministic quadrature).
    """
    from dotattn.aim.channels import HARDMAX_NODES
    from dotattn.aim.prior import DEFAULT_NODES
    from dotattn.aim.state_evolution import POINT_COLUMNS, check_inputs, solve_curve, thresholds

    grid = parse_grid("alpha", alphas)
    channel, rho, T, grid = check_inputs(channel, rho, T, grid)
    nodes = DEFAULT_NODES if nodes is None else check_int("nodes", nodes, 8, 512)
    hardmax_nodes = HARDMAX_NODES if hardmax_nodes is None else check_int("hardmax-nodes", hardmax_nodes, 16, 512)
    if hardmax_derivative != "gradient" and channel != "hardmax":
        raise ParameterError("--hardmax-derivative applies to --channel hardmax only")
    say = None if (quiet or as_json) else (
        lambda p: click.echo(f"alpha={p.alpha:g}: mmse={p.mmse:.8g} ({p.status}, {p.seconds:.2f} s)", err=True))
    t0 = time.perf_counter()
    points = solve_curve(channel, grid, rho, T, progress=say, nodes=nodes, hardmax_nodes=hardmax_nodes,
                         hardmax_derivative=hardmax_derivative)
    seconds = time.perf_counter() - t0
    thr = thresholds(channel, rho, T)
    from dotattn.io import provenance, to_jsonable

    params = {"channel": channel, "rho": rho, "tokens": T, "alpha": grid, "nodes": nodes,
              "hardmax_nodes": hardmax_nodes, "hardmax_derivative": hardmax_derivative}
    prov = provenance({**params, "command": command_line()}, seconds=seconds)
    summary = {"channel": channel, "rho": rho, "tokens": T, "hardmax_derivative": hardmax_derivative,
               "points": [p.to_row() for p in points], "thresholds": thr, "provenance": prov}
    if out is not None:
        from dotattn.aim.plotting import mmse_figure
        from dotattn.io import save_figure, write_csv, write_json, write_manifest

        with output_folder(out) as folder:
            comment = "dotattn aim state-evolution; provenance: " + json.dumps(to_jsonable(prov),
                                                                              separators=(",", ":"))
            write_csv(folder / "points.csv", [p.to_row() for p in points], POINT_COLUMNS, comment=comment)
            write_json(folder / "summary.json", summary)
            fig = mmse_figure([points], thresholds=[thr])
            save_figure(fig, folder / "mmse.png", {"command": prov["parameters"]["command"],
                                                   "git_commit": prov["git_commit"]})
            write_manifest(folder, ["points.csv", "summary.json", "mmse.png"], params,
                           command=prov["parameters"]["command"], provenance_record=prov)
    if as_json:
        click.echo(json.dumps(to_jsonable(summary), allow_nan=False))
        return
    lines = [f"{channel}, rho = {rho:g}, T = {T} ({seconds:.2f} s)",
             f"{'alpha':>12} {'alpha_bar':>12} {'mmse':>14} {'q':>12} {'q_hat':>12} {'uncert.':>9}  status"]
    for p in points:
        lines.append(f"{p.alpha:12.6g} {p.alpha_bar:12.6g} {p.mmse:14.9g} {p.q:12.8g} {p.q_hat:12.6g} "
                     f"{p.uncertainty:9.1e}  {p.status} ({p.regime})")
    lines.append("thresholds: " + ", ".join(f"{k} = {v:.6g}" if isinstance(v, float) else f"{k} = {v}"
                                            for k, v in thr.items()))
    if out is not None:
        lines.append(f"wrote {Path(out) / 'summary.json'}")
    click.echo("\n".join(lines))


@aim.command("figure")
@click.option("--from", "folders", multiple=True, required=True, type=click.Path(file_okay=False, exists=True),
              help="Folders written by `dotattn aim state-evolution --out` (repeatable).")
@click.option("--x", "xaxis", type=click.Choice(["alpha", "alpha_bar", "alpha_over_rho"]), default="alpha",
              show_default=True, help="Horizontal axis (alpha_bar = alpha (T^2 + T - 2): the softmax collapse).")
@click.option("--points", "point_folders", multiple=True, type=click.Path(file_okay=False, exists=True),
              help="Folders of `dotattn aim amp|gd` (alphas.csv: mean MSE and its standard error per alpha), repeatable.")
@click.option("--title", type=str, default="", help="Figure title.")
@click.option("--out", type=click.Path(dir_okay=False), required=True, help="PNG file to write.")
def figure(folders, xaxis, point_folders, title, out):
    """One figure of MMSE against alpha from several state-evolution folders (thresholds marked)."""
    from dotattn.aim.plotting import mmse_figure, read_algorithm_points, read_state_evolution
    from dotattn.io import git_commit, save_figure

    runs = [read_state_evolution(f) for f in folders]
    extra = [pts for f in point_folders for pts in read_algorithm_points(f)]
    fig = mmse_figure([r[0] for r in runs], thresholds=[r[1] for r in runs], xaxis=xaxis, title=title,
                      algorithm_points=extra)
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    save_figure(fig, out, {"command": command_line(), "git_commit": git_commit(),
                           "inputs": [str(f) for f in folders + point_folders]})
    click.echo(f"wrote {out}")


from dotattn.cli.aim_algorithms import amp_command, gd_command  # noqa: E402 (after the group exists)

aim.add_command(amp_command, "amp")
aim.add_command(gd_command, "gd")
