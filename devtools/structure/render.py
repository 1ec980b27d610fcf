"""The structure report as Markdown (tables for docs/structure.md) and as JSON (for tests and diffs)."""
from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict

from poolq.devtools.structure.report import StructureReport
from poolq.devtools.structure.sizes import FILE_LINES_LIMIT, FOLDER_MODULES_LIMIT, PACKAGE_SHARE_LIMIT

OVER = "**over**"


def as_json(report: StructureReport) -> str:
    document = asdict(report)
    document["imports"]["upward_imports"] = report.imports.upward_imports
    document["limits"] = {"package_share_percent": PACKAGE_SHARE_LIMIT, "folder_modules": FOLDER_MODULES_LIMIT,
                          "file_lines": FILE_LINES_LIMIT}
    return json.dumps(document, indent=2)


def as_markdown(report: StructureReport, verbose: bool = False) -> str:
    sections = [_heading(report), _packages(report), _rooms(report), _folders(report, verbose), _long_files(report, verbose),
                _imports(report, verbose), _concepts(report, verbose), _repeats(report), _walks(report, verbose)]
    return "\n\n".join(section for section in sections if section) + "\n"


def _heading(report: StructureReport) -> str:
    sizes = report.sizes
    packages = ", ".join(share.name for share in sizes.packages)
    return (f"Structure of the product ({packages}) on {report.date}, commit {report.commit or 'unknown'}: "
            f"{sizes.total_lines} lines of Python in {sizes.files} files.")


def _table(header: Iterable[str], rows: Iterable[Iterable[object]]) -> str:
    header = list(header)
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines.extend("| " + " | ".join(str(cell) for cell in row) + " |" for row in rows)
    return "\n".join(lines)


def _packages(report: StructureReport) -> str:
    rows = [(f"`{share.name}/`", share.lines, f"{share.percent:.1f} %", OVER if share.percent > PACKAGE_SHARE_LIMIT else "")
            for share in report.sizes.packages]
    return f"### Lines per package (limit {PACKAGE_SHARE_LIMIT:g} % of the product)\n\n" + _table(
        ("package", "lines", "share", ""), rows)


def _rooms(report: StructureReport) -> str:
    if not report.sizes.rooms:
        return ""
    package = report.sizes.rooms[0].name.split("/")[0]
    rows = [(f"`{share.name}`", share.lines, f"{share.percent:.1f} %", f"{share.percent_of_package:.1f} %")
            for share in report.sizes.rooms]
    return f"### Lines per folder of `{package}/`\n\n" + _table(("folder", "lines", "of the product", f"of {package}/"), rows)


def _folders(report: StructureReport, verbose: bool) -> str:
    folders = report.sizes.folders
    shown = folders if verbose else [folder for folder in folders if folder.over_limit]
    largest = max(folders, key=lambda folder: folder.modules, default=None)
    summary = (f"{sum(folder.over_limit for folder in folders)} of {len(folders)} folders hold more than "
               f"{FOLDER_MODULES_LIMIT} modules (`__init__.py` not counted)"
               + (f"; the largest is `{largest.folder}/` ({largest.modules})." if largest else "."))
    table = _table(("folder", "modules", ""), [(f"`{f.folder}/`", f.modules, OVER if f.over_limit else "") for f in shown])
    return "### Modules per folder\n\n" + summary + ("\n\n" + table if shown else "")


def _long_files(report: StructureReport, verbose: bool) -> str:
    files = report.sizes.long_files
    summary = f"{len(files)} files over {FILE_LINES_LIMIT} lines."
    if not files:
        return f"### Long files\n\n{summary}"
    shown = files if verbose else files[:10]
    more = "" if len(shown) == len(files) else f"\n\n(the {len(shown)} longest; `--verbose` lists all)"
    return f"### Long files\n\n{summary}\n\n" + _table(("file", "lines"), [(f"`{f.path}`", f.lines) for f in shown]) + more


def _imports(report: StructureReport, verbose: bool) -> str:
    graph = report.imports
    rows = [
        ("module → module imports (pairs)", graph.module_edges),
        ("… of which only under `if TYPE_CHECKING:`", graph.typing_only_edges),
        ("folder → folder edges", len(graph.folder_edges)),
        ("upward imports between packages", len(graph.package_violations)),
        *((f"upward imports between the floors of `{package}/`", len(problems))
          for package, problems in graph.floor_violations.items()),
        ("import cycles at run time", len(graph.cycles)),
        ("import cycles counting `TYPE_CHECKING` imports", len(graph.cycles_with_type_checking)),
    ]
    text = "### Imports\n\n" + _table(("measure", "count"), rows)
    problems = [*graph.package_violations, *(p for found in graph.floor_violations.values() for p in found),
                *(" → ".join(cycle) + " (cycle)" for cycle in graph.cycles),
                *(" → ".join(cycle) + " (cycle with TYPE_CHECKING)" for cycle in graph.cycles_with_type_checking)]
    if problems:
        text += "\n\n" + "\n".join(f"- {problem}" for problem in problems)
    if verbose:
        text += "\n\n" + _table(("from", "to", "module pairs"),
                                [(f"`{edge.source}/`", f"`{edge.target}/`", edge.imports) for edge in graph.folder_edges])
    return text


def _concepts(report: StructureReport, verbose: bool) -> str:
    rows = [(f"`{spread.word}`", len(spread.outside), spread.at_home) for spread in report.concepts]
    text = "### Concepts outside their folder\n\n" + _table(("word", "files outside", "files in its folders"), rows)
    if verbose:
        text += "".join(f"\n\n`{spread.word}` outside: " + ", ".join(f"`{path}`" for path in spread.outside)
                        for spread in report.concepts if spread.outside)
    return text


def _repeats(report: StructureReport) -> str:
    names = report.name_repeats
    listing = "".join(f"\n- `{path}`" for path in names)
    return f"### Modules that repeat their folder's name\n\n{len(names)} modules.{listing and chr(10) + listing}"


def _walks(report: StructureReport, verbose: bool) -> str:
    if not report.walks:
        return ""
    rows = [(walk.name, f"`{walk.start}`", len(walk.stops), len(walk.files), walk.returns) for walk in report.walks]
    text = "### Call walks\n\n" + _table(("walk", "start", "stops", "files", "returns"), rows)
    if verbose:
        for walk in report.walks:
            text += f"\n\n{walk.name}:\n" + "\n".join(f"{number}. `{stop}`" for number, stop in enumerate(walk.stops, 1))
    return text
