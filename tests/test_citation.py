"""LICENSE, CITATION.cff and the README's BibTeX entry agree with pyproject.toml (title, version, licence)."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _pyproject() -> dict:
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _cff(key: str) -> str:
    m = re.search(rf'^{key}: "?([^"\n]+)"?$', (ROOT / "CITATION.cff").read_text(), re.M)
    assert m, key
    return m[1]


def test_license_file_is_the_licence_pyproject_names():
    text = (ROOT / "LICENSE").read_text()
    assert _pyproject()["license"]["text"] == "MIT" == _cff("license")
    assert text.startswith("MIT License") and "Copyright (c) " in text and "the dotattn authors" in text


def test_bibtex_entry_matches_citation_cff_and_pyproject():
    readme = (ROOT / "README.md").read_text()
    m = re.search(r"```bibtex\n(@software\{.*?\n\})\n```", readme, re.S)
    assert m, "no BibTeX entry in the README"
    fields = dict(re.findall(r"^\s*(\w+)\s*=\s*\{(.*)\},?$", m[1], re.M))
    assert fields["version"] == _pyproject()["version"] == _cff("version")
    assert fields["title"] == _cff("title")
    assert fields["license"] == _cff("license")
    assert (
        fields["author"] == "{the dotattn authors}"
        and 'name: "the dotattn authors"' in (ROOT / "CITATION.cff").read_text()
    )
