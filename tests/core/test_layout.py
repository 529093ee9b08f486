"""Where test code lives: every directory of Python test code is a package (has `__init__.py`),
so a module is always `tests.<area>.<name>` and two areas may both have a `conftest.py` or a
`helpers.py` without one shadowing the other."""
from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
# A separate distribution, installed by bin/test to exercise entry-point discovery.
NOT_TEST_CODE = TESTS / "third_party_plugin"


def test_every_directory_of_test_code_is_a_package():
    directories = {path.parent for path in TESTS.rglob("*.py")
                   if NOT_TEST_CODE not in path.parents and "__pycache__" not in path.parts}
    missing = sorted(str(directory.relative_to(TESTS.parent)) for directory in directories
                     if not (directory / "__init__.py").exists())
    assert missing == []
