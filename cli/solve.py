"""``dotattn solve``: every fixed point at one (alpha, omega), the selected one, the baseline."""

from __future__ import annotations

import contextlib
import json
import sys

import click
import numpy as np

from dotattn.core.io import to_jsonable
from dotattn.core.validation import check_alpha, check_int
from dotattn.positional_semantic.catalogue import MAX_RANDOM_STARTS, QuadratureSpec, default_quadrature, solve
from dotattn.positional_semantic.problem import require_variant
from dotattn.positional_semantic.state_evolution import SolverOptions

from .main import cli
from .options import correlation_option, output_folder, problem_from_options, problem_options, student_option


def quadrature_options(func):
    """--quad, --quad-order, --coarse-order shared by solve and phase-diagram."""
    for opt in reversed(
        [
            click.option(
                "--quad",
                "quad_kind",
                type=click.Choice(["gauss-hermite", "qmc"]),
                default=None,
                help="Quadrature rule (default: Gauss-Hermite up to 6 dimensions, QMC beyond).",
            ),
            click.option(
                "--quad-order",
                type=int,
                default=None,
                help="Points per axis (Gauss-Hermite) or log2 of the points (QMC). Default: 12 for the "
                "4-D toy model (see 'Accuracy of the transition' in docs/results.md: alpha_c over quadrature rules).",
            ),
            click.option(
                "--coarse-order",
                type=int,
                default=None,
                help="Order of the coarse rule used for the first pass (>= 0; 0 disables).",
            ),
        ]
    ):
        func = opt(func)
    return func


def solver_options(func):
    for opt in reversed(
        [
            click.option(
                "--tol",
                type=float,
                default=1e-8,
                show_default=True,
                help="Relative convergence tolerance on the overlaps, in [1e-14, 0.1].",
            ),
            click.option(
                "--damping",
                type=float,
                default=0.8,
                show_default=True,
                help="Weight kept on the old overlaps in each step, in [0, 1).",
            ),
            click.option(
                "--max-iter",
                type=int,
                default=1000,
                show_default=True,
                help="Iteration budget per fixed point, in [1, 1e6].",
            ),
            click.option(
                "--hat-form",
                type=click.Choice(["gradient", "stein"]),
                default="gradient",
                show_default=True,
                help="Hat updates: gradient of the discretised E[M] (any rank) or Stein form (r = r_t = 1).",
            ),
        ]
    ):
        func = opt(func)
    return func


def build_quadrature(problem, quad_kind, quad_order, coarse_order) -> QuadratureSpec:
    """Map --quad, --quad-order, --coarse-order onto the default rule (--coarse-order 0, or one not
    below the order, disables the coarse pass); the spec validates itself."""
    base = default_quadrature(problem, quad_kind)
    if coarse_order is not None:
        check_int("coarse-order", coarse_order, 0)
    if quad_order is not None:
        check_int("quad-order", quad_order, 1)
    order = base.order if quad_order is None else quad_order
    coarse = base.coarse_order if coarse_order is None else (None if coarse_order == 0 else coarse_order)
    if coarse is not None and coarse >= order:
        coarse = None
    spec = QuadratureSpec(base.kind, order, coarse)
    spec.check(problem)
    return spec


def build_solver_options(tol, damping, max_iter, hat_form, problem) -> SolverOptions:
    """Map --tol, --damping, --max-iter, --hat-form (the options validate themselves)."""
    options = SolverOptions(tol=tol, damping=damping, max_iter=max_iter, hat_form=hat_form)
    options.check(problem)
    return options


def _fmt(x) -> str:
    if isinstance(x, (list, tuple, np.ndarray)):
        flat = np.ravel(x)
        return _fmt(float(flat[0])) if flat.size == 1 else "[" + ", ".join(_fmt(v) for v in flat) + "]"
    if x is None or (isinstance(x, float) and not np.isfinite(x)):
        return "-"
    return f"{x:.6g}"


def start_name(init: str) -> str:
    """How the table names the start of a fixed point: ``positional (informed)``, ``uninformative``, ``random 3``."""
    if init.startswith("random-"):
        return "random " + init.split("-", 1)[1]
    if init.endswith("-continued"):
        return init.removesuffix("-continued") + " (continued)"
    return init if init == "uninformative" else f"{init} (informed)"


def format_table(cat) -> str:
    """Readable table of the catalogue (one row per distinct fixed point, with the start it came from)."""
    toy = cat.problem.is_toy_layout
    cols = [
        "branch",
        "start",
        "status",
        "q",
        "m" if toy else "mu",
        "theta",
        "V",
        "e_t",
        "eps_g",
        "replicon",
        "RS",
        "selected",
    ]
    rows = []
    for e in cat.fixed_points:
        p = e.point(cat.problem.omega)
        s = p.stability
        rows.append(
            [
                p.branch,
                start_name(e.init),
                p.status,
                _fmt(p.q),
                _fmt(p.m if toy else p.mu),
                _fmt(p.theta),
                _fmt(p.V),
                _fmt(p.train_loss),
                _fmt(p.test_error),
                _fmt(s.replicon if s else None),
                s.label if s else "-",
                "*" if p.selected else "",
            ]
        )
    widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(cols)]
    corr = f", token correlation c = {cat.problem.token_correlation:g}" if cat.problem.token_correlation else ""
    lines = [
        f"alpha = {cat.alpha:g}, omega = {cat.problem.omega:g}{corr}  "
        f"(quadrature {cat.quadrature['kind']} order {cat.quadrature['order']}, {cat.quadrature['nodes']} nodes; "
        f"{cat.seconds:.1f} s)",
        "  ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True)),
        "  ".join("-" * w for w in widths),
    ]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) for r in rows]
    for e in cat.fixed_points:
        if not e.converged:
            lines.append(f"  note: start '{e.init}': {e.result.message}")
        elif e.stability is not None and e.stability.label != "stable":
            lines.append(f"  RS stability of {e.branch} (start: {start_name(e.init)}): {e.stability.reason}")
    for label in sorted({e.branch for e in cat.fixed_points if e.converged}):
        same = [e for e in cat.fixed_points if e.converged and e.branch == label]
        if len(same) > 1:
            lowest = min(same, key=lambda e: e.train_loss)
            others = ", ".join(start_name(e.init) for e in same if e is not lowest)
            lines.append(
                f"  two or more fixed points carry the label {label} (different q, m, e_t): the lowest e_t, from "
                f"the {start_name(lowest.init)} start, is the one that competes for the global minimum (and the "
                f"one phase-diagram follows where it continues the branch to here); also found from: {others}"
            )
    if any(e.stability is not None for e in cat.fixed_points):
        lines.append(
            "  (RS: stable / AT-unstable: replicon >= 1 / jumps: replicon < 1 but the global prox jumps, "
            "unstable at T = 0; docs/rs_stability.md)"
        )
    lines.append(f"linear baseline eps_lin = {cat.linear_baseline_test_error:.6g}")
    sel = cat.selected
    if sel is not None:
        verdict = (
            "attention beats the linear baseline"
            if sel.test_error < cat.linear_baseline_test_error
            else "the linear baseline is better"
        )
        lines.append(
            f"selected (global minimum of the training loss): {sel.branch}, eps_g = {sel.test_error:.6g}; {verdict}"
        )
    if cat.quadrature_check:
        lines.append("quadrature check (finer rule minus this rule):")
        for check in cat.quadrature_check:
            if not check.change:
                lines.append(f"  {check.branch}: finer rule {check.status}")
                continue
            lines.append(
                f"  {check.branch:<13} nodes {check.finer_rule['nodes']}: "
                + ", ".join(f"d{k} = {v:+.2e}" for k, v in check.change.items())
            )
    return "\n".join(lines)


@cli.command("solve")
@click.option("--alpha", type=float, required=True, help="Sample complexity alpha = n/d, in (0, 1e4].")
@click.option(
    "--omega", type=float, default=0.3, show_default=True, help="Positional fraction omega of the target, in [0, 1]."
)
@problem_options
@student_option
@correlation_option
@quadrature_options
@solver_options
@click.option("--random-starts", type=int, default=8, show_default=True, help="Random initialisations, in [0, 1000].")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the random initialisations (>= 0).")
@click.option("--check-quadrature", is_flag=True, help="Solve again on a finer rule and report every change.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of the table.")
@click.option(
    "--rsb",
    type=int,
    default=0,
    show_default=True,
    help="Steps of replica-symmetry breaking: 1 adds the zero-temperature 1RSB solution beside every "
    "converged RS fixed point (docs/rsb.md); 0 for RS only.",
)
@click.option(
    "--rsb-branch",
    "rsb_branches",
    default=None,
    help="With --rsb 1: comma-separated branches to break (default: every converged fixed point).",
)
@click.option(
    "--rsb-orders",
    default=None,
    help="With --rsb 1: Gauss-Hermite points per axis of the outer and inner rules, each in [2, 16] (default 6,4).",
)
@click.option(
    "--rsb-y",
    default=None,
    help="With --rsb 1: the Parisi parameters y scanned, each in (0, 1e6] (default 300,100,30,10,3).",
)
@click.option("--out", "out_dir", default=None, help="With --rsb 1: also write rsb.json and a manifest to this folder.")
@click.option(
    "--quiet", is_flag=True, help="No start line and no progress (printed on stderr for rank >= 2 and untied students)."
)
def solve_command(
    alpha,
    omega,
    L,
    rank,
    teacher_rank,
    sigma,
    ridge,
    A,
    positional_gram,
    student,
    token_correlation,
    quad_kind,
    quad_order,
    coarse_order,
    tol,
    damping,
    max_iter,
    hat_form,
    random_starts,
    seed,
    check_quadrature,
    as_json,
    rsb,
    rsb_branches,
    rsb_orders,
    rsb_y,
    out_dir,
    quiet,
):
    """All fixed points of the replica equations at one (alpha, omega), and the selected one."""
    problem = problem_from_options(
        omega, L, rank, teacher_rank, sigma, ridge, A, positional_gram, student, token_correlation=token_correlation
    )
    check_alpha(alpha)
    check_int("random-starts", random_starts, 0, MAX_RANDOM_STARTS)
    check_int("seed", seed, 0)
    quad = build_quadrature(problem, quad_kind, quad_order, coarse_order)
    options = build_solver_options(tol, damping, max_iter, hat_form, problem)
    rsb_options, branches = build_rsb_options(rsb, rsb_branches, rsb_orders, rsb_y, out_dir)
    if rsb_options is not None:
        require_variant(problem, "--rsb 1")
    folder: contextlib.AbstractContextManager = contextlib.nullcontext()
    if out_dir is not None:
        from dotattn.positional_semantic.rsb import rsb_made_for

        # created, locked and checked before anything is computed: writable, not another command's folder,
        # not a finished rsb run of other settings (docs/output_folders.md)
        folder = output_folder(out_dir, "solve --rsb 1", "rsb", rsb_made_for(problem, alpha, rsb_options))
    with folder:
        progress = _solve_progress(problem, quad, random_starts, quiet)
        try:
            cat = solve(
                problem,
                alpha,
                quadrature=quad,
                n_random=random_starts,
                options=options,
                seed=seed,
                check_quadrature=check_quadrature,
                report=None if progress is None else progress.unit_done,
            )
        finally:
            if progress is not None:
                progress.close()
        if as_json:
            click.echo(json.dumps(to_jsonable(cat.to_dict())))
        else:
            click.echo(format_table(cat))
        if rsb_options is not None and cat.any_converged:
            run_rsb(cat, rsb_options, branches, out_dir, as_json)
        if not cat.any_converged:  # inside: a folder made for --out is removed again while empty
            click.echo(
                "Error: no fixed point converged; try more iterations (--max-iter) or more damping (--damping 0.9)",
                err=True,
            )
            sys.exit(1)


def _solve_progress(problem, quad, random_starts: int, quiet: bool):
    """The shared start line and per-start progress (:class:`dotattn.core.progress.CommandProgress`) where a
    catalogue takes minutes: a student of rank >= 2 or an untied one; None for the toy model's seconds."""
    if quiet or (problem.rank < 2 and problem.student != "untied"):
        return None
    from dotattn.core.progress import CommandProgress
    from dotattn.positional_semantic.catalogue import start_count
    from dotattn.positional_semantic.phase_diagram import SOLVE_COST, start_seconds

    starts = start_count(problem, random_starts)
    nodes = quad.rule(problem.gaussian_dim).size
    per_start = start_seconds(problem, nodes)
    progress = CommandProgress("solve", starts, "starts")
    progress.start(
        f"every fixed point from {starts} starts (informed, continued and random) of the {problem.student} student of rank "
        f"{problem.rank} on {nodes} nodes, then their RS stability",
        progress.estimate_line(per_start, SOLVE_COST),
    )
    return progress


def build_rsb_options(rsb, branches, orders, ys, out_dir):
    """Map --rsb, --rsb-branch, --rsb-orders, --rsb-y, --out (checked before any computation)."""
    from dotattn.core.validation import ParameterError, check_out_dir
    from dotattn.positional_semantic.rsb import RSBOptions

    if rsb not in (0, 1):
        raise ParameterError(f"rsb must be 0 or 1 (steps of replica-symmetry breaking), got {rsb}")
    if rsb == 0:
        given = [
            name
            for name, v in (("rsb-branch", branches), ("rsb-orders", orders), ("rsb-y", ys), ("out", out_dir))
            if v is not None
        ]
        if given:
            raise ParameterError(f"{given[0]} is only used with --rsb 1")
        return None, None
    defaults = RSBOptions()
    try:
        outer, inner = (
            (defaults.outer_order, defaults.inner_order) if orders is None else (int(v) for v in orders.split(","))
        )
    except ValueError:
        raise ParameterError(
            f"rsb-orders must be two integers 'outer,inner', each in [2, 16], got {orders!r}"
        ) from None
    try:
        y_grid = defaults.y_grid if ys is None else tuple(float(v) for v in ys.split(","))
    except ValueError:
        raise ParameterError(f"rsb-y must be a comma-separated list of numbers in (0, 1e6], got {ys!r}") from None
    for name, v in (("rsb-orders (outer)", outer), ("rsb-orders (inner)", inner)):
        check_int(name, v, 2, 16)
    from dotattn.positional_semantic.labels import BRANCHES

    wanted = None if branches is None else tuple(b.strip() for b in branches.split(","))
    if wanted is not None and not set(wanted) <= set(BRANCHES):
        raise ParameterError(f"rsb-branch must be among {', '.join(BRANCHES)}, got {branches!r}")
    if out_dir is not None:
        check_out_dir("out", out_dir)
    return RSBOptions(outer_order=outer, inner_order=inner, y_grid=y_grid), wanted


def run_rsb(cat, options, branches, out_dir, as_json) -> None:
    """1RSB beside every converged RS fixed point (of the chosen branches): a table, or JSON lines."""
    import time

    from dotattn.positional_semantic.rsb import solve_rsb, write_rsb

    t0 = time.perf_counter()
    entries = []
    for e in cat.fixed_points:
        if not e.converged or (branches is not None and e.branch not in branches):
            continue
        res = solve_rsb(
            cat.problem,
            cat.alpha,
            e.result,
            options,
            progress=lambda p, b=e.branch: click.echo(
                f"  1RSB {b}: y = {p.y:g} {p.status} ({p.iterations} steps, {p.seconds:.1f} s)"
                + (f" e_t = {p.train_loss:.7g}, complexity = {p.complexity:.3g}" if p.converged else ""),
                err=True,
            ),
        )
        entries.append((e.branch, e.result, res))
    if as_json:
        click.echo(json.dumps(to_jsonable({"rsb": [{"branch": b, **r.to_row()} for b, _, r in entries]})))
    else:
        click.echo(format_rsb_table(entries, options, cat.quadrature))
    if out_dir is not None:
        write_rsb(out_dir, cat.problem, cat.alpha, entries, options, time.perf_counter() - t0)


def rsb_shifted_train_loss(rs, r) -> float | None:
    """The e_t of a branch with one-step RSB, on the RS rule: the RS e_t plus the 1RSB shift measured on the 1RSB
    rules (1RSB e_t - e_t(y_min), both on the same rules); the RS e_t where 1RSB leaves it (replica_symmetric);
    None where the 1RSB solve did not decide (not bracketed, failed)."""
    if r.status == "replica_symmetric":
        return float(rs.train_loss)
    if r.status == "converged" and r.small_y_train_loss == r.small_y_train_loss:
        return float(rs.train_loss + (r.train_loss - r.small_y_train_loss))
    return None


def format_rsb_table(entries, options, rs_rule: dict | None = None) -> str:
    """One row per broken fixed point: RS e_t, eps_g beside the 1RSB status, y*, complexity, e_t, eps_g; then which
    rule each e_t is on, the scan per branch, the selected branch with 1RSB and the verdict."""
    cols = [
        "branch",
        "RS e_t",
        "RS eps_g",
        "1RSB status",
        "y",
        "1RSB e_t",
        "e_t(y_min)",
        "1RSB eps_g",
        "q0",
        "q1",
        "seconds",
    ]
    rows = []
    for branch, rs, r in entries:
        ov = r.overlaps
        rows.append(
            [
                branch,
                _fmt(rs.train_loss),
                _fmt(rs.test_error),
                r.status,
                _fmt(r.y),
                _fmt(r.train_loss),
                _fmt(r.small_y_train_loss),
                _fmt(r.test_error),
                _fmt(None if ov is None else ov.q0),
                _fmt(None if ov is None else ov.q1),
                f"{r.seconds:.0f}",
            ]
        )
    widths = [max(len(c), *(len(x[i]) for x in rows)) for i, c in enumerate(cols)] if rows else [len(c) for c in cols]
    rs_text = (
        f"{rs_rule.get('kind', '?')} order {rs_rule.get('order', '?')}, {rs_rule.get('nodes', '?')} nodes"
        if rs_rule
        else "the catalogue's rule"
    )
    lines = [
        f"one-step RSB (zero temperature; Gauss-Hermite {options.outer_order} outer x {options.inner_order} inner; "
        f"y scanned: {', '.join(f'{y:g}' for y in options.y_grid)})",
        "  ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True)),
        "  ".join("-" * w for w in widths),
    ]
    lines += ["  ".join(v.ljust(w) for v, w in zip(x, widths, strict=True)) for x in rows]
    lines.append(
        f"  rules: RS e_t and RS eps_g on the RS rule ({rs_text}); 1RSB e_t, e_t(y_min) and 1RSB eps_g on the 1RSB "
        f"rules above. Compare 1RSB e_t with e_t(y_min) (same rules; the 1RSB shift), not with RS e_t."
    )
    for branch, _, r in entries:
        scan = ", ".join(f"{p.y:g}: {p.train_loss:.7g}" for p in r.scan if p.converged)
        lines.append(f"  {branch}: {r.message}; " + (f"e_t(y) = {scan}" if scan else "no fixed-y point converged"))
    shifted = {branch: rsb_shifted_train_loss(rs, r) for branch, rs, r in entries}
    rs_best = min(entries, key=lambda t: t[1].train_loss)[0] if entries else None
    decided = {b: v for b, v in shifted.items() if v is not None}
    if entries and len(decided) == len(shifted):
        best = min(decided, key=lambda b: decided[b])
        lines.append(
            "  selected with 1RSB (lowest e_t, RS e_t + the 1RSB shift): "
            + ", ".join(f"{b} {v:.7g}" for b, v in decided.items())
            + f" -> {best}; "
            + (
                "1RSB does not change the selected branch"
                if best == rs_best
                else f"1RSB changes the selected branch: {rs_best} under RS, {best} with 1RSB"
            )
        )
    elif entries:
        undecided = ", ".join(b for b, v in shifted.items() if v is None)
        lines.append(
            f"  selected with 1RSB: undecided ({undecided}: no 1RSB answer); under RS the selected branch is {rs_best}"
        )
    lines.append(
        "  (e_t(y_min): e_t at the smallest y scanned, the RS e_t on the 1RSB rules, the reference for the "
        "1RSB shift; replica_symmetric: the complexity is negative at every y, so e_t(y) is largest at "
        "y -> 0, the RS value; docs/rsb.md)"
    )
    return "\n".join(lines)
