"""What a name or an expression of the product stands for, read statically (for call_walk.py).

A module's names are its top-level definitions and imports (those under ``if`` and ``try`` too, so
``if TYPE_CHECKING:`` imports count), then its ``.pyi`` face's re-exports, then its submodules; an
imported name is followed through re-exports to where it is defined. A class's members are its
methods (properties flagged), its annotated fields (``x: T`` in the body, ``self.x: T`` in a method)
and what a method assigns to ``self.x``, looked up through its product bases, depth first.

An expression's value is typed from annotations only: parameters (``self`` is the class's instance),
fields, properties' and functions' return annotations, ``X | None`` and ``Optional[X]`` read as X,
``Box[T]`` as Box; a call of a class makes its instance. Anything else (builtins, other libraries,
containers' items, untyped returns) is unknown, and a call on it is not followed.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field

from poolq.devtools.structure.product_tree import ProductTree

FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef
_PROPERTIES = frozenset({"property", "cached_property"})
_WRAPPERS = frozenset({"Optional", "Union", "Annotated", "ClassVar", "Final", "Required", "NotRequired"})


@dataclass(frozen=True)
class Module:
    name: str


@dataclass(frozen=True)
class Function:
    module: str
    qualname: str  # "plan_job", "JobHandle.bind"
    node: FunctionNode = field(repr=False, compare=False)
    owner: Class | None = field(default=None, repr=False, compare=False)

    @property
    def is_property(self) -> bool:
        return any(_last_name(decorator) in _PROPERTIES for decorator in self.node.decorator_list)

    @property
    def is_static(self) -> bool:
        return any(_last_name(decorator) == "staticmethod" for decorator in self.node.decorator_list)

    @property
    def is_classmethod(self) -> bool:
        return any(_last_name(decorator) == "classmethod" for decorator in self.node.decorator_list)


@dataclass(frozen=True)
class Class:
    module: str
    qualname: str
    node: ast.ClassDef = field(repr=False, compare=False)


@dataclass(frozen=True)
class Instance:
    cls: Class


Value = Module | Function | Class | Instance


@dataclass(frozen=True)
class _Imported:
    module: str  # absolute
    name: str | None = None  # None: the module itself


_Binding = _Imported | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


@dataclass(frozen=True)
class AnnotatedField:
    """A field typed by its annotation (``x: T`` in the class, ``self.x: T`` in a method)."""

    annotation: ast.expr


@dataclass(frozen=True)
class AssignedField:
    """A field typed by the value a method assigns it (``self.x = value``), evaluated in that method."""

    value: ast.expr
    method: FunctionNode


Member = FunctionNode | AnnotatedField | AssignedField


class SymbolIndex:
    """Names and class members of one product tree, each module's read once."""

    def __init__(self, tree: ProductTree) -> None:
        self.tree = tree
        self._namespaces: dict[str, dict[str, _Binding]] = {}
        self._members: dict[Class, dict[str, Member]] = {}
        self.field_types: dict[tuple[Class, str], Value | None] = {}  # fields typed by an assignment, once worked out

    def resolve(self, module: str, name: str, seen: frozenset[tuple[str, str]] = frozenset()) -> Value | None:
        """What ``name`` stands for at the top of ``module``."""
        if (module, name) in seen:
            return None  # a loop of re-exports
        binding = self._namespace(module).get(name)
        if isinstance(binding, _Imported):
            if binding.name is None:
                return Module(binding.module)
            return self.member_of_module(binding.module, binding.name, seen | {(module, name)})
        if isinstance(binding, ast.ClassDef):
            return Class(module, name, binding)
        if binding is not None:
            return Function(module, name, binding)
        submodule = f"{module}.{name}"
        return Module(submodule) if submodule in self.tree.by_module else None

    def member_of_module(self, module: str, name: str, seen: frozenset[tuple[str, str]] = frozenset()) -> Value | None:
        submodule = f"{module}.{name}"
        if submodule in self.tree.by_module:
            return Module(submodule)
        if module in self.tree.by_module:
            return self.resolve(module, name, seen)
        return None  # another library's, or the poolq root's

    def member_of_class(self, cls: Class, name: str) -> tuple[Class, Member] | None:
        """(the class that declares it, the member), its product bases searched depth first."""
        for owner in self.lineage(cls):
            found = self._class_members(owner).get(name)
            if found is not None:
                return owner, found
        return None

    def lineage(self, cls: Class) -> list[Class]:
        """The class, then its product bases, depth first, each once."""
        order: list[Class] = []
        pending = [cls]
        while pending:
            current = pending.pop(0)
            if current in order:
                continue
            order.append(current)
            bases = [self.resolve_expr_statically(current.module, base) for base in current.node.bases]
            pending[:0] = [base for base in bases if isinstance(base, Class)]
        return order

    def resolve_expr_statically(self, module: str, expr: ast.expr) -> Value | None:
        """A dotted name (``Base``, ``pkg.mod.Base``, ``Box[T]`` as Box) at the top of ``module``."""
        if isinstance(expr, ast.Subscript):
            return self.resolve_expr_statically(module, expr.value)
        if isinstance(expr, ast.Name):
            return self.resolve(module, expr.id)
        if isinstance(expr, ast.Attribute):
            base = self.resolve_expr_statically(module, expr.value)
            if isinstance(base, Module):
                return self.member_of_module(base.name, expr.attr)
        return None

    def annotation_type(self, module: str, annotation: ast.expr | None) -> Value | None:
        """The instance an annotation promises, where it names a product class; else None."""
        if annotation is None:
            return None
        if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
            try:
                return self.annotation_type(module, ast.parse(annotation.value, mode="eval").body)
            except SyntaxError:
                return None
        if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
            return self.annotation_type(module, annotation.left) or self.annotation_type(module, annotation.right)
        if isinstance(annotation, ast.Subscript) and _last_name(annotation.value) in _WRAPPERS:
            items = annotation.slice.elts if isinstance(annotation.slice, ast.Tuple) else [annotation.slice]
            return next((found for item in items if (found := self.annotation_type(module, item)) is not None), None)
        named = self.resolve_expr_statically(module, annotation)
        return Instance(named) if isinstance(named, Class) else None

    def _namespace(self, module: str) -> dict[str, _Binding]:
        if module not in self._namespaces:
            source = self.tree.by_module.get(module)
            names: dict[str, _Binding] = {}
            is_package = source is not None and source.is_package_face
            stub = self.tree.stubs.get(module)
            for body in (stub.body if stub else [], source.tree.body if source else []):
                # the .py's definitions win over its face's: read after, they overwrite
                names.update(_bindings(body, module, is_package or stub is not None))
            self._namespaces[module] = names
        return self._namespaces[module]

    def _class_members(self, cls: Class) -> dict[str, Member]:
        if cls not in self._members:
            members: dict[str, Member] = {}
            for statement in cls.node.body:
                if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
                    members[statement.target.id] = AnnotatedField(statement.annotation)
                elif isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    members[statement.name] = statement
            for method in (node for node in cls.node.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))):
                for name, typed_by in _self_fields(method):
                    members.setdefault(name, typed_by)
            self._members[cls] = members
        return self._members[cls]


def _bindings(body: list[ast.stmt], module: str, is_package: bool) -> dict[str, _Binding]:
    names: dict[str, _Binding] = {}
    for statement in body:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names[statement.name] = statement
        elif isinstance(statement, (ast.Import, ast.ImportFrom)):
            names.update(import_bindings(statement, module, is_package))
        elif isinstance(statement, (ast.If, ast.Try)):
            nested = [*statement.body, *statement.orelse, *getattr(statement, "finalbody", [])]
            for handler in getattr(statement, "handlers", []):
                nested.extend(handler.body)
            names.update(_bindings(nested, module, is_package))
    return names


def import_bindings(statement: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> dict[str, _Binding]:
    """The names an import statement binds in ``module`` (``is_package``: it is an ``__init__``)."""
    if isinstance(statement, ast.Import):
        # ``import a.b`` binds a; ``import a.b as c`` binds c to a.b
        return {alias.asname or alias.name.split(".")[0]: _Imported(alias.name if alias.asname else alias.name.split(".")[0])
                for alias in statement.names}
    source = _absolute(statement, module, is_package)
    return {alias.asname or alias.name: _Imported(source, alias.name) for alias in statement.names if alias.name != "*"}


def _absolute(statement: ast.ImportFrom, module: str, is_package: bool) -> str:
    if not statement.level:
        return statement.module or ""
    base = module.split(".")
    base = base[:len(base) - (statement.level - 1 if is_package else statement.level)]
    return ".".join([*base, *([statement.module] if statement.module else [])])


def _self_fields(method: FunctionNode) -> list[tuple[str, AnnotatedField | AssignedField]]:
    """``self.x: T = ...`` and ``self.x = value`` in one method."""
    fields: list[tuple[str, AnnotatedField | AssignedField]] = []
    for node in ast.walk(method):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Attribute) and _is_self(node.target.value):
            fields.append((node.target.attr, AnnotatedField(node.annotation)))
        elif isinstance(node, ast.Assign):
            fields.extend((target.attr, AssignedField(node.value, method)) for target in node.targets
                          if isinstance(target, ast.Attribute) and _is_self(target.value))
    return fields


def _is_self(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id == "self"


def _last_name(expr: ast.expr) -> str:
    """``functools.cached_property`` -> cached_property; ``Optional`` -> Optional; other shapes -> ""."""
    if isinstance(expr, ast.Call):
        return _last_name(expr.func)
    if isinstance(expr, ast.Attribute):
        return expr.attr
    return expr.id if isinstance(expr, ast.Name) else ""
