"""Packaging glue: the repository's top-level folders install as one namespace, ``poolq.*``.

Everything else about the distribution is in pyproject.toml. The package list is computed from the
tree, so a new subpackage can never be missing from the wheel while the editable install still works.
"""
from setuptools import find_packages, setup

FOLDERS = ("engine", "storage", "jobs", "devtools", "api")  # each installs as poolq.<folder>


def poolq_packages() -> list[str]:
    return [f"poolq.{name}" for name in find_packages(include=[f"{folder}*" for folder in FOLDERS])]


setup(packages=poolq_packages(), package_dir={f"poolq.{folder}": folder for folder in FOLDERS})
