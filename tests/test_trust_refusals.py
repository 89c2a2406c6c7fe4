"""Refusals left open after the first trust round (issue 18 item 4): `--out ""` for the subcommands
of a group (`paths theory`, `paths sample` wrote into the working directory), every output option of
every command and subcommand guarded, and the attention-paths API's wrong types."""

from __future__ import annotations

import subprocess

import click
import pytest
from clitools import ENV, dotattn_command

from dotattn.core.validation import ParameterError


def _commands():
    """Every command and subcommand reachable from ``dotattn`` (lazy ones imported), with its path."""
    from dotattn.cli.main import cli

    out = []

    def walk(group, prefix):
        ctx = click.Context(group)
        for name in group.list_commands(ctx):
            cmd = group.get_command(ctx, name)
            out.append((f"{prefix} {name}".strip(), cmd))
            if isinstance(cmd, click.Group):
                walk(cmd, f"{prefix} {name}")

    walk(cli, "")
    return out


def test_every_output_option_refuses_an_empty_path():
    from dotattn.cli.main import OUT_PARAMS

    checked = []
    for path, cmd in _commands():
        for param in cmd.params:
            if param.name in OUT_PARAMS:
                with pytest.raises(ParameterError, match="--out must be a non-empty folder path"):
                    param.process_value(click.Context(cmd), "")
                checked.append(path)
    # the commands that write a folder, the group's subcommands included
    assert {
        "phase-diagram",
        "train-erm",
        "compare",
        "erm-restarts",
        "erm-alpha-c",
        "paths theory",
        "paths sample",
    } <= set(checked)


@pytest.mark.parametrize(
    "args", [["paths", "theory", "--task", "markov", "--N", "10"], ["paths", "sample", "--task", "markov", "--N", "10"]]
)
def test_paths_subcommands_refuse_an_empty_out_and_write_nothing(args, tmp_path):
    r = subprocess.run(
        [*dotattn_command(), *args, "--out", ""], capture_output=True, text=True, env=ENV, cwd=tmp_path, timeout=120
    )
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip() == (
        "Error: --out must be a non-empty folder path (use '.' for the working directory), got ''"
    )
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "kw, name",
    [
        ({"task": "markov"}, "task"),
        ({"widths": 10.0}, "widths"),
        ({"subsets": "all"}, "subsets"),
        ({"heatmap_widths": 3}, "heatmap_widths"),
    ],
)
def test_study_config_names_a_wrong_type(kw, name):
    from dotattn.paths.study import StudyConfig
    from dotattn.paths.task import MarkovTask

    args = {"task": MarkovTask(), "widths": (10.0,), **kw}
    with pytest.raises(ParameterError, match=rf"^{name} must be"):
        StudyConfig(**args)
