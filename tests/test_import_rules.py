"""The layering rules.

Between packages: api -> devtools -> jobs -> {engine, storage}; engine and storage stand alone;
every import of poolq's own code goes through the installed namespace, ``poolq.<package>``.

Inside a package: its rooms (a subfolder, or a module at its top) stand on floors, listed below
from the ground up. A room imports only rooms on lower floors, never one on its own floor or
above; and no modules import each other in a loop. Imports under ``if TYPE_CHECKING:`` count for
the floors (a type is a dependency too) but not for loops (they never run). A package's
``__init__.py`` is its face, above every floor.
"""
import ast
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("api", "devtools", "jobs", "engine", "storage")
ALLOWED = {
    "api": {"api", "devtools", "jobs", "engine", "storage"},
    "devtools": {"devtools", "jobs", "engine", "storage"},
    "jobs": {"jobs", "engine", "storage"},
    "engine": {"engine"},
    "storage": {"storage"},
}

# Floors, ground first. A room on one floor may import rooms of the floors below it only.
FLOORS = {
    "jobs": (
        ("sink_settings",),  # one sink as the operator configures it (Settings.sinks' values)
        ("model", "settings"),  # what a job is (spec, state, status, ids); the service's settings
        ("inputs", "report"),  # records read from an input, shard descriptors, content hashes; the data report's counts
        ("ledger", "tasks"),  # the job's objects in the bucket; each task's engine requests and rows
        ("coordination",),  # shared live state: status cache, leases, dispatch window, queues
        ("observability", "engine_pool", "job_records"),  # counters and logs; loaded engines; read-once records
        ("context",),  # wiring: a process's stores, built once
        ("job_handle", "lane", "served_models"),  # a job bound once; the interactive lane (POST /v1/embeddings to compute
        # workers); what the deployment serves (GET /v1/models)
        ("tenancy", "status", "webhooks"),  # keys, uploads, input access; a job's status read from the ledger; signed events
        ("sinks", "reuse"),  # loads into the user's vector stores; content-addressed reuse (keys, store, decide pass, copies)
        ("planning",),  # the stages of planning an input into shards
        ("steps",),  # submit, plan, run a shard, finalize, cancel, give up
        ("batches", "schedules", "estimate"),  # the Batch API's objects; scheduled reindex; dry-run estimates
        ("worker", "local_runner"),  # the Celery edge; the in-process runner
    ),
    "engine": (
        ("config", "batch", "hardware", "request", "turns", "st_config", "oom"),
        ("model_spec", "tokenizer", "scheduler", "kernels", "attention", "step", "step_retry"),
        ("models", "runner", "scoring"),
        ("packed_runner",),
        ("pooling",),
        ("long_documents",),
        ("loading",),
        ("engine_loop",),  # the engine works in steps
        ("engine",),
    ),
    "api": (("server",), ("client",), ("cli",), ("__main__",)),
    "devtools": (("demo", "devstack"), ("bench",)),
}


def _imports(path: Path) -> list[tuple[str, bool]]:
    """Every module ``path`` imports, with whether it is imported only for type checking."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    typing_only = {id(node) for block in ast.walk(tree) if isinstance(block, ast.If) and _is_type_checking(block.test)
                   for stmt in block.body for node in ast.walk(stmt)}
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend((alias.name, id(node) in typing_only) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            names.append((module, id(node) in typing_only))
            # ``from poolq.jobs import steps`` imports the module poolq.jobs.steps
            names.extend((f"{module}.{alias.name}", id(node) in typing_only) for alias in node.names)
    return names


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(("poolq", *parts[:-1])) if parts[-1] == "__init__" else ".".join(("poolq", *parts))


def _modules(package: str) -> dict[str, Path]:
    return {_module_name(path): path for path in (ROOT / package).rglob("*.py")}


def _edges(package: str) -> list[tuple[str, str, bool]]:
    """(importer, imported module of the same package, typing only), for modules that exist."""
    modules = _modules(package)
    edges = []
    for name, path in modules.items():
        for imported, typing_only in _imports(path):
            if imported in modules and imported != name:
                edges.append((name, imported, typing_only))
    return edges


def _room(module: str) -> str:
    """``poolq.jobs.steps.planner`` -> ``steps``; ``poolq.jobs.context`` -> ``context``."""
    parts = module.split(".")
    return parts[2] if len(parts) > 2 else "__init__"


def floor_violations(floors: tuple[tuple[str, ...], ...], edges: list[tuple[str, str, bool]]) -> list[str]:
    """Imports that do not point to a lower floor (rooms the floors do not name are violations too)."""
    floor_of = {room: level for level, rooms in enumerate(floors) for room in rooms}
    problems = []
    for importer, imported, _ in edges:
        source, target = _room(importer), _room(imported)
        if source == target or source == "__init__":
            continue
        if source not in floor_of or target not in floor_of:
            problems.append(f"{importer} -> {imported}: room {source if source not in floor_of else target!r} "
                            "is on no floor")
        elif floor_of[source] <= floor_of[target]:
            problems.append(f"{importer} (floor {floor_of[source]}) -> {imported} (floor {floor_of[target]})")
    return sorted(set(problems))


def import_cycles(edges: list[tuple[str, str, bool]]) -> list[list[str]]:
    """Loops of modules importing each other at run time (Tarjan's strongly connected components)."""
    graph: dict[str, set[str]] = defaultdict(set)
    for importer, imported, typing_only in edges:
        if not typing_only:
            graph[importer].add(imported)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in list(graph):
        if node not in index:
            visit(node)
    return cycles


def _poolq_packages(modules: list[str]) -> set[str]:
    """Which of poolq's packages ``modules`` reach (``poolq.jobs.steps`` -> ``jobs``)."""
    return {name.split(".")[1] for name in modules if name.startswith("poolq.") and name.count(".") >= 1}


def _python_files() -> list[Path]:
    return [path for folder in (*PACKAGES, "tests", "infra") for path in (ROOT / folder).rglob("*.py")]


@pytest.mark.parametrize("package", PACKAGES)
def test_imports_point_one_way(package):
    offenders = {
        str(path.relative_to(ROOT)): sorted(_poolq_packages([name for name, _ in _imports(path)]) - ALLOWED[package])
        for path in (ROOT / package).rglob("*.py")
    }
    assert {k: v for k, v in offenders.items() if v} == {}


@pytest.mark.parametrize("package", sorted(FLOORS))
def test_rooms_import_only_lower_floors(package):
    assert floor_violations(FLOORS[package], _edges(package)) == []


@pytest.mark.parametrize("package", PACKAGES)
def test_no_modules_import_each_other_in_a_loop(package):
    assert import_cycles(_edges(package)) == []


def test_the_rules_catch_an_upward_import_and_a_loop():
    """The checks themselves: a planted upward import and a planted loop are reported."""
    floors = (("model",), ("steps",))
    upward = [("poolq.jobs.model.job_spec", "poolq.jobs.steps.submit", False)]
    assert floor_violations(floors, upward) == ["poolq.jobs.model.job_spec (floor 0) -> poolq.jobs.steps.submit (floor 1)"]
    sideways = [("poolq.jobs.steps.a", "poolq.jobs.model.b", False), ("poolq.jobs.steps.c", "poolq.jobs.extra.d", False)]
    assert floor_violations(floors, sideways) == ["poolq.jobs.steps.c -> poolq.jobs.extra.d: room 'extra' is on no floor"]
    loop = [("a", "b", False), ("b", "c", False), ("c", "a", False), ("c", "d", True), ("d", "c", False)]
    assert import_cycles(loop) == [["a", "b", "c"]]


def test_no_bare_or_relative_imports_of_poolq_code():
    """``import engine`` would import nothing once installed; relative imports hide where a name lives."""
    offenders = {}
    for path in _python_files():
        bad = [name for name, _ in _imports(path) if name.split(".")[0] in PACKAGES or name.startswith(".")]
        if bad:
            offenders[str(path.relative_to(ROOT))] = sorted(set(bad))
    assert offenders == {}


def test_the_bare_names_import_nothing_outside_the_repository(tmp_path):
    code = ("import importlib.util as u; "
            "print([n for n in ('api', 'devtools', 'jobs', 'engine', 'storage') if u.find_spec(n)])")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_scheduler_and_request_types_do_not_import_torch():
    code = ("import sys, poolq.engine.scheduler, poolq.engine.request, poolq.engine.batch, poolq.jobs.model.job_spec; "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_the_api_app_does_not_import_torch():
    code = "import sys, poolq.api.server.app, poolq.api.cli.main; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
