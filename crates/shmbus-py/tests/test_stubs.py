"""The type stubs describe the module: the same classes and functions, whose methods all
exist; and every public class, function and method has a docstring."""

import ast
import pathlib

import shmbus

PKG = pathlib.Path(shmbus.__file__).resolve().parent


FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


def stub_tree():
    return ast.parse((PKG / "_shmbus.pyi").read_text())


def stub_classes():
    return {
        node.name: [n.name for n in node.body if isinstance(n, FUNCTIONS)]
        + [t.target.id for t in node.body if isinstance(t, ast.AnnAssign)]
        for node in stub_tree().body
        if isinstance(node, ast.ClassDef) and not node.name.startswith("_")
    }


def stub_functions():
    return [n.name for n in stub_tree().body if isinstance(n, FUNCTIONS) and not n.name.startswith("_")]


def test_stubs_name_every_class_and_function_and_nothing_else():
    assert sorted([*stub_classes(), *stub_functions()]) == sorted(shmbus.__all__)
    assert all(callable(getattr(shmbus, f)) for f in stub_functions())
    assert (PKG / "py.typed").exists() and (PKG / "__init__.pyi").exists()


def test_every_stubbed_method_exists():
    inherited = {"close", "release", "__enter__", "__exit__", "__len__", "__buffer__", "__release_buffer__"}
    missing = []
    for cls, names in stub_classes().items():
        runtime = getattr(shmbus, cls)
        if issubclass(runtime, BaseException):
            continue  # `Lagged.missed` is set on each instance
        skip = ("__init__", "__buffer__", "__release_buffer__")
        missing += [f"{cls}.{n}" for n in names if n not in skip and not hasattr(runtime, n)]
    assert missing == []
    for cls in ("Loan", "Sample", "Record", "StreamLoan", "JournalLoan"):
        assert all(hasattr(getattr(shmbus, cls), n) for n in inherited - {"close", "__buffer__", "__release_buffer__"})


def test_docstrings():
    undocumented = [
        f"{name}.{attr}"
        for name in shmbus.__all__
        if isinstance(getattr(shmbus, name), type)
        for attr, value in vars(getattr(shmbus, name)).items()
        if not attr.startswith("_") and callable(value) and not (value.__doc__ or "").strip()
    ]
    assert undocumented == []
    assert all((getattr(shmbus, n).__doc__ or "").strip() for n in shmbus.__all__)
