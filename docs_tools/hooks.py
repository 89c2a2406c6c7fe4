"""mkdocs hook: the repository files that docs/ links to become part of the site.

The pages under docs/ link to files outside docs/ (``../results/alpha_c_erm/headline.png``,
``../results/aim/README.md``, ``../benchmarks/README.md``): relative links that GitHub follows. mkdocs
only knows the files under ``docs_dir``, so these links would be left dangling (and, in strict mode,
fail the build). This hook

* collects, from every page, the relative links and images that point to an existing file of the
  repository outside docs/, and adds each such file to the site under ``repository/<its path>``:
  images and data files are copied, markdown files (the READMEs of ``results/`` and ``benchmarks/``)
  are rendered as pages, and their own links are followed the same way;
* rewrites, while each page is rendered, those links to the file's place in the site (and the links
  of the added pages back into docs/ to the docs pages), so that mkdocs validates and converts them
  like any other link;
* keeps the text of a link to a repository folder without a README (GitHub lists the folder; the site
  has no page for it) as plain text, with an INFO message.

The markdown sources are not changed: on GitHub every link keeps pointing at the repository file.
A link to a file that does not exist is left as it is, so ``mkdocs build --strict`` still fails on it.
"""

from __future__ import annotations

import logging
import posixpath
import xml.etree.ElementTree as etree
from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit

import markdown
from markdown.extensions import Extension
from markdown.treeprocessors import Treeprocessor
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files, InclusionLevel
from mkdocs.structure.pages import Page

log = logging.getLogger("mkdocs.hooks.repository_links")

# the site folder that holds the repository files outside docs/
PREFIX = "repository"

# the extensions used only to find the links of a page (code blocks and code spans hold no links)
_SCAN_EXTENSIONS = ["tables", "pymdownx.superfences"]


class _State:
    repo: Path = Path()
    docs: Path = Path()
    # absolute path of a repository file outside docs/ -> its src_uri in the site
    outside: dict[Path, str] = {}
    # src_uri of the page being rendered -> absolute path of its markdown source
    page_source: dict[str, Path] = {}
    current: Page | None = None


def _link_target(url: str, source: Path) -> tuple[Path, str, str] | None:
    """The file a relative link of the markdown file ``source`` points to, with its query and anchor."""
    scheme, netloc, path, query, anchor = urlsplit(url)
    if scheme or netloc or not path or path.startswith(("/", "\\")):
        return None
    target = (source.parent / unquote(path)).resolve()
    if target.is_dir() and (target / "README.md").is_file():
        target = target / "README.md"  # a folder link: GitHub shows the folder's README
    return target, query, anchor


class _Collector(Treeprocessor):
    def run(self, root: etree.Element) -> None:
        self.urls = [url for el in root.iter() for url in (el.get("href"), el.get("src")) if url]


class _Collect(Extension):
    def extendMarkdown(self, md: markdown.Markdown) -> None:  # noqa: N802 (Python-Markdown's name)
        self.collector = _Collector(md)
        md.treeprocessors.register(self.collector, "dotattn_collect_links", 5)


def _links(text: str) -> list[str]:
    """Every link and image URL of a markdown text, as Python-Markdown parses it."""
    collect = _Collect()
    markdown.Markdown(extensions=[*_SCAN_EXTENSIONS, collect]).convert(text)
    return collect.collector.urls


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    _State.repo = Path(config.config_file_path).resolve().parent
    _State.docs = Path(config.docs_dir).resolve()
    _State.outside = {}
    _State.page_source = {}
    config.markdown_extensions.append(_RepositoryLinks())
    return config


def on_files(files: Files, config: MkDocsConfig) -> Files:
    queue = [Path(f.abs_src_path).resolve() for f in files.documentation_pages() if f.abs_src_path]
    for page in queue:
        _State.page_source.setdefault(_site_uri(page), page)
    while queue:
        source = queue.pop()
        for url in _links(source.read_text(encoding="utf-8")):
            found = _link_target(url, source)
            if found is None:
                continue
            target = found[0]
            if (
                _inside(target, _State.docs)
                or not _inside(target, _State.repo)
                or not target.is_file()
                or target in _State.outside
            ):
                continue
            uri = f"{PREFIX}/{target.relative_to(_State.repo).as_posix()}"
            _State.outside[target] = uri
            # reachable through the links, not listed in the navigation
            files.append(File.generated(config, uri, abs_src_path=str(target), inclusion=InclusionLevel.NOT_IN_NAV))
            if target.suffix == ".md":
                _State.page_source[uri] = target
                queue.append(target)
    return files


def _site_uri(path: Path) -> str:
    if _inside(path, _State.docs):
        return path.relative_to(_State.docs).as_posix()
    return _State.outside[path]


def on_page_markdown(markdown_text: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    _State.current = page
    return markdown_text


# _rewrite's answer for a link to a repository folder that the site cannot show
_FOLDER = ""


def _rewrite(url: str, page_uri: str) -> str | None:
    source = _State.page_source.get(page_uri)
    if source is None:
        return None
    found = _link_target(url, source)
    if found is None:
        return None
    target, query, anchor = found
    if target in _State.outside:
        uri = _State.outside[target]
    elif _inside(target, _State.docs) and not _inside(source, _State.docs):
        uri = target.relative_to(_State.docs).as_posix()  # an added page links back into docs/
    elif target.is_dir() and _inside(target, _State.repo) and not _inside(target, _State.docs):
        log.info("%s: the link to the repository folder '%s' is kept as text", page_uri, url)
        return _FOLDER
    else:
        return None
    relative = posixpath.relpath(uri, posixpath.dirname(page_uri) or ".")
    return urlunsplit(("", "", relative, query, anchor))


class _RewriteProcessor(Treeprocessor):
    def run(self, root: etree.Element) -> None:
        page = _State.current
        if page is None:
            return
        for el in root.iter():
            for attr in ("href", "src"):
                url = el.get(attr)
                if url:
                    new = _rewrite(url, page.file.src_uri)
                    if new == _FOLDER and el.tag == "a":
                        el.tag = "span"  # the text stays, the link goes
                        el.attrib.clear()
                    elif new:
                        el.set(attr, new)


class _RepositoryLinks(Extension):
    def extendMarkdown(self, md: markdown.Markdown) -> None:  # noqa: N802 (Python-Markdown's name)
        # after the inline patterns (priority 20) have made the links, before mkdocs checks them (0)
        md.treeprocessors.register(_RewriteProcessor(md), "dotattn_repository_links", 5)
