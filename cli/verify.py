"""``dotattn verify``: check output folders against their manifests and their rows' consistency."""

from __future__ import annotations

import click

from .main import cli


@cli.command("verify")
@click.argument("folders", nargs=-1, required=True, type=click.Path(file_okay=False))
@click.option(
    "--seal",
    is_flag=True,
    help="For a folder written before manifests existed: check its rows, then write its manifest.json "
    "(which says it was sealed after the fact, at which commit).",
)
@click.option(
    "--recursive",
    "-r",
    is_flag=True,
    help="Verify every folder with a manifest.json at or below each FOLDER (all of them, then one line "
    "per failure and exit status 2 if any failed).",
)
@click.option(
    "--strict",
    is_flag=True,
    help="Also re-derive what is cheap to recompute, per kind (summary statistics from the rows, the "
    "selection rules applied again; seconds, no solver run): docs/output_folders.md lists what.",
)
def verify_command(folders, seal, recursive, strict):
    """Verify output folders: every file against manifest.json (SHA-256, row count, provenance), and the
    rows against the folder's problem and grid.

    Prints one line per folder; the first folder that fails ends the command with one line naming the
    file and the mismatch (exit status 2). With --recursive every folder below is checked and each
    failure gets its line. With --strict each folder's cheap derived quantities are recomputed too.
    """
    from dotattn.core.io import IntegrityError, invocation
    from dotattn.core.validation import ParameterError
    from dotattn.verify import folders_with_manifest, seal_folder, verify_folder

    if recursive:
        if seal:
            raise ParameterError("--seal and --recursive do not go together: seal one folder at a time")
        targets = [f for root in folders for f in folders_with_manifest(root)]
        if not targets:
            raise ParameterError(f"no folder with a manifest.json at or below {', '.join(folders)}")
        failed = 0
        for folder in targets:
            try:
                click.echo(f"ok {folder} ({verify_folder(folder, strict=strict)})")
            except IntegrityError as err:
                failed += 1
                click.echo(f"FAILED {err}", err=True)
        if failed:
            raise ParameterError(f"{failed} of {len(targets)} folders failed verification")
        return
    for folder in folders:
        if seal:
            path = seal_folder(folder, command=invocation())
            click.echo(f"sealed {folder}: wrote {path}")
        kind = verify_folder(folder, strict=strict)
        click.echo(f"ok {folder} ({kind})")
