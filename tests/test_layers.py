"""Imports flow downwards only: no module imports one of a higher layer (``DESIGN.md``)."""

from __future__ import annotations

import ast
from pathlib import Path

import crossview

PACKAGE = Path(crossview.__file__).resolve().parent

# The layer order of DESIGN.md, lowest first; a module may import its own layer or lower ones.
# A top-level module is named by its file, a package by its folder.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("__init__", "defaults", "errors", "lazy", "output", "console", "long_step", "progress",
     "report", "viz", "distributed", "device", "memory", "settings", "pixel_grid", "registry",
     "library_log"),
    ("cpu_kernels",),
    ("metrics",),
    ("data",),
    ("geometry",),
    ("attention",),
    ("nn",),
    ("models",),
    ("train", "eval", "baselines"),
    ("api", "export", "streams", "runtime"),
    ("bench", "experiments", "demo"),
    ("cli", "__main__"),
)
LEVEL = {room: level for level, rooms in enumerate(LAYERS) for room in rooms}



def _room(module: str) -> str:
    """``crossview.models.registry`` -> ``models``; ``crossview`` -> ``__init__``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _imports(path: Path) -> list[str]:
    """Every crossview module ``path`` imports (module level, in functions, under
    TYPE_CHECKING, or as ``lazy_import("crossview...")``); ``from crossview import api`` counts
    as ``crossview.api``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "lazy_import"
                and isinstance(node.args[0], ast.Constant)
                and node.args[0].value.startswith("crossview")):
            found.append(node.args[0].value)
        elif isinstance(node, ast.Import):
            found += [alias.name for alias in node.names if alias.name.startswith("crossview")]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module is not None:
            if node.module == "crossview":
                found += [f"crossview.{alias.name}" for alias in node.names]
            elif node.module.startswith("crossview."):
                found.append(node.module)
    return found


def _upward_imports() -> set[tuple[str, str]]:
    upward = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        name = path.relative_to(PACKAGE.parent).as_posix()
        importer = _room("crossview." + path.relative_to(PACKAGE).with_suffix("").as_posix()
                         .replace("/", "."))
        for module in _imports(path):
            if module == "crossview.__version__":
                continue
            if LEVEL[_room(module)] > LEVEL[importer]:
                upward.add((name, module))
    return upward


def test_every_room_has_a_layer() -> None:
    rooms = {path.stem if path.is_file() else path.name for path in PACKAGE.iterdir()
             if (path.suffix == ".py" or (path / "__init__.py").exists())}
    assert rooms - set(LEVEL) == set()


def test_no_import_goes_up_the_layers() -> None:
    assert _upward_imports() == set()


def test_an_upward_import_is_found(tmp_path: Path) -> None:
    module = tmp_path / "geometry.py"
    module.write_text("from crossview.models import registry\nfrom crossview import api\n"
                      "train = lazy_import('crossview.train.trainer')\n")
    assert sorted(_imports(module)) == ["crossview.api", "crossview.models",
                                        "crossview.train.trainer"]
    assert all(LEVEL[_room(m)] > LEVEL["geometry"] for m in _imports(module))


# The command line talks to the api (and runs benchmarks and experiments); it reaches nothing
# below but the ground floor.
CLI_REACHES = {"cli", "api", "export", "bench", "experiments", "demo", *LAYERS[0]}
def test_the_command_line_imports_nothing_past_the_api() -> None:
    past = {(path.relative_to(PACKAGE.parent).as_posix(), module)
            for path in sorted((PACKAGE / "cli").rglob("*.py")) for module in _imports(path)
            if _room(module) not in CLI_REACHES and module != "crossview.__version__"}
    assert past == set()
