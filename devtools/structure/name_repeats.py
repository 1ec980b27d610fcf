"""Modules whose name repeats their folder's: ``batches/batches.py``, ``batches/batch_files.py``,
``sinks/sink_load.py``. The folder already says it; the repeat is a hint that the folder holds
one concept spread over several files, or that a file and its folder grew apart."""
from __future__ import annotations

from poolq.devtools.structure.product_tree import ProductTree


def name_stems(folder: str) -> frozenset[str]:
    """The folder's name and its singulars: ``batches`` -> batches, batche, batch."""
    stems = {folder}
    if folder.endswith("s"):
        stems.add(folder[:-1])
    if folder.endswith("es"):
        stems.add(folder[:-2])
    return frozenset(stem for stem in stems if stem)


def repeats_folder(module: str, folder: str) -> bool:
    """``batch_files`` in ``batches`` does; ``stack`` in ``devstack`` does not (whole words only)."""
    return any(module == stem or module.startswith(f"{stem}_") or module.endswith(f"_{stem}") for stem in name_stems(folder))


def repeated_names(tree: ProductTree) -> tuple[str, ...]:
    """The paths of the modules (faces and ``__main__`` aside) whose name repeats their folder's."""
    found = []
    for source in tree.files:
        folder, _, name = source.path.rpartition("/")
        module = name.removesuffix(".py")
        if not module.startswith("__") and repeats_folder(module, folder.rpartition("/")[2]):
            found.append(source.path)
    return tuple(found)
