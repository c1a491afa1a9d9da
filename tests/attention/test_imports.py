"""The imports of crossview.attention: no cycle between its modules, and no crossview import
hidden inside a function (where it would hide a cycle)."""

from __future__ import annotations

import ast
import graphlib
import importlib.util
from pathlib import Path

import pytest

PACKAGE = "crossview.attention"
# found, not imported: a cycle is reported by the test below rather than failing the collection
ROOT = Path(importlib.util.find_spec(PACKAGE).submodule_search_locations[0])


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join((PACKAGE, *(parts[:-1] if parts[-1] == "__init__" else parts)))


MODULES = {_module_name(path): path for path in sorted(ROOT.rglob("*.py"))}


def _imported(node: ast.Import | ast.ImportFrom) -> list[str]:
    """The modules an import statement loads: ``from package import module`` names the module,
    ``from module import name`` the module."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level or node.module is None:
        raise AssertionError("relative imports are not used in crossview")
    return [f"{node.module}.{alias.name}" if f"{node.module}.{alias.name}" in MODULES
            else node.module for alias in node.names]


def _imports(tree: ast.Module) -> tuple[set[str], list[int]]:
    """The crossview.attention modules imported when the module loads, and the lines of
    crossview imports inside functions."""
    functions = [node for node in ast.walk(tree)
                 if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)]
    in_functions = {id(node) for function in functions for node in ast.walk(function)}
    loaded, local = set(), []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Import | ast.ImportFrom):
            continue
        names = _imported(node)
        if id(node) in in_functions:
            local += [node.lineno for name in names if name.split(".")[0] == "crossview"]
        else:
            loaded |= {name for name in names if name in MODULES}
    return loaded, local


@pytest.mark.parametrize("module", MODULES)
def test_no_crossview_import_inside_a_function(module: str) -> None:
    _, local = _imports(ast.parse(MODULES[module].read_text()))
    assert local == [], f"{module}: function-local crossview imports on lines {local}"


def test_the_modules_import_each_other_without_a_cycle() -> None:
    graph = {module: _imports(ast.parse(path.read_text()))[0] for module, path in MODULES.items()}
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as error:
        cycle = " imports ".join(reversed(error.args[1]))  # graphlib lists it importer last
        raise AssertionError(f"import cycle: {cycle}") from error
