"""The constructors declared for the type checker match the ones the dataclasses generate.

:class:`~dotattn.erm.config.ErmConfig`, :class:`~dotattn.aim.algo_study.StudySpec` and
:class:`~dotattn.aim.amp.AMPConfig` accept looser inputs than the fields they store (a name for a list
of inits, a count for a list of seeds, a whole float for an integer), normalised in ``__post_init__``;
an ``__init__`` under ``if TYPE_CHECKING:`` tells mypy so. It is never executed, so this test reads it
from the source and checks that it lists the generated constructor's parameters, in order, with a
default exactly where the dataclass has one: a field added without it fails here.
"""

from __future__ import annotations

import ast
import importlib
import inspect

import pytest

CLASSES = [
    ("dotattn.erm.config", "ErmConfig"),
    ("dotattn.aim.algo_study", "StudySpec"),
    ("dotattn.aim.amp", "AMPConfig"),
]


def declared_init(module: str, name: str) -> list[tuple[str, bool]]:
    """(parameter, has a default) of the ``__init__`` declared under ``if TYPE_CHECKING:`` in class ``name``."""
    tree = ast.parse(inspect.getsource(importlib.import_module(module)))
    (cls,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name]
    for node in cls.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            (init,) = [f for f in node.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"]
            args = [a.arg for a in init.args.args[1:]]
            first_default = len(args) - len(init.args.defaults)
            return [(a, i >= first_default) for i, a in enumerate(args)]
    raise AssertionError(f"{name} declares no __init__ under TYPE_CHECKING")


@pytest.mark.parametrize(("module", "name"), CLASSES)
def test_declared_constructor_matches_the_dataclass(module: str, name: str) -> None:
    cls = getattr(importlib.import_module(module), name)
    generated = [
        (p.name, p.default is not inspect.Parameter.empty) for p in inspect.signature(cls.__init__).parameters.values()
    ][1:]
    assert declared_init(module, name) == generated
