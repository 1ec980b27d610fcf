"""The product's Python files, read and parsed once: every ``.py`` file of the packages (api, jobs,
engine, storage, devtools), without ``__pycache__`` or a ``tests`` folder. The packages' ``.pyi``
faces (``jobs/__init__.pyi``) are not product files: they are kept apart, for resolving the names a
face re-exports, and counted nowhere."""
from __future__ import annotations

import ast
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from poolq.devtools.structure.import_rules import PACKAGES, imports_in

# devtools/structure/product_tree.py -> the folder holding api/, jobs/, ... (the repository's root when
# installed editable, the installed poolq/ otherwise): the report never depends on the working directory.
PRODUCT_ROOT = Path(__file__).resolve().parents[2]
_SKIPPED_FOLDERS = frozenset({"__pycache__", "tests"})


@dataclass(frozen=True)
class SourceFile:
    path: str  # relative to the product's root, with slashes: "jobs/steps/planner.py"
    module: str  # as installed: "poolq.jobs.steps.planner"
    lines: int
    text: str = field(repr=False)
    tree: ast.Module = field(repr=False, compare=False)

    @property
    def package(self) -> str:
        return self.path.split("/", 1)[0]

    @property
    def folder(self) -> str:
        """The folder the file sits in: "jobs/steps"."""
        return self.path.rpartition("/")[0]

    @cached_property
    def imports(self) -> list[tuple[str, bool]]:
        """The modules it imports, each with whether only for type checking (import_rules.imports_in)."""
        return imports_in(self.tree)

    @property
    def is_package_face(self) -> bool:
        return self.path.endswith("/__init__.py")


@dataclass(frozen=True)
class ProductTree:
    root: Path
    packages: tuple[str, ...]
    files: tuple[SourceFile, ...]  # in path order
    stubs: dict[str, ast.Module] = field(repr=False)  # module -> its .pyi face, for name resolution only

    @cached_property
    def by_module(self) -> dict[str, SourceFile]:
        return {source.module: source for source in self.files}

    @property
    def total_lines(self) -> int:
        return sum(source.lines for source in self.files)


def module_name(relative: Path) -> str:
    """``jobs/steps/planner.py`` -> ``poolq.jobs.steps.planner``; ``jobs/__init__.py`` -> ``poolq.jobs``."""
    parts = relative.with_suffix("").parts
    return ".".join(("poolq", *parts[:-1])) if parts[-1] == "__init__" else ".".join(("poolq", *parts))


def read_tree(root: Path = PRODUCT_ROOT, packages: tuple[str, ...] = PACKAGES) -> ProductTree:
    """Every product file under ``root``'s ``packages``, parsed; a missing package folder or a file that
    does not parse is an error naming it."""
    files, stubs = [], {}
    for package in packages:
        folder = root / package
        if not folder.is_dir():
            raise FileNotFoundError(f"structure report: no package folder {folder}")
        for path in sorted(folder.rglob("*.py*")):
            relative = path.relative_to(root)
            if _SKIPPED_FOLDERS.intersection(relative.parts[:-1]) or path.suffix not in (".py", ".pyi"):
                continue
            text = path.read_text(encoding="utf-8")
            tree = ast.parse(text, filename=str(path))  # a SyntaxError names the file and line
            if path.suffix == ".pyi":
                stubs[module_name(relative)] = tree
            else:
                files.append(SourceFile(relative.as_posix(), module_name(relative), len(text.splitlines()), text, tree))
    return ProductTree(root, packages, tuple(sorted(files, key=lambda source: source.path)), stubs)
