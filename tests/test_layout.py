"""The house layout: three theories over one core, imports pointing only down.

Every ``import`` in the package is read from the source (module level and inside functions alike,
so lazy imports count), resolved to the package it lands in, and checked against the allowed
arrows. A move that makes a theory import another theory, or the core import a theory, fails here.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "dotattn"

ALLOWED: dict[str, set[str]] = {
    "core": {"core"},
    "positional_semantic": {"core", "positional_semantic"},
    "aim": {"core", "aim"},
    "paths": {"core", "paths"},
    "erm": {"core", "erm", "positional_semantic"},
    "theory_vs_erm": {"core", "positional_semantic", "erm", "theory_vs_erm"},
}
"""Which packages each package may import. No package imports ``dotattn/__init__.py`` (the public
re-exports): the version is :data:`dotattn.core.version.__version__`."""

ERM_MAY_USE = {"dotattn.positional_semantic.problem", "dotattn.positional_semantic.labels"}
"""What ERM may take from the theory: its problem specification and branch vocabulary, never a solver."""

THEORY_FREE_OF_TORCH = ("core", "positional_semantic", "aim", "paths")
TORCH_ALLOWED = {"dotattn/core/training.py", "dotattn/aim/gd.py", "dotattn/paths/images_gd.py"}
"""The only modules of those packages that import torch (the ``erm`` extra): the shared batched optimiser
loop, the AIM gradient-descent estimator and the attention-paths network trained on image episodes
(algorithms run beside the theory). Importing the package never imports them."""


def _imports(path: Path, root: Path | None = None) -> list[tuple[int, str, tuple[str, ...]]]:
    """(line, absolute module, imported names) of every import in ``path`` (relative imports resolved
    against its place under ``root``, the repository by default)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name, ()) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = path.relative_to(root or ROOT).with_suffix("").parts[: -node.level]
                mod = ".".join(base + ((node.module,) if node.module else ()))
            else:
                mod = node.module or ""
            out.append((node.lineno, mod, tuple(a.name for a in node.names)))
    return out


def _package_of(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "dotattn":
        return None
    return parts[1] if len(parts) > 1 and (PACKAGE / parts[1]).is_dir() else "<top>"


def _sources(package: str) -> list[Path]:
    return sorted((PACKAGE / package).rglob("*.py"))


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_imports_point_only_down(package):
    bad = []
    for path in _sources(package):
        for line, mod, names in _imports(path):
            target = _package_of(mod)
            if target is None:
                continue
            if target == "<top>":
                # nothing below the package's face imports it (the version is dotattn.core.version)
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {mod} {names}")
                continue
            if mod == "dotattn" + "." + target and names:  # `from dotattn.X import submodule`
                pass
            if target not in ALLOWED[package]:
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {mod} ({package} -> {target})")
    assert not bad, "imports that do not point down:\n" + "\n".join(bad)


def test_erm_takes_only_the_problem_from_the_theory():
    bad = []
    for path in _sources("erm"):
        for line, mod, names in _imports(path):
            if _package_of(mod) != "positional_semantic":
                continue
            full = {mod} if mod != "dotattn.positional_semantic" else {f"{mod}.{n}" for n in names}
            if not full <= ERM_MAY_USE:
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {mod} {names}")
    assert not bad, "ERM must not import a theory's solver:\n" + "\n".join(bad)


@pytest.mark.parametrize("package", THEORY_FREE_OF_TORCH)
def test_theories_never_import_torch(package):
    bad = [
        f"{p.relative_to(ROOT)}:{line}"
        for p in _sources(package)
        for line, mod, _ in _imports(p)
        if mod.split(".")[0] == "torch" and str(p.relative_to(ROOT)) not in TORCH_ALLOWED
    ]
    assert not bad, f"{package} imports torch: {bad}"


def test_no_flat_theory_modules_left_at_the_top():
    """The top of the package holds only ``__init__`` and the ``verify`` face; every other module
    belongs to a theory, the experiments, the studies or the core."""
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert top == ["__init__.py", "verify.py"]


def test_every_package_registers_its_folder_kinds():
    import dotattn.verify as verify

    kinds = verify.registered_kinds()
    owners = {k: v.check.__module__.split(".")[1] for k, v in kinds.items()}
    assert owners == {
        "phase-diagram": "positional_semantic",
        "rsb": "positional_semantic",
        "complexity": "positional_semantic",
        "erm": "erm",
        "restarts": "erm",
        "comparison": "theory_vs_erm",
        "alpha-c": "theory_vs_erm",
        "variants": "theory_vs_erm",
        "landscape": "theory_vs_erm",
        "aim-state-evolution": "aim",
        "aim-algorithms": "aim",
        "aim-free-entropy": "aim",
        "paths-theory": "paths",
        "paths-sample": "paths",
        "paths-images": "paths",
        "paths-networks": "paths",
    }


def test_layering_check_catches_a_back_arrow(tmp_path, monkeypatch):
    """The check itself can fail: a core module importing a theory is reported."""
    fake = tmp_path / "dotattn" / "core"
    fake.mkdir(parents=True)
    (tmp_path / "dotattn" / "aim").mkdir()
    (fake / "bad.py").write_text("def f():\n    from dotattn.aim import prior\n")
    monkeypatch.setattr(__import__(__name__), "ROOT", tmp_path)
    monkeypatch.setattr(__import__(__name__), "PACKAGE", tmp_path / "dotattn")
    with pytest.raises(AssertionError, match="core -> aim"):
        test_imports_point_only_down("core")


def _import_graph(root: Path) -> dict[str, set[str]]:
    """Module -> the package's modules it imports (every import, lazy and TYPE_CHECKING ones included;
    ``from P import name`` counts as importing ``P.name`` where that is a module, else ``P``)."""
    files = sorted(root.joinpath("dotattn").rglob("*.py")) + sorted(root.joinpath("cli").glob("*.py"))
    modules = {}
    for f in files:
        parts = list(f.relative_to(root).with_suffix("").parts)
        if parts[0] == "cli":
            parts = ["dotattn", "cli", *parts[1:]]
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for m, f in modules.items():
        for _, mod, names in _imports(f, root):
            if mod == "cli" or mod.startswith("cli."):  # cli/ is installed as dotattn.cli
                mod = f"dotattn.{mod}"
            targets = [f"{mod}.{n}" if f"{mod}.{n}" in modules else mod for n in names] or [mod]
            graph[m] |= {t for t in targets if t in modules and t != m}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            w = next(children, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    x = stack.pop()
                    on_stack.discard(x)
                    comp.append(x)
                    if x == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_no_import_cycle_and_nothing_imports_the_package_face():
    graph = _import_graph(ROOT)
    assert not _cycles(graph), f"import cycles: {_cycles(graph)}"
    up = sorted(m for m, targets in graph.items() if "dotattn" in targets)
    assert not up, f"modules that import the package face dotattn/__init__.py: {up}"


def test_cycle_check_catches_a_lazy_cycle(tmp_path):
    """The check itself can fail: a cycle closed by an import inside a function is found."""
    pkg = tmp_path / "dotattn" / "core"
    pkg.mkdir(parents=True)
    (tmp_path / "cli").mkdir()
    (tmp_path / "dotattn" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from dotattn.core import b\n")
    (pkg / "b.py").write_text("def f():\n    from dotattn.core.a import x\n")
    (pkg / "c.py").write_text("from . import a\n")
    assert _cycles(_import_graph(tmp_path)) == [["dotattn.core.a", "dotattn.core.b"]]
