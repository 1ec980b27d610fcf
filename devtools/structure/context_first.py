"""One argument order for the job context: a function that takes ``ctx`` (a ``JobContext``) takes it
first, after ``self``/``cls`` for methods (issue J4). One place to look for it, so a caller never has to
remember where it goes; ``misplaced_contexts`` lists the functions that break the rule (tests aside:
their fixtures are named by pytest, not ordered by us)."""
from __future__ import annotations

import ast
import os
from collections.abc import Iterator
from pathlib import Path

CONTEXT = "ctx"
_RECEIVERS = ("self", "cls")
_SKIPPED_FOLDERS = frozenset({"tests", "__pycache__"})
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


def _parameters(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    """Its named parameters in order (keyword-only ones last), the receiver of a method left out."""
    arguments = function.args
    names = [argument.arg for argument in arguments.posonlyargs + arguments.args + arguments.kwonlyargs]
    return names[1:] if names and names[0] in _RECEIVERS else names


def _sources(root: Path) -> Iterator[Path]:
    """Its .py files, folder by folder; the skipped folders are not entered (a local store under .poolq/ is large)."""
    for folder, subfolders, files in os.walk(root):
        subfolders[:] = sorted(name for name in subfolders if name not in _SKIPPED_FOLDERS and not name.startswith("."))
        yield from (Path(folder) / name for name in sorted(files) if name.endswith(".py"))


def misplaced_in(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, name) of each function in ``tree`` that takes ``ctx`` somewhere other than first."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, _FUNCTIONS):
            names = _parameters(node)
            if CONTEXT in names and names[0] != CONTEXT:
                found.append((node.lineno, node.name))
    return sorted(found)


def misplaced_contexts(root: Path) -> list[str]:
    """``"path:line function"`` for each function under ``root`` (``tests/`` folders and hidden ones
    aside) whose ``ctx`` is not its first parameter; a file that does not parse is a SyntaxError
    naming it."""
    found: list[str] = []
    for path in _sources(root):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        relative = path.relative_to(root).as_posix()
        found.extend(f"{relative}:{line} {name}" for line, name in misplaced_in(tree))
    return found
