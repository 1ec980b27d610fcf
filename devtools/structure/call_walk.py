"""A call walk: from one function, follow its calls through the product, the way a reader would.

Heuristic, and deterministic: the same tree gives the same walk, stop for stop.

- The walk is depth first, in reading order: a function's callees are taken in the order they first
  appear in its body (nested functions and lambdas belong to the body that holds them), and each
  callee is walked before the next one. Each function is a stop once, however often it is called.
- A callee is a product function or method the body names: called (``f()``, ``obj.method()``, a
  class called, which stops at its ``__init__`` and ``__post_init__`` where the product defines
  them), handed to a call as an argument (``run_sync(_answer, ...)``: a callback), or a property
  read (``job.ledger`` runs its getter).
- Names resolve as symbols.py says: through imports and re-exports (a package's ``.pyi`` face
  too), and through types read from annotations and assignments. A call on something of unknown
  type (another library's object, a container's item, an untyped return) is not followed; a
  method called on a protocol or base class stops at that class's method, not at the
  implementations; calls made only through dictionaries or ``getattr`` are not seen.
- ``stops`` are the functions visited, in order; ``files`` the files they are in, in the order first
  entered; ``returns`` the times the walk, going from one stop to the next, enters a file it had
  already left (reading A, then B, then A again is one return). Unwinding the call stack does not
  count by itself: only the stops' order does.
"""
from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass

from poolq.devtools.structure.product_tree import ProductTree
from poolq.devtools.structure.symbols import (
    AnnotatedField,
    AssignedField,
    Class,
    Function,
    FunctionNode,
    Instance,
    Module,
    SymbolIndex,
    Value,
)

_CONSTRUCTORS = ("__init__", "__post_init__")


@dataclass(frozen=True)
class Walk:
    name: str  # what the report calls it: "plan_job", "POST /v1/embeddings"
    start: str  # "poolq.jobs.steps.planner:plan_job"
    stops: tuple[str, ...]  # "jobs/steps/planner.py:plan_job", in the order visited
    files: tuple[str, ...]  # in the order first entered
    returns: int


class WalkError(ValueError):
    """A walk's start that names no product function."""


def walk_calls(index: SymbolIndex, name: str, start: str) -> Walk:
    """The walk from ``start`` (``module:function`` or ``module:Class.method``)."""
    stops: list[Function] = []
    seen: set[Function] = set()
    pending: list[Iterator[Function]] = [iter([find_function(index, start)])]  # the call stack, each with its callees left
    while pending:
        function = next(pending[-1], None)
        if function is None:
            pending.pop()
        elif function not in seen:
            seen.add(function)
            stops.append(function)
            pending.append(iter(callees(index, function)))
    paths = [index.tree.by_module[stop.module].path for stop in stops]
    return Walk(name, start, tuple(f"{path}:{stop.qualname}" for path, stop in zip(paths, stops)),
                tuple(dict.fromkeys(paths)), count_returns(paths))


def count_returns(paths: list[str]) -> int:
    """Entries into a file already left: ``[a, b, a, a, c, b]`` -> 2."""
    returns, left = 0, set()
    for previous, current in zip(paths, paths[1:]):
        if current != previous:
            left.add(previous)
            returns += current in left
    return returns


def find_function(index: SymbolIndex, start: str) -> Function:
    module, colon, qualname = start.partition(":")
    if not colon or not module or not qualname:
        raise WalkError(f"walk start {start!r}: expected module:function, as poolq.jobs.steps.planner:plan_job")
    if module not in index.tree.by_module:
        raise WalkError(f"walk start {start!r}: no product module {module}")
    head, _, method = qualname.partition(".")
    found = index.resolve(module, head)  # an imported name starts where it is defined
    if not method:
        if isinstance(found, Function):
            return found
        raise WalkError(f"walk start {start!r}: {module} has no function {head}")
    member = index.member_of_class(found, method) if isinstance(found, Class) else None
    owner, node = member if member is not None else (None, None)
    if owner is None or not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        raise WalkError(f"walk start {start!r}: {module} has no class {head} with a method {method}")
    return Function(owner.module, f"{owner.qualname}.{method}", node, owner)


def callees(index: SymbolIndex, function: Function) -> list[Function]:
    """The product functions ``function``'s body calls, hands on or reads as properties, in reading order."""
    scope = _Scope(index, function)
    found: dict[Function, None] = {}
    for node in _reading_order(function.node):
        for callee in scope.callees_of(node):
            found.setdefault(callee)
    return list(found)


def _reading_order(function: FunctionNode) -> Iterator[ast.AST]:
    """The body's nodes, depth first in source order (decorators and annotations left out)."""
    pending: list[ast.AST] = list(reversed(function.body))
    while pending:
        node = pending.pop()
        yield node
        pending.extend(reversed([child for child in ast.iter_child_nodes(node) if not isinstance(child, ast.arg)]))


class _Scope:
    """One function's names: its parameters and locals, typed once, then its module's."""

    def __init__(self, index: SymbolIndex, function: Function) -> None:
        self.index, self.function = index, function
        self.locals: dict[str, Value] = {}
        self._type_parameters(function.node)
        for node in _reading_order(function.node):
            self._type_local(node)

    def callees_of(self, node: ast.AST) -> list[Function]:
        if isinstance(node, ast.Call):
            named = self.target(node.func)
            called = [named] if isinstance(named, Function) and not named.is_property else []
            if isinstance(named, Class):
                called.extend(self._constructors(named))
            handed = [self.target(argument) for argument in [*node.args, *(keyword.value for keyword in node.keywords)]
                      if isinstance(argument, (ast.Name, ast.Attribute))]
            return called + [value for value in handed if isinstance(value, Function) and not value.is_property]
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
            named = self.target(node)
            return [named] if isinstance(named, Function) and named.is_property else []
        return []

    def target(self, expr: ast.expr) -> Value | None:
        """What ``expr`` names; a property as its getter (``value`` reads it)."""
        if isinstance(expr, ast.Name):
            return self.locals.get(expr.id) or self.index.resolve(self.function.module, expr.id)
        if isinstance(expr, ast.Attribute):
            return self._attribute(self.value(expr.value), expr.attr)
        return self.value(expr)

    def value(self, expr: ast.expr) -> Value | None:
        """What ``expr`` evaluates to, as far as annotations tell."""
        if isinstance(expr, (ast.Name, ast.Attribute)):
            named = self.target(expr)
            return self._returns(named) if isinstance(named, Function) and named.is_property else named
        if isinstance(expr, ast.Call):
            called = self.target(expr.func)
            if isinstance(called, Class):
                return Instance(called)
            return self._returns(called) if isinstance(called, Function) else None
        if isinstance(expr, ast.Await):
            return self.value(expr.value)
        return None

    def _attribute(self, base: Value | None, name: str) -> Value | None:
        if isinstance(base, Module):
            return self.index.member_of_module(base.name, name)
        if isinstance(base, (Class, Instance)):
            cls = base if isinstance(base, Class) else base.cls
            found = self.index.member_of_class(cls, name)
            return self._member(found[0], name, found[1]) if found is not None else None
        return None

    def _member(self, owner: Class, name: str, member: object) -> Value | None:
        if isinstance(member, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return Function(owner.module, f"{owner.qualname}.{name}", member, owner)
        if isinstance(member, AnnotatedField):
            return self.index.annotation_type(owner.module, member.annotation)
        if isinstance(member, AssignedField):
            return self._assigned(owner, name, member)
        return None

    def _assigned(self, owner: Class, name: str, member: AssignedField) -> Value | None:
        """The type of what a method assigns to ``self.name``, worked out once per field (a field typed by
        itself, through others, is unknown)."""
        known = self.index.field_types
        if (owner, name) not in known:
            known[owner, name] = None  # while it is worked out
            method = Function(owner.module, f"{owner.qualname}.{member.method.name}", member.method, owner)
            known[owner, name] = _Scope(self.index, method).value(member.value)
        return known[owner, name]

    def _returns(self, function: Function) -> Value | None:
        return self.index.annotation_type(function.module, function.node.returns)

    def _constructors(self, cls: Class) -> list[Function]:
        found = [self.index.member_of_class(cls, name) for name in _CONSTRUCTORS]
        return [Function(owner.module, f"{owner.qualname}.{name}", member, owner)
                for name, hit in zip(_CONSTRUCTORS, found) if hit is not None
                for owner, member in [hit] if isinstance(member, (ast.FunctionDef, ast.AsyncFunctionDef))]

    def _type_parameters(self, node: FunctionNode) -> None:
        arguments = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
        owner = self.function.owner
        if owner is not None and arguments and not self.function.is_static and node is self.function.node:
            first = arguments.pop(0)
            self.locals[first.arg] = owner if self.function.is_classmethod else Instance(owner)
        for argument in arguments:
            typed = self.index.annotation_type(self.function.module, argument.annotation)
            if typed is not None:
                self.locals.setdefault(argument.arg, typed)

    def _type_local(self, node: ast.AST) -> None:
        """The first type a local is given wins (flow-insensitive, and deterministic)."""
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self._type_parameters(node)  # a nested function's annotated parameters
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            self._give(node.target.id, self.index.annotation_type(self.function.module, node.annotation))
        elif isinstance(node, (ast.Assign, ast.NamedExpr)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    self._give(target.id, self.value(node.value))
        elif isinstance(node, ast.withitem) and isinstance(node.optional_vars, ast.Name):
            self._give(node.optional_vars.id, self.value(node.context_expr))

    def _give(self, name: str, typed: Value | None) -> None:
        if typed is not None and name not in self.locals:
            self.locals[name] = typed


def route_handler(tree: ProductTree, method: str, path: str) -> str:
    """``module:function`` of the handler of ``method path`` (``POST /v1/embeddings``): a function decorated
    ``@router.post("...")`` whose router is ``APIRouter(prefix="...")`` in its module, prefix and path joined."""
    found = []
    for source in tree.files:
        prefixes = {target.id: prefix for statement in source.tree.body if isinstance(statement, ast.Assign)
                    if (prefix := _prefix(statement.value)) is not None
                    for target in statement.targets if isinstance(target, ast.Name)}
        for statement in source.tree.body:
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                    _route_of(decorator, prefixes) == (method.lower(), path) for decorator in statement.decorator_list):
                found.append(f"{source.module}:{statement.name}")
    if len(found) != 1:
        raise WalkError(f"route {method} {path}: {len(found)} handlers found in the product ({', '.join(found) or 'none'})")
    return found[0]


def function_named(tree: ProductTree, name: str) -> str:
    """``module:name`` of the one top-level function of the product called ``name``."""
    found = [f"{source.module}:{name}" for source in tree.files for statement in source.tree.body
             if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)) and statement.name == name]
    if len(found) != 1:
        raise WalkError(f"function {name}: {len(found)} top-level definitions in the product ({', '.join(found) or 'none'})")
    return found[0]


def _prefix(value: ast.expr) -> str | None:
    """``APIRouter(prefix="/v1/x", ...)`` -> "/v1/x" (a router without one: ""); anything else: None."""
    if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "APIRouter"):
        return None
    prefix = next((keyword.value for keyword in value.keywords if keyword.arg == "prefix"), None)
    return prefix.value if isinstance(prefix, ast.Constant) and isinstance(prefix.value, str) else ""


def _route_of(decorator: ast.expr, prefixes: dict[str, str]) -> tuple[str, str] | None:
    if not (isinstance(decorator, ast.Call) and isinstance(decorator.func, ast.Attribute)
            and isinstance(decorator.func.value, ast.Name) and decorator.func.value.id in prefixes):
        return None
    first = decorator.args[0] if decorator.args else None
    if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
        return None
    return decorator.func.attr, f"{prefixes[decorator.func.value.id]}{first.value}"
