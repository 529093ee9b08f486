"""The `PERSON_DATA` contract's registry: what each plugin keeps of a person (contract.py)."""
from __future__ import annotations

import logging

from gateway.errors import ServiceUnavailable

from .contract import PersonCounter, PersonEraser

log = logging.getLogger("plugins.auth")


class PersonData:
    """The `PERSON_DATA` contract: what each plugin keeps of a person, by plugin."""

    def __init__(self) -> None:
        self._plugins: dict[str, tuple[PersonCounter, PersonEraser]] = {}

    def add(self, name: str, count: PersonCounter, erase: PersonEraser) -> None:
        if name in self._plugins:
            raise RuntimeError(f"person data of {name!r} registered twice")
        self._plugins[name] = (count, erase)

    async def count(self, user_id: str) -> dict[str, int]:
        totals: dict[str, int] = {}
        for name, (count, _) in sorted(self._plugins.items()):
            for kind, number in (await count(user_id)).items():
                totals[kind] = totals.get(kind, 0) + int(number)
        return totals

    async def erase(self, user_id: str) -> None:
        for name, (_, erase) in sorted(self._plugins.items()):
            try:
                await erase(user_id)
            except Exception as error:
                log.exception("erasing the data %s keeps of %s failed", name, user_id)
                raise ServiceUnavailable(f"Deleting the person stopped: the {name} data could not be deleted "
                                         f"({error}).", error_type="deletion_incomplete",
                                         hint="The person stays disabled; ask again to finish.") from None
