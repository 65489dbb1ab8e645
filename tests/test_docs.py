"""The README and docs/ stand alone: every relative link resolves inside the repository,
and nothing links outside it (readers have the repository, not its neighbours, and are
often offline). URLs to a local service (localhost, 127.0.0.1) are examples, not links
out, and are allowed."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from wander.client.error_codes import ErrorCode

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1"})

FENCE = re.compile(r"^ {0,3}(```|~~~).*?^ {0,3}\1[^\n]*$", re.MULTILINE | re.DOTALL)
CODE_SPAN = re.compile(r"``.+?``|`[^`]*`", re.DOTALL)
INLINE_LINK = re.compile(r"\[[^\]]*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
AUTOLINK = re.compile(r"<([a-zA-Z][a-zA-Z0-9+.-]*:[^>\s]+)>")
REFERENCE = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?([^\s>]+)>?", re.MULTILINE)
URL = re.compile(r"\bhttps?://[^\s)>\]\"'`]+")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")
HEADING = re.compile(r"^ {0,3}#{1,6}[ \t]+(.+?)[ \t#]*$", re.MULTILINE)


def prose(text: str) -> str:
    """The text without code blocks and code spans, where a link is only an example."""
    return CODE_SPAN.sub("", FENCE.sub("", text))


def links(text: str) -> list[str]:
    """Targets of the Markdown links of ``text``: inline, autolinks and references."""
    text = prose(text)
    return [
        match.group(1)
        for pattern in (INLINE_LINK, AUTOLINK, REFERENCE)
        for match in pattern.finditer(text)
    ]


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: its text, lower case, punctuation dropped,
    spaces as hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "").replace("\\", "")
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    found: set[str] = set()
    for heading in HEADING.findall(FENCE.sub("", page.read_text("utf-8"))):
        base = anchor = slug(heading)
        count = 0
        while anchor in found:  # repeated headings get -1, -2, ...
            count += 1
            anchor = f"{base}-{count}"
        found.add(anchor)
    return found


def is_local(url: str) -> bool:
    parts = urlsplit(url)
    return parts.scheme in {"http", "https"} and parts.hostname in LOCAL_HOSTS


def problems(page: Path, root: Path = ROOT) -> list[str]:
    """What is wrong with the links of ``page``, one line per link."""
    text = page.read_text("utf-8")
    found = [
        f"{url}: a URL outside the repository" for url in URL.findall(text) if not is_local(url)
    ]
    for target in links(text):
        if SCHEME.match(target):
            if not (is_local(target) or URL.match(target)):  # http(s): counted above
                found.append(f"{target}: a link outside the repository")
            continue
        path, _, fragment = target.partition("#")
        if path.startswith("/"):
            found.append(f"{target}: an absolute path (renderers disagree on its root)")
            continue
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.is_relative_to(root):
            found.append(f"{target}: escapes the repository")
        elif not resolved.exists():
            found.append(f"{target}: no such file in the repository")
        elif fragment and resolved.suffix == ".md" and fragment not in anchors(resolved):
            found.append(f"{target}: no heading #{fragment} in {resolved.name}")
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_every_link_stays_in_the_repository_and_resolves(page: Path) -> None:
    assert problems(page) == []


def test_the_readme_links_every_page_of_docs() -> None:
    linked = {
        (ROOT / target.partition("#")[0]).resolve()
        for target in links((ROOT / "README.md").read_text("utf-8"))
    }
    assert len(PAGES) > 1
    assert [page.name for page in PAGES[1:] if page not in linked] == []


def test_the_checker_finds_links_out_broken_links_and_missing_headings(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "api.md").write_text("# API\n\n## Step semantics\n", "utf-8")
    page = tmp_path / "README.md"
    page.write_text(
        "# Title\n\n"
        "The contract is in [DESIGN](../shared/DESIGN.md) and [the API](docs/api.md#steps);\n"
        "see [step\nsemantics](docs/api.md#step-semantics), [gone](docs/gone.md),\n"
        "[the data](https://example.com/data), <https://example.com/x>, [mail](mailto:a@b.c)\n"
        "and [a root path](/etc/passwd). Local examples are fine: <http://127.0.0.1:8000/docs>,\n"
        "[docs](http://localhost:8000/docs), [top](#title).\n\n"
        "```bash\ncurl https://example.org/install.sh  # a URL in code is still a way out\n"
        "[not a link](nowhere.md)\n```\n",
        "utf-8",
    )
    assert sorted(problems(page, tmp_path)) == sorted(
        [
            "../shared/DESIGN.md: escapes the repository",
            "docs/api.md#steps: no heading #steps in api.md",
            "docs/gone.md: no such file in the repository",
            "https://example.com/data: a URL outside the repository",
            "mailto:a@b.c: a link outside the repository",
            "https://example.com/x: a URL outside the repository",
            "https://example.org/install.sh: a URL outside the repository",
            "/etc/passwd: an absolute path (renderers disagree on its root)",
        ]
    )


ERROR_ROW = re.compile(r"^\| (\d{3}) \| `([a-z_]+)` \|", re.MULTILINE)


def error_table(page: Path) -> list[tuple[str, int]]:
    """The (code, status) rows of the page's table under ``## Errors``."""
    text = page.read_text("utf-8")
    section = text.split("\n## Errors\n", 1)[1].split("\n## ", 1)[0]
    return [(code, int(status)) for status, code in ERROR_ROW.findall(section)]


def test_the_errors_table_of_the_api_is_the_table_of_codes() -> None:
    """docs/api.md lists each code of ``ErrorCode`` once, with its status, and no other."""
    rows = error_table(ROOT / "docs" / "api.md")
    assert len(rows) == len({code for code, _ in rows})  # no code twice
    assert sorted(rows) == sorted((code.value, code.status) for code in ErrorCode)
