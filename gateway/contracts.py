"""Typed contracts between plugins.

A plugin that offers something to other plugins publishes, in its `contract.py` (the only module
of a plugin another plugin may import), a Protocol and a `ContractKey` for it. It provides an
implementation at setup (`registrar.provide(KEY, impl)`); consumers ask the context for it
(`context.contracts.require(KEY)`), and the type checker knows what they get back.

Words used one way throughout: a *service* is a process on a port (conf/services.toml); a
*contract* is what one plugin offers others inside a service; a *peer* is another service."""
from __future__ import annotations

from typing import Generic, TypeVar

T = TypeVar("T")


class ContractKey(Generic[T]):
    """Names one contract; `require(key)` returns the `T` the key was declared with."""

    __slots__ = ("name", "description")

    def __init__(self, name: str, description: str = ""):
        self.name = name
        self.description = description

    def __repr__(self) -> str:
        return f"ContractKey({self.name!r})"


class Contracts:
    """The contracts the plugins of one service provide, by key."""

    def __init__(self) -> None:
        self._provided: dict[str, tuple[object, str]] = {}

    def provide(self, key: ContractKey[T], implementation: T, owner: str = "core") -> None:
        if key.name in self._provided:
            raise RuntimeError(f"contract {key.name!r} is provided by both {self._provided[key.name][1]!r} "
                               f"and {owner!r}")
        self._provided[key.name] = (implementation, owner)

    def get(self, key: ContractKey[T]) -> T | None:
        """The implementation, or None when no plugin of this service provides it (an optional
        dependency that is not loaded)."""
        entry = self._provided.get(key.name)
        return entry[0] if entry else None  # type: ignore[return-value]

    def require(self, key: ContractKey[T]) -> T:
        entry = self._provided.get(key.name)
        if entry is None:
            raise LookupError(f"no plugin in this service provides {key.name!r}; "
                              f"add the plugin that provides it to the service's plugin list")
        return entry[0]  # type: ignore[return-value]

    def __contains__(self, key: ContractKey) -> bool:
        return key.name in self._provided

    def owners(self) -> dict[str, str]:
        """Contract name -> the plugin that provides it."""
        return {name: owner for name, (_, owner) in sorted(self._provided.items())}
