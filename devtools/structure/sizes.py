"""How the product's lines are spread: per package (a share of the product's Python), per room of
one package (a subfolder, or its top modules together), modules per folder, and the long files."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from poolq.devtools.structure.product_tree import ProductTree

PACKAGE_SHARE_LIMIT = 40.0  # % of the product's lines one package may hold (issue J4)
FOLDER_MODULES_LIMIT = 15  # modules in one folder
FILE_LINES_LIMIT = 300  # the project's habit: files under ~300 lines
TOP_MODULES = "*.py"  # the room of a package's top-level modules, as a folder row names it: "jobs/*.py"


@dataclass(frozen=True)
class LineShare:
    name: str  # "jobs", or a room of one: "jobs/steps", "jobs/*.py"
    lines: int
    percent: float  # of the product's lines
    percent_of_package: float  # of its package's lines (100 for a package)


@dataclass(frozen=True)
class FolderModules:
    folder: str
    modules: int  # .py files right in it, its __init__.py left out (a package's face, not one of its modules)
    over_limit: bool


@dataclass(frozen=True)
class LongFile:
    path: str
    lines: int


@dataclass(frozen=True)
class Sizes:
    total_lines: int
    files: int
    packages: tuple[LineShare, ...]
    rooms: tuple[LineShare, ...]  # of the package named by ``rooms_of``
    folders: tuple[FolderModules, ...]
    long_files: tuple[LongFile, ...]  # over FILE_LINES_LIMIT, longest first


def measure_sizes(tree: ProductTree, rooms_of: str = "jobs") -> Sizes:
    total = tree.total_lines
    per_package = Counter({package: 0 for package in tree.packages})
    per_room: Counter[str] = Counter()
    modules: Counter[str] = Counter()
    for source in tree.files:
        per_package[source.package] += source.lines
        if source.package == rooms_of:
            per_room[_room_of(source.path)] += source.lines
        modules[source.folder] += 0 if source.is_package_face else 1
    package_rows = tuple(LineShare(name, lines, _percent(lines, total), 100.0) for name, lines in sorted(per_package.items()))
    package_lines = per_package[rooms_of]
    room_rows = tuple(LineShare(name, lines, _percent(lines, total), _percent(lines, package_lines))
                      for name, lines in sorted(per_room.items(), key=lambda item: (-item[1], item[0])))
    folders = tuple(FolderModules(folder, count, count > FOLDER_MODULES_LIMIT) for folder, count in sorted(modules.items()))
    long_files = tuple(LongFile(source.path, source.lines)
                       for source in sorted(tree.files, key=lambda source: (-source.lines, source.path))
                       if source.lines > FILE_LINES_LIMIT)
    return Sizes(total, len(tree.files), package_rows, room_rows, folders, long_files)


def _room_of(path: str) -> str:
    """``jobs/steps/planner.py`` -> ``jobs/steps``; ``jobs/context.py`` -> ``jobs/*.py``."""
    parts = path.split("/")
    return f"{parts[0]}/{parts[1]}" if len(parts) > 2 else f"{parts[0]}/{TOP_MODULES}"


def _percent(part: int, whole: int) -> float:
    return round(100.0 * part / whole, 2) if whole else 0.0
