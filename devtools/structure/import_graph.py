"""The product's imports, module by module, measured against the rules of import_rules.py: the
edges between folders, the imports that point the wrong way (between packages, and between the
rooms of a package's floors), and the loops of modules importing each other.

An edge is one module importing another module of the product, counted once per pair whatever the
number of import statements; it is *typing only* when every import of the pair sits under ``if
TYPE_CHECKING:``. Loops are counted twice: at run time (typing-only edges left out, as the tests
enforce) and with the typing-only edges in (a loop only the type checker sees)."""
from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from poolq.devtools.structure.import_rules import (
    ALLOWED,
    FLOORS,
    Edge,
    floor_violations,
    import_cycles,
    poolq_packages,
)
from poolq.devtools.structure.product_tree import ProductTree


@dataclass(frozen=True)
class FolderEdge:
    source: str  # "jobs/steps"
    target: str
    imports: int  # module pairs


@dataclass(frozen=True)
class ImportGraph:
    module_edges: int
    typing_only_edges: int
    folder_edges: tuple[FolderEdge, ...]
    package_violations: tuple[str, ...]  # a module importing a package its own may not import
    floor_violations: dict[str, tuple[str, ...]]  # per package with floors: imports not pointing to a lower floor
    cycles: tuple[tuple[str, ...], ...]  # at run time
    cycles_with_type_checking: tuple[tuple[str, ...], ...]

    @property
    def upward_imports(self) -> int:
        return len(self.package_violations) + sum(len(problems) for problems in self.floor_violations.values())


def module_edges(tree: ProductTree) -> list[Edge]:
    """(importer, imported product module, typing only), one per pair, in order."""
    typing_only: dict[tuple[str, str], bool] = {}
    for source in tree.files:
        for imported, only_for_types in source.imports:
            if imported in tree.by_module and imported != source.module:
                pair = (source.module, imported)
                typing_only[pair] = typing_only.get(pair, True) and only_for_types
    return [(importer, imported, only) for (importer, imported), only in sorted(typing_only.items())]


def measure_imports(tree: ProductTree, allowed: Mapping[str, set[str]] | None = None,
                    floors: Mapping[str, tuple[tuple[str, ...], ...]] | None = None) -> ImportGraph:
    """The product's import graph against ``allowed`` and ``floors`` (import_rules' by default)."""
    rules = ALLOWED if allowed is None else allowed
    floors_of = FLOORS if floors is None else floors
    edges = module_edges(tree)
    return ImportGraph(
        module_edges=len(edges),
        typing_only_edges=sum(1 for *_, only in edges if only),
        folder_edges=_folder_edges(tree, edges),
        package_violations=_package_violations(tree, rules),
        floor_violations={package: tuple(floor_violations(floors_of[package], _inside(package, edges)))
                          for package in tree.packages if package in floors_of},
        cycles=_sorted_cycles(edges),
        cycles_with_type_checking=_sorted_cycles([(importer, imported, False) for importer, imported, _ in edges]),
    )


def _folder_edges(tree: ProductTree, edges: list[Edge]) -> tuple[FolderEdge, ...]:
    folder_of = {source.module: source.folder for source in tree.files}
    counts = Counter((folder_of[importer], folder_of[imported]) for importer, imported, _ in edges
                     if folder_of[importer] != folder_of[imported])
    return tuple(FolderEdge(source, target, count) for (source, target), count in sorted(counts.items()))


def _package_violations(tree: ProductTree, allowed: Mapping[str, set[str]]) -> tuple[str, ...]:
    problems: list[str] = []
    for source in tree.files:
        reached = poolq_packages([name for name, _ in source.imports])
        forbidden = reached - allowed.get(source.package, {source.package})
        problems.extend(f"{source.path} imports {package}" for package in sorted(forbidden))
    return tuple(problems)


def _inside(package: str, edges: list[Edge]) -> list[Edge]:
    prefix = f"poolq.{package}"
    return [edge for edge in edges if all(name == prefix or name.startswith(prefix + ".") for name in edge[:2])]


def _sorted_cycles(edges: list[Edge]) -> tuple[tuple[str, ...], ...]:
    # import_cycles walks sets: its order of loops may change from one process to the next, its loops do not
    return tuple(sorted(tuple(cycle) for cycle in import_cycles(edges)))
