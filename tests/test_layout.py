"""The house rules of the layout (docs/architecture.md, "Layout"): who may import whom, no cycles, the page ships.

Imports are read from the source (every ``import`` statement, those inside functions too), so a
lazy import that closes a cycle counts like any other.
"""

import ast
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("agent", "frames", "processors", "web")
# Splits by concern keep every module readable in one sitting; a file past this wants one.
MAX_LINES = 520


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


def imports_of(path: Path, known: set[str]) -> set[str]:
    """The project modules ``path`` imports (a name resolves to the longest known module)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names |= {f"{node.module}.{alias.name}" for alias in node.names}
    resolved = set()
    for name in names:
        while name and name not in known:
            name = name.rpartition(".")[0]
        if name:
            resolved.add(name)
    return resolved


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    found = modules()
    known = set(found)
    return {name: imports_of(path, known) - {name} for name, path in found.items()}


def test_no_module_imports_itself_back_through_others(graph):
    # Package __init__ files are imported on the way to their modules; leave those edges out.
    edges = {m: {d for d in deps if not m.startswith(d + ".")} for m, deps in graph.items()}
    cycles = []
    state: dict[str, int] = {}

    def visit(module: str, path: list[str]):
        state[module] = 1
        for dep in sorted(edges.get(module, ())):
            if state.get(dep) == 1:
                cycles.append(path[path.index(dep):] + [dep] if dep in path else [module, dep])
            elif dep not in state:
                visit(dep, path + [dep])
        state[module] = 2

    for module in sorted(edges):
        if module not in state:
            visit(module, [module])
    assert cycles == []


def test_imports_run_one_way_frames_then_processors_then_agent(graph):
    wrong = []
    for module, deps in graph.items():
        top = module.split(".")[0]
        for dep in deps:
            dep_top = dep.split(".")[0]
            if top == "frames" and dep_top != "frames":
                wrong.append((module, dep))
            if top == "processors" and dep_top in ("agent", "web"):
                wrong.append((module, dep))
    assert wrong == []


def test_nothing_in_the_product_imports_the_benches(graph):
    # The CLI hands `agent bench` its arguments.
    allowed = {"agent.cli"}
    wrong = [
        (module, dep)
        for module, deps in graph.items()
        for dep in deps
        if dep.startswith("agent.bench") and not module.startswith("agent.bench.") and module != "agent.bench"
        and module not in allowed
    ]
    assert wrong == []


def names_in_code(tree: ast.AST) -> set[str]:
    """The names and string literals of a module, its docstrings and comments left out."""
    docstrings = {
        id(node.body[0].value) for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)
    }
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            found.add(node.id)
        elif isinstance(node, ast.Attribute):
            found.add(node.attr)
        elif isinstance(node, ast.arg):
            found.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.add(node.name)
        elif isinstance(node, ast.alias):
            found.add(node.asname or node.name)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            found.add(node.value)
    return found


def test_the_product_builds_brisk_only_and_the_baselines_live_in_the_bench():
    baseline = re.compile(r"stock|segmented_whisper|PreloadedWhisper", re.IGNORECASE)
    naming = {
        name: sorted(n for n in names_in_code(ast.parse(path.read_text())) if baseline.search(n))
        for name, path in modules().items()
        if not (name == "agent.bench" or name.startswith("agent.bench."))
    }
    assert {name: found for name, found in naming.items() if found} == {}
    assert not any("flavor" in n for n in names_in_code(ast.parse((ROOT / "agent/server.py").read_text())))


def test_every_source_file_says_what_it_is_and_stays_readable():
    undocumented, long_files = [], []
    for name, path in modules().items():
        text = path.read_text()
        if text.strip() and ast.get_docstring(ast.parse(text)) is None:
            undocumented.append(name)
        if len(text.splitlines()) > MAX_LINES:
            long_files.append((name, len(text.splitlines())))
    assert undocumented == []
    assert long_files == []


def test_the_server_finds_the_page_as_package_data():
    from agent.server import web_dir

    page = web_dir()
    assert (page / "index.html").is_file() and (page / "app.js").is_file()


def test_the_wheel_carries_the_browser_client(tmp_path):
    # Built from a copy: setuptools leaves build/ behind in the tree it builds, and a stale
    # build/lib would carry deleted modules into the next wheel.
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for package in PACKAGES:
        shutil.copytree(ROOT / package, source / package, ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path), str(source)],
        check=True,
        timeout=300,
    )
    [wheel] = tmp_path.glob("brisk_voice-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {"web/index.html", "web/app.js", "web/style.css"} <= names
    assert "agent/transports/webrtc.py" in names and "processors/barge_in/barge_in_policy.py" in names
    assert "agent/business/harbor_lane_bikes.yaml" in names
