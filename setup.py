"""Packaging glue: the repository's root installs as the package ``poolq`` (its ``__init__.py``, the public
face) and its top-level folders as ``poolq.*``.

Everything else about the distribution is in pyproject.toml. The package list is computed from the
tree, so a new subpackage can never be missing from the wheel while the editable install still works.
"""
from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

FOLDERS = ("engine", "storage", "jobs", "products", "worker", "devtools", "api")  # each installs as poolq.<folder>


def poolq_packages() -> list[str]:
    return ["poolq", *(f"poolq.{name}" for name in find_packages(include=[f"{folder}*" for folder in FOLDERS]))]


class BuildPy(build_py):
    """The root is the package ``poolq``, but of its own modules only ``__init__.py`` is poolq's (not setup.py)."""

    def find_package_modules(self, package, package_dir):
        modules = super().find_package_modules(package, package_dir)
        return [m for m in modules if package != "poolq" or m[1] == "__init__"]


setup(packages=poolq_packages(), package_dir={"poolq": ".", **{f"poolq.{folder}": folder for folder in FOLDERS}},
      cmdclass={"build_py": BuildPy})
