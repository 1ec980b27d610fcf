"""docs/architecture.md's floors are tests/test_import_rules.py's FLOORS: each package's table names
every room of every floor, on its floor, and no room that does not exist (a folder written ``name/``,
a module ``name.py``, as on disk)."""
from __future__ import annotations

import re

import pytest
from test_import_rules import FLOORS, ROOT

PAGE = ROOT / "docs" / "architecture.md"
_SECTION = re.compile(r"^### `(\w+)/`, from the ground up$", re.MULTILINE)
_ROW = re.compile(r"^\| (\d+) \| ([^|]*) \|", re.MULTILINE)
_ROOM = re.compile(r"`(\w+)(/|\.py)`")


def documented_floors(text: str) -> dict[str, list[list[str]]]:
    """Per package: its table's floors, ground first, each the rooms (``model/``, ``settings.py``) its
    rooms cell names; a table's floors must be numbered 1, 2, ... in order."""
    sections = list(_SECTION.finditer(text))
    floors: dict[str, list[list[str]]] = {}
    for section, following in zip(sections, [*sections[1:], None]):
        body = text[section.end():following.start() if following else len(text)]
        rows = _ROW.findall(body)
        assert [int(number) for number, _ in rows] == list(range(1, len(rows) + 1)), (section.group(1), rows)
        floors[section.group(1)] = [[name + suffix for name, suffix in _ROOM.findall(cell)] for _, cell in rows]
    return floors


def _as_on_disk(package: str, room: str) -> str:
    return f"{room}/" if (ROOT / package / room).is_dir() else f"{room}.py"


@pytest.mark.parametrize("package", sorted(FLOORS))
def test_the_page_names_every_room_on_its_floor(package):
    documented = documented_floors(PAGE.read_text(encoding="utf-8"))
    expected = [sorted(_as_on_disk(package, room) for room in floor) for floor in FLOORS[package]]
    assert [sorted(floor) for floor in documented.get(package, [])] == expected


def test_every_room_the_page_names_exists():
    for package, floors in documented_floors(PAGE.read_text(encoding="utf-8")).items():
        for room in (room for floor in floors for room in floor):
            path = ROOT / package / room.rstrip("/")
            assert path.is_dir() if room.endswith("/") else path.is_file(), f"docs/architecture.md: {package}/{room}"


def test_a_room_left_out_or_misplaced_is_caught():
    page = "### `engine/`, from the ground up\n\n| floor | rooms |\n|---|---|\n| 1 | `config.py` (the `batch.py` one) |\n"
    assert documented_floors(page) == {"engine": [["config.py", "batch.py"]]}
    with pytest.raises(AssertionError):
        documented_floors(page.replace("| 1 |", "| 2 |"))
