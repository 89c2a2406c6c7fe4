"""Entry point of the ``dotattn`` console script: a thin shell over the library."""

from __future__ import annotations

import sys

import click

from dotattn import __version__
from dotattn.problem import ParameterError


# command name -> module that defines it (imported only when the command is used, so that
# `dotattn solve` does not pay for importing torch)
LAZY_COMMANDS = {
    "solve": "dotattn.cli.solve",
    "phase-diagram": "dotattn.cli.phase",
    "train-erm": "dotattn.cli.erm",
    "compare": "dotattn.cli.compare",
    "erm-alpha-c": "dotattn.cli.alpha_c",
}


class LazyGroup(click.Group):
    """A click group whose subcommands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(self.commands) | set(LAZY_COMMANDS))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in self.commands and name in LAZY_COMMANDS:
            import importlib
            try:
                importlib.import_module(LAZY_COMMANDS[name])
            except ModuleNotFoundError:
                return None
        return self.commands.get(name)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="dotattn")
def cli() -> None:
    """dotattn: when does dot-product attention learn by position, and when by meaning?

    Replica predictions (solve, phase-diagram) and finite-size PyTorch experiments
    (train-erm, compare) for tied low-rank dot-product attention.
    """


def main(argv: list[str] | None = None) -> None:
    """Run the CLI. Invalid input: one line on stderr and exit status 2."""
    try:
        rv = cli.main(args=argv, prog_name="dotattn", standalone_mode=False)
    except ParameterError as err:
        click.echo(f"Error: {err}", err=True)
        sys.exit(2)
    except click.exceptions.Exit as err:
        sys.exit(err.exit_code)
    except click.Abort:
        click.echo("Aborted.", err=True)
        sys.exit(1)
    except click.ClickException as err:
        msg = err.format_message().replace("\n", " ")
        click.echo(f"Error: {msg}", err=True)
        sys.exit(err.exit_code)
    sys.exit(rv if isinstance(rv, int) else 0)


if __name__ == "__main__":  # pragma: no cover
    main()
