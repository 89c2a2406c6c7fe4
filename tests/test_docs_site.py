"""The documentation site (mkdocs.yml, docs/): every page is in the navigation, and the strict build passes.

The build needs the ``docs`` extra (``pip install ".[docs]"``) and is skipped without it; the navigation
check needs only PyYAML.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def _nav_pages() -> list[str]:
    pytest.importorskip("yaml")
    import yaml

    class _Loader(yaml.SafeLoader):
        pass

    # mkdocs.yml names Python objects (!!python/name:..., !!python/object/apply:...): not needed here
    _Loader.add_multi_constructor("tag:yaml.org,2002:python/", lambda loader, suffix, node: None)
    config = yaml.load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"), Loader=_Loader)

    pages: list[str] = []

    def walk(item: object) -> None:
        if isinstance(item, str):
            pages.append(item)
        elif isinstance(item, list):
            for x in item:
                walk(x)
        elif isinstance(item, dict):
            for x in item.values():
                walk(x)

    walk(config["nav"])
    return pages


def test_every_docs_page_is_in_the_nav_and_every_nav_page_exists():
    nav = _nav_pages()
    pages = sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md"))
    assert sorted(set(pages) - set(nav)) == [], "pages under docs/ missing from mkdocs.yml's nav"
    assert sorted(set(nav) - set(pages)) == [], "nav entries of mkdocs.yml without a page under docs/"
    assert len(nav) == len(set(nav)), "a page is listed twice in the nav"


def test_mkdocs_build_strict(tmp_path):
    for module in ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python"):
        pytest.importorskip(module, reason="the docs extra is not installed")
    site = tmp_path / "site"
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"), "-d", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr

    # the front page shows the README's headline figure, copied from results/ by docs_tools/hooks.py
    index = (site / "index.html").read_text(encoding="utf-8")
    images = re.findall(r'<img[^>]*src="([^"]+)"', index)
    headline = [src for src in images if src.endswith("landscape/headline.png")]
    assert headline, images
    assert (site / headline[0]).is_file()

    # the API reference is generated from the docstrings
    api = (site / "api" / "positional_semantic" / "index.html").read_text(encoding="utf-8")
    assert 'id="dotattn.positional_semantic.catalogue.solve"' in api
    assert "All fixed points at sample complexity" in api  # solve's docstring
    assert ":func:" not in api  # the Sphinx roles became references (docs_tools/griffe_roles.py)
