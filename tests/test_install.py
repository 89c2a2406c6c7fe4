"""The light install: the theory and the CLI's help never import torch; the ERM commands ask for the extra."""

import json
from pathlib import Path

import pytest
from clitools import run_python

ROOT = Path(__file__).resolve().parents[1]

# Python run in a subprocess with `import torch` failing as on a machine without PyTorch: a finder first on
# sys.meta_path raises ModuleNotFoundError(name="torch") for torch and its submodules, as the import system
# does when no finder has them. (A None entry in sys.modules would also make the import fail, but code that
# only looks at sys.modules, as scipy's array-API layer does, then sees a "torch" that is not a module.)
NO_TORCH = """
import sys


class _NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, _NoTorch())
"""


python = run_python


def test_help_lists_every_command_without_importing_any(tmp_path):
    """`dotattn --help` imports neither torch, nor the solver, nor any command module."""
    code = """
import json, sys
from dotattn.cli.main import LAZY_COMMANDS, main
try:
    main(["--help"])
except SystemExit as exc:
    code = exc.code
loaded = sorted(m for m in ["torch", "dotattn.positional_semantic.catalogue", *(c.module for c in LAZY_COMMANDS.values())]
                if m in sys.modules)
print(json.dumps({"code": code, "loaded": loaded, "help": {k: c.help for k, c in LAZY_COMMANDS.items()}}),
      file=sys.stderr)
"""
    r = python(code, tmp_path)
    info = json.loads(r.stderr.strip().splitlines()[-1])
    assert info["code"] == 0 and info["loaded"] == [], info
    listing = " ".join(r.stdout.split())
    assert set(info["help"]) >= {"solve", "phase-diagram", "train-erm", "compare"}
    for name, text in info["help"].items():
        assert text.strip() and f"{name} {' '.join(text.split())}" in listing, (name, r.stdout)


def test_table_help_is_the_command_docstring():
    import importlib

    from dotattn.cli.main import LAZY_COMMANDS, cli

    for name, entry in LAZY_COMMANDS.items():
        importlib.import_module(entry.module)
        assert cli.commands[name].get_short_help_str(10_000) == entry.help, name


def test_missing_torch_names_the_extra(tmp_path):
    out = tmp_path / "erm_out"
    code = NO_TORCH + (
        f"from dotattn.cli.main import main\nmain(['train-erm', '--d', '10', '--alpha', '1', '--out', {str(out)!r}])\n"
    )
    r = python(code, tmp_path)
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    from dotattn.cli.main import EXTRA_INSTALL

    assert lines == [f"Error: train-erm needs PyTorch; install {EXTRA_INSTALL['erm']}"], r.stderr
    assert "cpu-torch.txt" in lines[0]  # the CPU route, never a bare pip install that pulls CUDA
    assert r.stdout == "" and not out.exists()


@pytest.mark.parametrize("command", ["solve", "phase-diagram", "compare"])
def test_theory_commands_work_without_torch(command, tmp_path):
    r = python(NO_TORCH + f"from dotattn.cli.main import main\nmain([{command!r}, '--help'])\n", tmp_path)
    assert r.returncode == 0 and "Usage: dotattn" in r.stdout, r.stderr


def test_the_no_torch_hook_works(tmp_path):
    """The hook itself: `import torch` fails as on a machine without it, and scipy.stats still imports."""
    r = python(
        NO_TORCH + "try:\n    import torch\nexcept ModuleNotFoundError as e:\n    print('missing', e.name)\n"
        "import scipy.stats\nprint('torch' in sys.modules)\n",
        tmp_path,
    )
    assert r.returncode == 0 and r.stdout.split() == ["missing", "torch", "False"], r.stderr


def _no_torch_main(args: list[str], cwd):
    code = NO_TORCH + (f"from dotattn.cli.main import main\nmain({args!r})\n")
    return python(code, cwd)


def test_theory_commands_compute_without_torch(tmp_path):
    """solve, a tiny phase-diagram (1 ω, 3 α, Gauss-Hermite 4 without a coarse pass) and compare (on an
    ERM folder made beforehand, with torch, by train-erm) run to completion with `import torch` failing,
    and write what they write with torch. phase-diagram and compare write to a relative --out (the
    subprocess runs in tmp_path), which once failed in the manifest (the folder joined twice)."""
    r = _no_torch_main(
        [
            "solve",
            "--alpha",
            "2",
            "--omega",
            "0.3",
            "--quad-order",
            "6",
            "--coarse-order",
            "0",
            "--random-starts",
            "0",
            "--json",
        ],
        tmp_path,
    )
    assert r.returncode == 0, r.stderr
    fps = json.loads(r.stdout)["fixed_points"]
    assert {f["branch"] for f in fps if f["status"] == "converged"} >= {"positional", "semantic"}
    pd = tmp_path / "pd"
    r = _no_torch_main(
        [
            "phase-diagram",
            "--omega",
            "0.3",
            "--alpha",
            "1,1.5,2",
            "--quad-order",
            "4",
            "--coarse-order",
            "0",
            "--workers",
            "1",
            "--quiet",
            "--out",
            "pd",
        ],
        tmp_path,
    )
    assert r.returncode == 0, r.stderr
    assert (pd / "phase_diagram.csv").stat().st_size > 0 and (pd / "summary.json").stat().st_size > 0
    assert len(json.loads((pd / "summary.json").read_text())["omegas"]) == 1
    from dotattn.core.io import verify_manifest

    verify_manifest(pd, ["phase_diagram.csv", "boundaries.csv", "summary.json"])  # listed, present, hashes match
    pytest.importorskip("torch")  # only to make the ERM folder that compare reads
    from clitools import run

    erm = tmp_path / "erm"
    r = run(
        "train-erm",
        "--d",
        "24",
        "--alpha",
        "2",
        "--omega",
        "0.3",
        "--seeds",
        "1",
        "--steps",
        "30",
        "--test-samples",
        "100",
        "--threads",
        "1",
        "--quiet",
        "--out",
        str(erm),
    )
    assert r.returncode == 0, r.stderr
    out = tmp_path / "cmp"
    r = _no_torch_main(
        ["compare", "--erm", str(erm), "--quad-order", "4", "--coarse-order", "0", "--out", "cmp"], tmp_path
    )
    assert r.returncode == 0, r.stderr
    table = json.loads((out / "comparison.json").read_text())["table"]
    assert {row["alpha"] for row in table} == {2.0} and all(row["theory_test_error"] > 0 for row in table)
    verify_manifest(out, ["comparison.json", "comparison.csv"])


def test_theory_never_imports_torch(tmp_path):
    modules = [
        "dotattn",
        "dotattn.positional_semantic.catalogue",
        "dotattn.positional_semantic.phase_diagram",
        "dotattn.theory_vs_erm.comparison",
        "dotattn.positional_semantic.plotting",
        "dotattn.core.io",
        "dotattn.positional_semantic.baseline",
        "dotattn.cli.solve",
        "dotattn.cli.phase",
        "dotattn.cli.compare",
    ]
    code = NO_TORCH + "".join(f"import {m}\n" for m in modules) + "print('ok')\n"
    r = python(code, tmp_path)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


def test_torch_is_an_extra_only():
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]

    def names(reqs):
        return {req.split("[")[0].split(">")[0].split("=")[0].split("<")[0].strip() for req in reqs}

    assert "torch" not in names(project["dependencies"])
    extras = project["optional-dependencies"]
    assert "torch" in names(extras["erm"])
    assert names(extras["erm"]) | names(extras["dask"]) | {"pytest", "cvxpy"} <= names(extras["test"])


def test_missing_extra_inside_a_running_command():
    """A command that imports an optional package only when it runs gets the same one line."""
    from click.testing import CliRunner
    from dotattn.cli.main import LazyGroup

    group = LazyGroup("g")

    @group.command("needs-torch")
    def needs_torch():
        raise ModuleNotFoundError("No module named 'torch'", name="torch")

    @group.command("needs-other")
    def needs_other():
        raise ModuleNotFoundError("No module named 'not_an_extra'", name="not_an_extra")

    r = CliRunner().invoke(group, ["needs-torch"])
    assert r.exit_code == 2
    from dotattn.cli.main import EXTRA_INSTALL

    assert r.output.strip().splitlines()[-1] == f"Error: needs-torch needs PyTorch; install {EXTRA_INSTALL['erm']}"
    r = CliRunner().invoke(group, ["needs-other"])  # a missing module that is no extra is a bug: not hidden
    assert isinstance(r.exception, ModuleNotFoundError) and r.exception.name == "not_an_extra"
