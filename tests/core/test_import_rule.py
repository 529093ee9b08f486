"""The import rule of DESIGN.md: a plugin reaches another plugin only through that plugin's
`contract.py`, and the core (`gateway/`) knows no plugin at all. Read from the source with
`ast`, so a lazy import inside a function counts as much as one at the top."""
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
