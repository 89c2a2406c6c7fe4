"""Griffe extension: the Sphinx markup of dotattn's docstrings, as the site shows it.

The docstrings name other objects with Sphinx roles (``:func:`solve```, ``:class:`~dotattn.core.runner.RunLock```,
``:mod:`~.problem```), which mkdocstrings would print as they are. After the package is loaded, this
extension rewrites every such role into an *optional* mkdocs-autorefs reference: a link where the
target is documented on the site, plain code otherwise (no warning: most helpers have no page).
The target is resolved in the docstring's scope (a bare name as Python would see it there, a leading
dot relative to the module's package); ``~`` shows only the last component, as in Sphinx.
A paragraph that ends in ``::`` (reStructuredText: a literal block follows, which markdown shows as
code already, being indented) ends in ``:``. The source files are not changed.
"""

from __future__ import annotations

import html
import re
from typing import Any

import griffe

_LITERAL = re.compile(r"(?<=\S)::\n(?=[ \t]*\n)")
_ROLE = re.compile(r":(?:py:)?(?:func|class|mod|meth|attr|data|exc|obj|const):`(?P<tilde>~?)(?P<target>[^`<>]+)`")


def _resolve(obj: griffe.Object, target: str) -> str:
    if target.startswith("."):
        module = obj if obj.is_module else obj.module
        package = module if module.is_package else module.parent
        base = package.path if package is not None else module.path
        return base + target
    head, _, rest = target.partition(".")
    try:
        resolved = obj.resolve(head)
    except Exception:  # noqa: BLE001 (griffe raises several kinds; an unresolved name stays as written)
        return target
    return f"{resolved}.{rest}" if rest else resolved


def _rewrite(obj: griffe.Object, text: str) -> str:
    def replace(match: re.Match[str]) -> str:
        target = match["target"].strip()
        title = target.lstrip(".").rsplit(".", 1)[-1] if match["tilde"] else target
        identifier = html.escape(_resolve(obj, target), quote=True)
        return f'<autoref identifier="{identifier}" optional><code>{html.escape(title)}</code></autoref>'

    return _ROLE.sub(replace, _LITERAL.sub(":\n", text))


def _walk(obj: griffe.Object) -> None:
    if obj.docstring is not None:
        obj.docstring.value = _rewrite(obj, obj.docstring.value)
    for member in obj.members.values():
        if not member.is_alias and isinstance(member, griffe.Object):
            _walk(member)


class SphinxRoles(griffe.Extension):
    """Rewrite the Sphinx roles of every docstring of the loaded package."""

    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        _walk(pkg)
