"""``dotattn complexity``: the 1RSB complexity curve Σ(e) of the positional branch over an alpha grid, its
equilibrium and threshold energies and the alpha at which each crosses the semantic branch's e_t."""

from __future__ import annotations

import time

import click

from .main import cli
from .options import output_folder, parse_grid, problem_from_options, problem_options

DEFAULT_OUT = "dotattn-output/complexity"
"""Default output folder: relative to the working directory, ignored by git in a clone."""


def parse_rules(text: str) -> tuple[tuple[int, int], ...]:
    """'6x4,6x6' -> ((6, 4), (6, 6)); ParameterError (one line) otherwise."""
    from dotattn.core.validation import ParameterError
    from dotattn.positional_semantic.complexity import check_rules

    try:
        pairs = [tuple(int(v) for v in part.strip().lower().split("x")) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ParameterError(f"rules must be a comma list of OUTERxINNER, each in [2, 16], got {text!r}") from None
    if any(len(p) != 2 for p in pairs):
        raise ParameterError(f"rules must be a comma list of OUTERxINNER, each in [2, 16], got {text!r}")
    return check_rules(pairs)


@cli.command("complexity")
@click.option("--omega", type=float, default=0.1, show_default=True, help="omega, in [0, 1].")
@click.option(
    "--alpha",
    "alphas",
    multiple=True,
    help="alpha grid (at least two values): repeat, comma list or start:stop:count (default 0.73:0.76:4).",
)
@problem_options
@click.option(
    "--rules",
    default="6x4,6x6,8x4",
    show_default=True,
    help="Gauss-Hermite rules OUTERxINNER (points per axis, each in [2, 16]); the first gives the numbers, the "
    "others their quadrature uncertainty.",
)
@click.option(
    "--y",
    "ys",
    multiple=True,
    help="Parisi parameters y scanned (at least 5, each in (0, 1e6]; default 400 ... 5, 20 values).",
)
@click.option("--tol", type=float, default=1e-8, show_default=True, help="Fixed-y tolerance, in [1e-14, 0.1].")
@click.option("--max-iter", type=int, default=300, show_default=True, help="Steps per fixed y, in [1, 1e5].")
@click.option(
    "--out",
    "out_dir",
    default=DEFAULT_OUT,
    show_default=True,
    help="Output folder (the default is untracked; the committed study is results/rsb/complexity_omega0.1).",
)
@click.option("--quiet", is_flag=True, help="No progress lines on stderr.")
def complexity_command(
    omega, alphas, L, rank, teacher_rank, sigma, ridge, A, positional_gram, rules, ys, tol, max_iter, out_dir, quiet
):
    """The 1RSB complexity curve of the positional branch, its equilibrium and threshold energies, and the alpha
    at which each crosses the semantic e_t."""
    from dotattn.positional_semantic.complexity import (
        ComplexityOptions,
        check_alphas,
        complexity_made_for,
        complexity_study,
        rule_name,
        write_complexity,
    )
    from dotattn.positional_semantic.plotting import figure_complexity
    from dotattn.positional_semantic.problem import require_variant

    problem = problem_from_options(omega, L, rank, teacher_rank, sigma, ridge, A, positional_gram, "tied")
    require_variant(problem, "the 1RSB complexity")
    alpha_grid = check_alphas(parse_grid("alpha", alphas) if alphas else (0.73, 0.74, 0.75, 0.76))
    y_grid = tuple(parse_grid("y", ys)) if ys else ComplexityOptions.y_grid
    options = ComplexityOptions(rules=parse_rules(rules), y_grid=y_grid, tol=tol, max_iter=max_iter)
    t0 = time.perf_counter()
    with output_folder(out_dir, "complexity", "complexity", complexity_made_for(problem, alpha_grid, options)) as out:

        def progress(rule, alpha, p):
            if not quiet:
                line = f"  alpha = {alpha:g}, rule {rule_name(rule)}: y = {p.y:g} {p.status} ({p.iterations} steps)"
                if p.status == "converged":
                    line += f" e = {p.energy:.8g}, complexity = {p.complexity:.3g}, replicon = {p.replicon:.3g}"
                click.echo(line, err=True)

        study = complexity_study(problem, alpha_grid, options, progress=progress)
        summary = write_complexity(out, study, figure=figure_complexity)
    for name in ("alpha_equilibrium", "alpha_threshold"):
        s = summary[name]
        click.echo(
            f"{name} = {s['value']:.5f} +- {s['uncertainty']:.5f} (rules: "
            + ", ".join(f"{k} {v:.5f}" for k, v in s["by_rule"].items())
            + f"), e there = {s['energy']:.8g}"
        )
    click.echo(f"wrote {out} in {time.perf_counter() - t0:.1f} s")
