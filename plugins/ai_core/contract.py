"""What the AI core plugin offers other plugins of the ai-core service: registering tools."""
from __future__ import annotations

from typing import Any, Awaitable, Callable, Protocol

from gateway.contracts import ContractKey


class Tools(Protocol):
    def add(self, name: str, description: str, parameters: dict,
            handler: Callable[..., Awaitable[Any]], *, owner: str = "", **extra) -> Any:
        """Register a tool the models may call: `parameters` is its JSON schema, `handler(call,
        **arguments)` runs it (see docs/ai-core.md, "Tools")."""
        ...


TOOLS: ContractKey[Tools] = ContractKey("ai_core.tools", "tools the models may call")
