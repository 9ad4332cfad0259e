"""The type stubs describe the extension exactly: the same names, classes, bases, methods,
properties and signatures (parameter names, kinds and defaults)."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path
from typing import Any

import trajwiki
from trajwiki import _trajwiki

STUB = Path(trajwiki.__file__).with_name("_trajwiki.pyi")
EMPTY = inspect.Parameter.empty


def stub_tree() -> ast.Module:
    return ast.parse(STUB.read_text(encoding="utf-8"))


def public(names: Any) -> set[str]:
    return {n for n in names if not n.startswith("_") or n == "__version__"}


def stub_signature(fn: ast.FunctionDef, drop_first: bool) -> list[tuple[str, str, Any]]:
    """(name, kind, default) of each parameter of a stub function."""
    a = fn.args
    out: list[tuple[str, str, Any]] = []
    positional = a.posonlyargs + a.args
    defaults = [EMPTY] * (len(positional) - len(a.defaults)) + [
        ast.literal_eval(d) for d in a.defaults
    ]
    for p, d in zip(positional, defaults):
        out.append((p.arg, "positional", d))
    for p, d in zip(a.kwonlyargs, a.kw_defaults):
        out.append((p.arg, "keyword", EMPTY if d is None else ast.literal_eval(d)))
    return out[1:] if drop_first else out


def runtime_signature(obj: Any) -> list[tuple[str, str, Any]]:
    kinds = {
        inspect.Parameter.POSITIONAL_OR_KEYWORD: "positional",
        inspect.Parameter.POSITIONAL_ONLY: "positional",
        inspect.Parameter.KEYWORD_ONLY: "keyword",
    }
    sig = inspect.signature(obj)
    return [(p.name, kinds[p.kind], p.default) for p in sig.parameters.values()]


def test_module_names_match() -> None:
    tree = stub_tree()
    stubbed = set()
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            stubbed.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            stubbed.add(node.target.id)
    assert stubbed == public(dir(_trajwiki))
    assert set(trajwiki.__all__) == stubbed


def test_functions_match() -> None:
    for node in stub_tree().body:
        if isinstance(node, ast.FunctionDef):
            runtime = getattr(_trajwiki, node.name)
            assert runtime_signature(runtime) == stub_signature(node, False), node.name


def test_classes_match() -> None:
    for node in stub_tree().body:
        if not isinstance(node, ast.ClassDef):
            continue
        cls = getattr(_trajwiki, node.name)
        assert inspect.isclass(cls), node.name
        bases = [b.id for b in node.bases if isinstance(b, ast.Name)]
        assert [cls.__mro__[1].__name__] == (bases or ["object"]), node.name
        if issubclass(cls, BaseException):
            continue
        methods: dict[str, ast.FunctionDef] = {}
        properties: set[str] = set()
        for item in node.body:
            if isinstance(item, ast.FunctionDef):
                is_property = any(
                    isinstance(d, ast.Name) and d.id == "property" for d in item.decorator_list
                )
                (properties.add(item.name) if is_property else methods.update({item.name: item}))
        runtime_props = {
            n
            for n, v in vars(cls).items()
            if inspect.isgetsetdescriptor(v) or inspect.ismemberdescriptor(v)
        }
        runtime_methods = {
            n for n, v in vars(cls).items() if inspect.ismethoddescriptor(v) and not n.startswith("_")
        }
        assert properties == public(runtime_props), node.name
        assert set(methods) - {"__new__"} == runtime_methods, node.name
        for name in runtime_methods:
            got = runtime_signature(getattr(cls, name))[1:]  # drop self
            assert got == stub_signature(methods[name], True), f"{node.name}.{name}"
        constructible = cls.__text_signature__ is not None
        assert constructible == ("__new__" in methods), node.name
        if constructible:
            assert runtime_signature(cls) == stub_signature(methods["__new__"], True), node.name


def test_the_check_sees_a_difference() -> None:
    """A changed default in a stub is caught (the comparison is not vacuous)."""
    fn = ast.parse("def embed(self, texts, kind='query'): ...").body[0]
    assert isinstance(fn, ast.FunctionDef)
    assert runtime_signature(_trajwiki.Embedder.embed) != stub_signature(fn, True)
