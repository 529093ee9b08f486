"""The type checker holds the typed interfaces to their types: `require(KEY)` returns the `T`
a `ContractKey[T]` was declared with, and an app key gives back its value's type. A snippet
with deliberate mistakes is checked by mypy (with the project's settings), and each mistake,
and nothing else, must be reported."""
from __future__ import annotations

import re
from pathlib import Path

from mypy import api as mypy_api  # the test extra installs mypy: bin/test runs it first

PROJECT_ROOT = Path(__file__).resolve().parents[2]

SNIPPET = '''
from typing import Protocol

from aiohttp import web

from gateway.context import CONTEXT, Context
from gateway.contracts import ContractKey, Contracts
from plugins.auth.contract import TOKENS


class Greeter(Protocol):
    def greet(self, name: str) -> str: ...


class English:
    def greet(self, name: str) -> str:
        return f"hello {name}"


GREETER: ContractKey[Greeter] = ContractKey("greeter")
contracts = Contracts()
contracts.provide(GREETER, English())
contracts.provide(GREETER, 42)  # wrong: 42 is no Greeter
greeting: str = contracts.require(GREETER).greet("ann")
count: int = contracts.require(GREETER).greet("ann")  # wrong: greet returns str
maybe: Greeter = contracts.get(GREETER)  # wrong: get may return None


def handler(app: web.Application, context: Context) -> None:
    same: Context = app[CONTEXT]
    number: int = app[CONTEXT]  # wrong: the app key holds a Context
    token, expires = context.contracts.require(TOKENS).issue_access("ann")  # wrong: wants an Identity
'''


def test_contract_keys_and_app_keys_are_typed(tmp_path):
    snippet = tmp_path / "snippet.py"
    snippet.write_text(SNIPPET)
    report, errors, status = mypy_api.run(["--config-file", str(PROJECT_ROOT / "setup.cfg"),
                                           "--no-incremental", str(snippet)])
    wrong_lines = {number for number, line in enumerate(SNIPPET.splitlines(), start=1) if "# wrong" in line}
    reported = {int(match) for match in re.findall(r"snippet\.py:(\d+): error", report)}
    assert status == 1, report + errors
    assert reported == wrong_lines, report
