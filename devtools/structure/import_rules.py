"""The layering rules, declared once: tests/test_import_rules.py enforces them and the structure
report (``python -m poolq.devtools.structure_report``) measures the tree against them.

Between packages, edges -> products -> job core -> {engine, storage}: the edges are api (HTTP, CLI, the
client) and worker (Celery, the in-process runner); products (batches, schedules, estimates, sinks,
webhooks) stand on the job core (jobs), which reaches them only through ``JobContext.hooks``; devtools
stands between api and jobs; engine and storage stand alone. Every import of poolq's own code goes
through the installed namespace, ``poolq.<package>``.

Inside a package: its rooms (a subfolder, or a module at its top) stand on floors, listed below
from the ground up. A room imports only rooms on lower floors, never one on its own floor or
above; and no modules import each other in a loop. Imports under ``if TYPE_CHECKING:`` count for
the floors (a type is a dependency too) but not for loops (they never run). A package's
``__init__.py`` is its face, above every floor.
"""
from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

PACKAGES = ("api", "devtools", "worker", "products", "jobs", "engine", "storage")
ALLOWED: dict[str, set[str]] = {
    "api": {"api", "devtools", "worker", "products", "jobs", "engine", "storage"},
    "devtools": {"devtools", "jobs", "engine", "storage"},
    "worker": {"worker", "products", "jobs", "engine", "storage"},
    "products": {"products", "jobs", "engine", "storage"},
    "jobs": {"jobs", "engine", "storage"},
    "engine": {"engine"},
    "storage": {"storage"},
}

# Floors, ground first. A room on one floor may import rooms of the floors below it only.
FLOORS: dict[str, tuple[tuple[str, ...], ...]] = {
    "jobs": (
        ("sink_settings",),  # one sink as the operator configures it (Settings.vector_sinks.sinks' values)
        ("spec", "settings"),  # what a job is (spec, state, status, ids); the service's settings
        ("inputs", "report"),  # records read from an input, shard descriptors, content hashes; the data report's counts
        ("ledger", "tasks"),  # the job's objects in the bucket; each task's engine requests and rows
        ("coordination",),  # shared live state: status cache, leases, dispatch window, queues
        # counters and logs; loaded engines; read-once records; what the products add (their hooks' shape)
        ("observability", "engine_pool", "written_once_cache", "job_hooks"),
        ("context",),  # wiring: a process's stores and the products' hooks, built once
        ("job_handle", "lane", "served_models"),  # a job bound once; the interactive lane (POST /v1/embeddings to compute
        # workers); what the deployment serves (GET /v1/models)
        ("tenancy", "status"),  # keys, uploads, input access; a job's status read from the ledger
        ("reuse",),  # content-addressed reuse (keys, store, decide pass, copies)
        ("planning",),  # the stages of planning an input into shards
        ("steps",),  # submit, plan, run a shard, finalize, cancel, give up
    ),
    "products": (
        ("webhooks",),  # signed events to the user's receivers
        ("sinks", "batches", "schedules", "estimate"),  # loads into vector stores; the Batch API; scheduled reindex;
        # dry-run estimates
        ("job_hooks",),  # the products' hooks into the job core (JobContext.hooks)
    ),
    "worker": (
        # the reconciler's passes, the in-process runner, the lane's worker side, the worker fleet (its set of
        # processes, their GPUs), queue choices, model warm-up
        ("broker_transport", "compute_presence", "fleet", "lane", "local_runner", "model_queues", "model_warmup",
         "reconciler"),
        ("celery_app",),  # the Celery app
        ("beat", "celery_tasks"),  # beat (its process and scheduler); the Celery tasks: deserialize, call, record
        ("worker_startup",),  # a worker process's start
    ),
    "engine": (
        ("config", "batch", "device", "request", "turns", "st_config"),  # device: CPU features, dtype, OOM
        ("model_spec", "tokenizer", "scheduling", "kernels", "attention"),  # scheduling: the scheduler, a step, its retry
        ("models", "scoring"),
        ("runners",),  # the padded and the packed forward
        ("pooling",),
        ("long_documents",),
        ("loading",),
        ("engine_loop",),  # the engine works in steps
        ("engine",),
    ),
    "api": (("server",), ("client",), ("cli",), ("__main__",)),
    # structure: these rules and the structure report's measures; structure_report: its command
    "devtools": (("demo", "devstack", "structure"), ("bench", "structure_report")),
}

Edge = tuple[str, str, bool]  # (importer, imported module, imported only for type checking)


def imports_of(path: Path) -> list[tuple[str, bool]]:
    """Every module ``path`` imports, with whether it is imported only for type checking."""
    return imports_in(ast.parse(path.read_text(encoding="utf-8")))


def imports_in(tree: ast.Module) -> list[tuple[str, bool]]:
    """Every module a parsed file imports (anywhere in it), with whether only for type checking."""
    typing_only: set[int] = set()
    statements: list[ast.Import | ast.ImportFrom] = []
    for node in ast.walk(tree):  # one walk: the tree's imports, and the nodes under ``if TYPE_CHECKING:``
        if isinstance(node, ast.If) and is_type_checking(node.test):
            typing_only.update(id(inner) for statement in node.body for inner in ast.walk(statement))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            statements.append(node)
    names: list[tuple[str, bool]] = []
    for node in statements:
        if isinstance(node, ast.Import):
            names.extend((alias.name, id(node) in typing_only) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            names.append((module, id(node) in typing_only))
            # ``from poolq.jobs import steps`` imports the module poolq.jobs.steps
            names.extend((f"{module}.{alias.name}", id(node) in typing_only) for alias in node.names)
    return names


def is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def room(module: str) -> str:
    """``poolq.jobs.steps.planner`` -> ``steps``; ``poolq.jobs.context`` -> ``context``."""
    parts = module.split(".")
    return parts[2] if len(parts) > 2 else "__init__"


def floor_violations(floors: tuple[tuple[str, ...], ...], edges: list[Edge]) -> list[str]:
    """Imports that do not point to a lower floor (rooms the floors do not name are violations too)."""
    floor_of = {name: level for level, rooms in enumerate(floors) for name in rooms}
    problems: list[str] = []
    for importer, imported, _ in edges:
        source, target = room(importer), room(imported)
        if source == target or source == "__init__":
            continue
        if source not in floor_of or target not in floor_of:
            problems.append(f"{importer} -> {imported}: room {source if source not in floor_of else target!r} "
                            "is on no floor")
        elif floor_of[source] <= floor_of[target]:
            problems.append(f"{importer} (floor {floor_of[source]}) -> {imported} (floor {floor_of[target]})")
    return sorted(set(problems))


def import_cycles(edges: list[Edge]) -> list[list[str]]:
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


def poolq_packages(modules: list[str]) -> set[str]:
    """Which of poolq's packages ``modules`` reach (``poolq.jobs.steps`` -> ``jobs``)."""
    return {name.split(".")[1] for name in modules if name.startswith("poolq.") and name.count(".") >= 1}
