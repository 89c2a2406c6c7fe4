"""``dotattn verify``: check output folders against their manifests and their rows' consistency."""

from __future__ import annotations

import click

from dotattn.cli.main import cli


@cli.command("verify")
@click.argument("folders", nargs=-1, required=True, type=click.Path(file_okay=False))
@click.option("--seal", is_flag=True,
              help="For a folder written before manifests existed: check its rows, then write its manifest.json "
                   "(which says it was sealed after the fact, at which commit).")
def verify_command(folders, seal):
    """Verify output folders: every file against manifest.json (SHA-256, row count, provenance), and the
    rows against the folder's problem and grid.

    Prints one line per folder; the first folder that fails ends the command with one line naming the
    file and the mismatch (exit status 2).
    """
    from dotattn.core.io import invocation
    from dotattn.verify import seal_folder, verify_folder

    for folder in folders:
        if seal:
            path = seal_folder(folder, command=invocation())
            click.echo(f"sealed {folder}: wrote {path}")
        kind = verify_folder(folder)
        click.echo(f"ok {folder} ({kind})")
