"""The structure report, whole: every measure of the product tree, built in one pass over its files."""
from __future__ import annotations

import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date
from pathlib import Path

from poolq.devtools.structure.call_walk import Walk, function_named, route_handler, walk_calls
from poolq.devtools.structure.concepts import CONCEPTS, ConceptSpread, concept_spread
from poolq.devtools.structure.import_graph import ImportGraph, measure_imports
from poolq.devtools.structure.import_rules import PACKAGES
from poolq.devtools.structure.name_repeats import repeated_names
from poolq.devtools.structure.product_tree import PRODUCT_ROOT, ProductTree, read_tree
from poolq.devtools.structure.sizes import Sizes, measure_sizes
from poolq.devtools.structure.symbols import SymbolIndex

# The walks issue J4 names, found by name rather than by file, so that they still run once code moves.
DEFAULT_FUNCTIONS = ("plan_job", "run_shard")
DEFAULT_ROUTES = (("POST", "/v1/embeddings"),)


@dataclass(frozen=True)
class StructureReport:
    date: str
    commit: str  # "" outside a git checkout
    root: str
    sizes: Sizes
    imports: ImportGraph
    concepts: tuple[ConceptSpread, ...]
    name_repeats: tuple[str, ...]
    walks: tuple[Walk, ...]


def default_walks(tree: ProductTree) -> tuple[tuple[str, str], ...]:
    """(name, start) of the walks through plan_job, run_shard and the POST /v1/embeddings handler."""
    return (*((name, function_named(tree, name)) for name in DEFAULT_FUNCTIONS),
            *((f"{method} {path}", route_handler(tree, method, path)) for method, path in DEFAULT_ROUTES))


def build_report(root: Path = PRODUCT_ROOT, packages: tuple[str, ...] = PACKAGES, *,
                 walks: tuple[tuple[str, str], ...] | None = None, concepts: tuple[str, ...] = CONCEPTS,
                 allowed: Mapping[str, set[str]] | None = None,
                 floors: Mapping[str, tuple[tuple[str, ...], ...]] | None = None) -> StructureReport:
    """The report over ``root``'s ``packages``; ``walks`` as (name, ``module:function``), default_walks if None."""
    tree = read_tree(root, packages)
    index = SymbolIndex(tree)
    chosen = default_walks(tree) if walks is None else walks
    walked = tuple(walk_calls(index, name, start) for name, start in chosen)  # first: a bad start fails fast
    return StructureReport(
        date=date.today().isoformat(),
        commit=_commit(root),
        root=str(root),
        sizes=measure_sizes(tree),
        imports=measure_imports(tree, allowed, floors),
        concepts=concept_spread(tree, concepts),
        name_repeats=repeated_names(tree),
        walks=walked,
    )


def _commit(root: Path) -> str:
    """The checkout's commit, short, with "+changes" when its tree differs from it."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--", *PACKAGES], cwd=root, capture_output=True, text=True,
                               timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    if head.returncode != 0:
        return ""
    return head.stdout.strip() + ("+changes" if dirty.stdout.strip() else "")
