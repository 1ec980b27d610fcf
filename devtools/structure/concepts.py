"""How far a concept has spread: for a word ("sink", "webhook", ...), the product files whose path
or text mention it (any case, anywhere, "sinks" and "SinkConfig" included) outside a folder named
after it (``sink/``, ``sinks/``, ``sinkes/``... at any depth). A plain substring count: it cannot
tell the engine's "batch" of sequences from the Batch API's, and is not meant to.

The report's own files are not counted: they name every concept by necessity (the floors' table, the
list of words), and counting them would move every number the day the report came in."""
from __future__ import annotations

from dataclasses import dataclass

from poolq.devtools.structure.product_tree import ProductTree

CONCEPTS = ("sink", "webhook", "schedule", "batch", "estimate")
REPORT_FILES = ("devtools/structure/", "devtools/structure_report.py")  # the measuring tool itself


@dataclass(frozen=True)
class ConceptSpread:
    word: str
    outside: tuple[str, ...]  # files mentioning it outside its home folders
    at_home: int  # files inside them


def home_folders(word: str) -> frozenset[str]:
    return frozenset({word, f"{word}s", f"{word}es"})


def concept_spread(tree: ProductTree, words: tuple[str, ...] = CONCEPTS) -> tuple[ConceptSpread, ...]:
    return tuple(_spread(tree, word) for word in words)


def _spread(tree: ProductTree, word: str) -> ConceptSpread:
    needle, homes = word.lower(), home_folders(word.lower())
    outside, at_home = [], 0
    for source in tree.files:
        if source.path.startswith(REPORT_FILES):
            continue
        if homes.intersection(source.folder.lower().split("/")):
            at_home += 1
        elif needle in source.path.lower() or needle in source.text.lower():
            outside.append(source.path)
    return ConceptSpread(word, tuple(outside), at_home)
