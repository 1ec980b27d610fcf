"""The code blocks of README.md and docs/*.md, read the way a CommonMark renderer reads them.

A block is *runnable* when its info string names a shell or Python; the example runner
(tests/docs/test_examples.py) runs each one unless an HTML comment ``<!-- not-run: why -->`` stands
right before its fence. Other languages (``text``, ``json``, ...) are pictures and listings, never run.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from markdown_it import MarkdownIt

REPO_ROOT = Path(__file__).resolve().parents[2]
SHELL = frozenset({"bash", "sh", "shell"})
PYTHON = frozenset({"python", "py"})
NOT_RUN = re.compile(r"^<!--\s*not-run:(?P<reason>.*?)-->\s*$", re.DOTALL)
# A line a reader would take for a fence: up to 3 spaces, then ``` or ~~~.
FENCE_LIKE = re.compile(r"^ {0,3}(```|~~~)")


@dataclass(frozen=True)
class CodeBlock:
    path: str  # relative to the repository root
    line: int  # the opening fence's line, from 1
    language: str
    text: str
    not_run: str | None  # the marker's reason, if the block is marked

    @property
    def runnable(self) -> bool:
        return self.language in SHELL | PYTHON

    @property
    def name(self) -> str:
        return f"{self.path}:{self.line}"


def documents() -> list[Path]:
    """README first, then every docs page, in name order, those in docs' subfolders (docs/sinks/) included."""
    return [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").rglob("*.md"))]


def code_blocks(path: Path) -> list[CodeBlock]:
    return code_blocks_in(path.read_text(encoding="utf-8"), path.relative_to(REPO_ROOT).as_posix())


def code_blocks_in(text: str, name: str) -> list[CodeBlock]:
    tokens = MarkdownIt("commonmark").parse(text)
    blocks, previous = [], None
    for token in tokens:
        if token.type == "fence" and token.map:
            reason = _marker_reason(previous)
            language = token.info.split()[0] if token.info.strip() else ""
            blocks.append(CodeBlock(name, token.map[0] + 1, language, token.content, reason))
        if token.type not in ("paragraph_close", "inline"):
            previous = token
    return blocks


def _marker_reason(token) -> str | None:
    if token is None or token.type != "html_block":
        return None
    match = NOT_RUN.match(token.content.strip())
    return match.group("reason").strip() if match else None


def markdown_problems(text: str, name: str = "<text>") -> list[str]:
    """What a CommonMark renderer would show other than the author meant, one line each: a fence-like
    line that opens or closes no block (a stray fence, which swallows the text after it into code), a
    fence left open to the end, a fence without a language (so the example runner could not tell what
    it is), a not-run marker without a reason or with no fence after it."""
    lines = text.splitlines()
    tokens = MarkdownIt("commonmark").parse(text)
    fence_lines: set[int] = set()
    problems = []
    for index, token in enumerate(tokens):
        if token.type == "fence" and token.map:
            start, end = token.map
            fence_lines.add(start)
            closed = end - 1 > start and FENCE_LIKE.match(lines[end - 1]) is not None
            if closed:
                fence_lines.add(end - 1)
            else:
                problems.append(f"{name}:{start + 1}: the fence opened here is never closed")
            if not token.info.strip():
                problems.append(f"{name}:{start + 1}: a fence without a language (```bash, ```python, ```text)")
        if token.type == "html_block" and token.content.lstrip().startswith("<!-- not-run"):
            match = NOT_RUN.match(token.content.strip())
            following = tokens[index + 1] if index + 1 < len(tokens) else None
            if not match or not match.group("reason").strip():
                problems.append(f"{name}:{token.map[0] + 1 if token.map else '?'}: a not-run marker must say why")
            elif following is None or following.type != "fence":
                problems.append(f"{name}:{token.map[0] + 1 if token.map else '?'}: a not-run marker with no fence after it")
    for number, line in enumerate(lines):
        if FENCE_LIKE.match(line) and number not in fence_lines and not _inside_fence(tokens, number):
            problems.append(f"{name}:{number + 1}: a stray fence: {line.strip()[:60]!r} opens or closes no code block")
    for token in tokens:  # a fence-like line swallowed into another block's code
        if token.type == "fence" and token.map:
            start, end = token.map
            for number in range(start + 1, end - 1):
                if FENCE_LIKE.match(lines[number]) and len(lines[number]) - len(lines[number].lstrip()) <= 3:
                    problems.append(f"{name}:{number + 1}: a stray fence inside the block opened at line {start + 1}: "
                                    f"{lines[number].strip()[:60]!r}")
    return problems


def _inside_fence(tokens, number: int) -> bool:
    return any(t.type == "fence" and t.map and t.map[0] < number < t.map[1] - 1 for t in tokens)


def broken_links(path: Path) -> list[str]:
    """Relative links of the page at ``path`` whose file or heading (``#anchor``, GitHub's slugs) is missing."""
    text = path.read_text(encoding="utf-8")
    problems = []
    for token in MarkdownIt("commonmark").parse(text):
        for child in token.children or ():
            href = child.attrs.get("href") if child.type == "link_open" else None
            if not isinstance(href, str) or "://" in href or href.startswith("mailto:"):
                continue
            target, _, anchor = href.partition("#")
            page = (path.parent / target).resolve() if target else path
            where = f"{path.name}:{(token.map or [0])[0] + 1}: {href}"
            if not page.exists():
                problems.append(f"{where}: no such file")
            elif anchor and page.suffix == ".md" and anchor not in heading_slugs(page.read_text(encoding="utf-8")):
                problems.append(f"{where}: no heading #{anchor} in {page.name}")
    return problems


def heading_slugs(text: str) -> set[str]:
    """The anchors GitHub gives a page's headings: lower case, punctuation dropped, spaces as hyphens."""
    tokens = MarkdownIt("commonmark").parse(text)
    titles = [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "heading_open"]
    return {re.sub(r"[^\w\- ]", "", title.replace("`", "").lower()).replace(" ", "-") for title in titles}
