"""The product's structure, measured from its source with ``ast``: the import rules (floors) the
tests enforce, and the measures of ``python -m poolq.devtools.structure_report`` (docs/structure.md)."""
