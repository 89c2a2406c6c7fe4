"""Entry point of the ``dotattn`` console script: a thin shell over the library."""

from __future__ import annotations

import errno
import importlib
import sys
import weakref
from dataclasses import dataclass

import click

from dotattn.core.runner import Interrupted
from dotattn.core.validation import ParameterError, check_dask_scheme, check_out_dir
from dotattn.core.version import __version__


@dataclass(frozen=True)
class LazyCommand:
    """A subcommand imported only when invoked: the module that defines it and its one-line help."""

    module: str
    help: str


# command name -> where it lives and its one-line help for `dotattn --help` (listing the commands
# never imports them, so neither `dotattn --help` nor `dotattn solve` pays for importing torch).
# Adding a command is one entry; tests check each help line against the command's docstring.
LAZY_COMMANDS: dict[str, LazyCommand] = {
    "solve": LazyCommand(
        "dotattn.cli.solve", "All fixed points of the replica equations at one (alpha, omega), and the selected one."
    ),
    "phase-diagram": LazyCommand(
        "dotattn.cli.phase",
        "alpha sweeps of the informed branches (positional, "
        "semantic; mixed for rank >= 2), spinodals, phase boundaries, "
        "alpha_c(omega), alpha_lin(omega) and figures.",
    ),
    "train-erm": LazyCommand(
        "dotattn.cli.erm",
        "Train low-rank attention (tied or untied) by ERM on n = alpha*d samples, for all (alpha, init, seed) at once.",
    ),
    "compare": LazyCommand(
        "dotattn.cli.compare", "Theory against ERM: eps_g, overlaps and training loss per alpha and informed branch."
    ),
    "erm-alpha-c": LazyCommand(
        "dotattn.cli.alpha_c",
        "Per-seed crossing of e_t(semantic start) - e_t(positional "
        "start) on paired data, per (omega, d); mean, bootstrap "
        "interval, no-crossing seeds; fit alpha_c(d) -> "
        "alpha_c(inf); the theory's alpha_c.",
    ),
    "variants": LazyCommand(
        "dotattn.cli.variants",
        "alpha_c(omega) of several variants side by side (theory, ERM) and each one's shift from a baseline.",
    ),
    "erm-restarts": LazyCommand(
        "dotattn.cli.restarts",
        "Many optimiser restarts on the same data and teacher: minima, their spread and mutual distances.",
    ),
    "landscape": LazyCommand(
        "dotattn.cli.landscape",
        "Best-of-K crossings of e_t(semantic) - e_t(positional) from erm-restarts folders, per d and search; "
        "K -> inf, d -> inf and the verdict against the replica alpha_c.",
    ),
    "complexity": LazyCommand(
        "dotattn.cli.complexity",
        "The 1RSB complexity curve of the positional branch, its equilibrium and threshold energies, and the alpha "
        "at which each crosses the semantic e_t.",
    ),
    "verify": LazyCommand(
        "dotattn.cli.verify",
        "Verify output folders: every file against manifest.json "
        "(SHA-256, row count, provenance), and the rows against the "
        "folder's problem and grid.",
    ),
    "paths": LazyCommand(
        "dotattn.cli.paths",
        "Attention paths: finite-width Bayesian theory of multi-head, multi-layer attention (theory, sample, images).",
    ),
    "aim": LazyCommand(
        "dotattn.cli.aim",
        "Attention-indexed model: Bayes-optimal learning of tied attention from "
        "n = alpha d^2 samples (state evolution, AMP, GD, figures).",
    ),
}

# optional top-level package -> (what to call it, the pip extra that installs it)
OPTIONAL_PACKAGES = {
    "torch": ("PyTorch", "erm"),
    "dask": ("Dask", "dask"),
    "distributed": ("Dask", "dask"),
    "numpyro": ("NumPyro", "paths"),
    "jax": ("JAX", "paths"),
    "jaxlib": ("JAX", "paths"),
}
# how to install an extra without what it would drag in by default (PyPI's torch wheel pulls the CUDA
# libraries, several GB; the CPU build is enough for every command here)
EXTRA_INSTALL = {
    "erm": (
        'PyTorch\'s CPU build: from a clone, pip install ".[erm]" -c cpu-torch.txt; elsewhere '
        'pip install torch --index-url https://download.pytorch.org/whl/cpu, then pip install "dotattn[erm]"'
    ),
}

OUT_PARAMS = ("out", "out_dir")
"""Names of the output-folder parameters of the commands (checked by :func:`_check_out` before the
command runs: an empty path would mean the working directory or the input folder)."""
DASK_PARAMS = ("dask_address",)
"""Names of the Dask scheduler parameters (their scheme is checked by :func:`_check_dask` while the
command line is parsed, before any import or folder)."""


class MissingExtraError(click.ClickException):
    """A command needs an optional dependency that is not installed (exit status 2)."""

    exit_code = 2


def missing_extra(command: str, err: ModuleNotFoundError) -> MissingExtraError | None:
    """The one-line error naming the pip extra, if ``err`` is a missing optional package; else None."""
    root = (err.name or "").split(".")[0]
    if root not in OPTIONAL_PACKAGES:
        return None
    what, extra = OPTIONAL_PACKAGES[root]
    how = EXTRA_INSTALL.get(extra, f'it with pip install "dotattn[{extra}]"')
    return MissingExtraError(f"{command} needs {what}; install {how}")


def _check_out(value):
    """Refuse an empty --out before the command creates anything."""
    return value if value is None else check_out_dir(value, "--out")


def _check_dask(value):
    """Refuse a --dask scheme that cannot work from a command line (tls, wss, ucx, inproc)."""
    return value if value is None else check_dask_scheme(value, inproc=False)


def _guard_params(command: click.Command) -> None:
    """Chain :func:`_check_out` / :func:`_check_dask` in front of the callbacks of the command's
    output-folder and Dask options (once per command), and of every subcommand of a group (``paths
    theory`` / ``paths sample``): checks common to every command, in one place."""
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            _guard_params(sub)
    checks = {**{name: _check_out for name in OUT_PARAMS}, **{name: _check_dask for name in DASK_PARAMS}}
    for param in command.params:
        check = checks.get(param.name)
        if check is None or param in _GUARDED:
            continue
        previous = param.callback

        def callback(ctx, p, value, previous=previous, check=check):
            value = check(value)
            return previous(ctx, p, value) if previous is not None else value

        param.callback = callback
        _GUARDED.add(param)


_GUARDED: weakref.WeakSet[click.Parameter] = weakref.WeakSet()
"""The parameters whose callbacks :func:`_guard_params` has chained already."""


class LazyGroup(click.Group):
    """A click group whose subcommands are listed from :data:`LAZY_COMMANDS` and imported on first use.

    A missing optional package (torch, dask), whether the command module imports it or the command
    does when it runs, ends the command with one line naming the extra and exit status 2.
    """

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(self.commands) | set(LAZY_COMMANDS))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in self.commands and name in LAZY_COMMANDS:
            try:
                importlib.import_module(LAZY_COMMANDS[name].module)
            except ModuleNotFoundError as err:
                extra = missing_extra(name, err)
                if extra is None:
                    raise
                raise extra from None
        command = self.commands.get(name)
        if command is not None:
            _guard_params(command)
        return command

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except ModuleNotFoundError as err:
            extra = missing_extra(ctx.invoked_subcommand or ctx.info_name or "dotattn", err)
            if extra is None:
                raise
            raise extra from None

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list with the one-line helps of the table, without importing any command module."""
        rows = []
        for name in self.list_commands(ctx):
            if name in LAZY_COMMANDS:
                rows.append((name, LAZY_COMMANDS[name].help))
            elif not self.commands[name].hidden:
                rows.append((name, self.commands[name].get_short_help_str(formatter.width)))
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="dotattn")
def cli() -> None:
    """dotattn: the statistical physics of attention, three theories.

    Position or meaning: replica predictions for tied low-rank dot-product attention (solve,
    phase-diagram) and finite-size PyTorch experiments against them (train-erm, compare,
    erm-alpha-c, erm-restarts). The Bayes-optimal attention-indexed model (aim). Attention paths
    at finite width (paths). Every output folder is checked by verify.
    """


def os_error_line(err: OSError) -> str:
    """One line for an OSError: what failed, on which file, and what to do for the common causes."""
    what = err.strerror or str(err) or type(err).__name__
    where = f" ({err.filename})" if err.filename else ""
    hints = {
        errno.ENOSPC: "free some space or choose another --out; every file is written atomically, so no "
        "partial file was left",
        errno.EDQUOT: "free some space or choose another --out",
        errno.EACCES: "choose a folder you can write to (--out)",
        errno.EPERM: "choose a folder you can write to (--out)",
        errno.EROFS: "choose a folder on a writable file system (--out)",
    }
    hint = None if err.errno is None else hints.get(err.errno)
    return f"{what}{where}" + (f"; {hint}" if hint else "")


def main(argv: list[str] | None = None) -> None:
    """Run the CLI. Invalid input: one line on stderr and exit status 2."""
    try:
        rv = cli.main(args=argv, prog_name="dotattn", standalone_mode=False)
    except ParameterError as err:
        click.echo(f"Error: {err}", err=True)
        sys.exit(2)
    except click.exceptions.Exit as err:
        sys.exit(err.exit_code)
    except Interrupted as err:  # SIGINT/SIGTERM during a run: one line, 128 + signal number
        click.echo(str(err) if err.message else f"dotattn: {err}", err=True)
        sys.exit(err.exit_status)
    except click.Abort as err:
        click.echo("Aborted.", err=True)
        sys.exit(130 if isinstance(err.__context__, KeyboardInterrupt) else 1)
    except KeyboardInterrupt:  # SIGINT before a command installs its handlers (while importing, say): no traceback
        click.echo("dotattn: interrupted by SIGINT before anything was written", err=True)
        sys.exit(130)
    except click.ClickException as err:
        msg = err.format_message().replace("\n", " ")
        click.echo(f"Error: {msg}", err=True)
        sys.exit(err.exit_code)
    except OSError as err:  # disk full, permission denied, ...: one line and exit 1 (writes are atomic)
        click.echo(f"Error: {os_error_line(err)}", err=True)
        sys.exit(1)
    sys.exit(rv if isinstance(rv, int) else 0)


if __name__ == "__main__":  # pragma: no cover
    main()
