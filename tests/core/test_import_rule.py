"""The import rules. DESIGN.md's: a plugin reaches another plugin only through that plugin's
`contract.py`, and the core (`gateway/`) knows no plugin at all. And no circle between the
modules of gateway/, plugins/, console/ and bench/ (issue 42). Read from the source with `ast`, so a
lazy import inside a function or one under `if TYPE_CHECKING:` counts as much as one at the
top."""
from __future__ import annotations

import ast
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(path: Path, root: Path) -> list[tuple[int, str]]:
    """(line, absolute dotted name) of everything `path` imports; `from p import name` yields
    `p.name`, since `name` may be a submodule (`from plugins.chat import turns`)."""
    package = module_name(path, root)
    if path.name != "__init__.py":
        package = package.rpartition(".")[0]
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package.split(".")
                base_parts = base_parts[:len(base_parts) - (node.level - 1)]
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            found.extend((node.lineno, f"{base}.{alias.name}") for alias in node.names)
    return found


def violations(root: Path) -> list[str]:
    """Every import in `root/plugins` and `root/gateway` that breaks the rule, as
    `path:line imports module`."""
    problems = []
    for path in sorted((root / "gateway").rglob("*.py")):
        for line, name in imported_modules(path, root):
            if name == "plugins" or name.startswith("plugins."):
                problems.append(f"{path.relative_to(root)}:{line} imports {name} (the core knows no plugin)")
    for path in sorted((root / "plugins").rglob("*.py")):
        own = path.relative_to(root / "plugins").parts[0]
        for line, name in imported_modules(path, root):
            parts = name.split(".")
            if parts[0] != "plugins" or len(parts) < 2 or parts[1] == own:
                continue
            if parts[2:3] != ["contract"]:  # `import plugins.chat` runs and exposes its internals too
                problems.append(f"{path.relative_to(root)}:{line} imports {'.'.join(parts[:3])} "
                                f"(only plugins.{parts[1]}.contract may be imported)")
    return problems


def test_plugins_import_only_each_others_contracts_and_the_core_no_plugin():
    assert violations(PROJECT_ROOT) == []


def plant(root: Path, files: dict[str, str]) -> Path:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_the_rule_catches_every_form_of_a_planted_violation(tmp_path):
    root = plant(tmp_path, {
        "gateway/__init__.py": "",
        "gateway/app.py": "def f():\n    import plugins.chat\n",
        "plugins/__init__.py": "",
        "plugins/chat/__init__.py": "from .turns import x\nfrom plugins.chat import store\n",
        "plugins/chat/turns.py": "from plugins.sessions.contract import CONVERSATIONS\n",
        "plugins/chat/sub/__init__.py": "",
        "plugins/chat/sub/deep.py": ("from ...sessions import store\n"
                                     "from ...sessions.contract import X\n"),
        "plugins/admin/__init__.py": ("import plugins.chat.presence\n"
                                      "from plugins.chat import turns, contract\n"),
        "plugins/files/__init__.py": ("from plugins.sessions.store import Conversations\n"
                                      "from plugins import sessions\nimport plugins.chat.contract\n"),
    })
    only = "(only plugins.{}.contract may be imported)".format
    assert violations(root) == [
        "gateway/app.py:2 imports plugins.chat (the core knows no plugin)",
        f"plugins/admin/__init__.py:1 imports plugins.chat.presence {only('chat')}",
        f"plugins/admin/__init__.py:2 imports plugins.chat.turns {only('chat')}",
        f"plugins/chat/sub/deep.py:1 imports plugins.sessions.store {only('sessions')}",
        f"plugins/files/__init__.py:1 imports plugins.sessions.store {only('sessions')}",
        f"plugins/files/__init__.py:2 imports plugins.sessions {only('sessions')}",
    ]


# The second rule: no circle between modules, whether the import is at the top, under
# `if TYPE_CHECKING:` or inside a function. A circle hidden that way still means two modules
# that cannot be understood, tested or loaded one without the other.

SOURCE_FOLDERS = ("gateway", "plugins", "console", "bench")


def project_modules(root: Path) -> dict[str, Path]:
    """Every module of the source folders by dotted name; a package is its `__init__`."""
    return {module_name(path, root): path
            for folder in SOURCE_FOLDERS for path in sorted((root / folder).rglob("*.py"))}


def resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The project module `name` loads: itself when it is one (a submodule named by
    `from package import submodule`), else the nearest enclosing module (`from module import
    name`, or a package's `__init__` for a name it defines); None outside the project."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in modules:
            return candidate
        parts.pop()
    return None


def import_graph(root: Path) -> dict[str, dict[str, int]]:
    """module -> {module it imports: first line}. A package's `__init__` importing its own
    submodules is an edge like any other, so it is a circle only when the submodule imports
    the package back; an import of `a.b.c` is not taken to import `a` and `a.b`, whose
    `__init__` Python has already begun running by then."""
    modules = project_modules(root)
    graph: dict[str, dict[str, int]] = {}
    for name, path in modules.items():
        edges = graph.setdefault(name, {})
        for line, imported in imported_modules(path, root):
            target = resolve(imported, modules)
            if target is not None and target != name:
                edges.setdefault(target, line)
    return graph


def strongly_connected(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """Tarjan's components of more than one module, iteratively (no recursion limit)."""
    index: dict[str, int] = {}
    lowest: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = lowest[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            for successor in successors:
                if successor not in index:
                    index[successor] = lowest[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(graph[successor]))))
                    break
                if successor in on_stack:
                    lowest[node] = min(lowest[node], index[successor])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    lowest[parent] = min(lowest[parent], lowest[node])
                if lowest[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        components.append(sorted(component))
    return sorted(components)


def circles(root: Path) -> list[str]:
    """Each circle as its modules and the imports that close it, `module:line -> module`."""
    graph = import_graph(root)
    reports = []
    for component in strongly_connected(graph):
        members = set(component)
        edges = [f"{source}:{line} -> {target}" for source in component
                 for target, line in sorted(graph[source].items()) if target in members]
        reports.append(f"circle of {len(component)}: {', '.join(component)}\n    "
                       + "\n    ".join(edges))
    return reports


def test_no_module_imports_itself_back_through_others():
    found = circles(PROJECT_ROOT)
    assert not found, "import circles:\n" + "\n".join(found)


def test_the_checker_finds_every_form_of_a_planted_circle(tmp_path):
    root = plant(tmp_path, {
        "gateway/__init__.py": "",
        "gateway/a.py": "from gateway.b import thing\n",
        "gateway/b.py": ("from typing import TYPE_CHECKING\n"
                         "if TYPE_CHECKING:\n    from gateway.c import Other\n"),
        "gateway/c.py": "def f():\n    from . import a\n",
        "gateway/leaf.py": "import os\n",
        "gateway/user.py": "from gateway import leaf\nfrom gateway.leaf import name\n",
        "plugins/__init__.py": "",
        "plugins/chat/__init__.py": "from .channel import Channel\nfrom .quiet import q\n",
        "plugins/chat/channel.py": "from plugins.chat import SETTING\n",
        "plugins/chat/quiet.py": "from plugins.chat import contract\n",
        "plugins/chat/contract.py": "",
        "console/__init__.py": "",
        "console/one.py": "import console.two\n",
        "console/two.py": "import console.one as one\n",
    })
    assert circles(root) == [
        "circle of 2: console.one, console.two\n"
        "    console.one:1 -> console.two\n    console.two:1 -> console.one",
        "circle of 3: gateway.a, gateway.b, gateway.c\n"
        "    gateway.a:1 -> gateway.b\n    gateway.b:3 -> gateway.c\n    gateway.c:2 -> gateway.a",
        "circle of 2: plugins.chat, plugins.chat.channel\n"
        "    plugins.chat:1 -> plugins.chat.channel\n    plugins.chat.channel:1 -> plugins.chat",
    ]
