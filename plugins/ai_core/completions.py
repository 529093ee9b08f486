"""`MODELS`: one whole answer for a purpose, for plugins of the ai-core service that ask a model
in the background (memory extraction). The purpose's own chain is tried first — a routing rule
names it, or models tagged with the purpose — so an administrator can give background work a
cheap model; without either, the chat chain answers. Nothing is streamed to anyone, so a failing
model is skipped for the next one whatever it had sent."""
from __future__ import annotations

import logging

from .engine import Engine
from .providers import ProviderError

log = logging.getLogger("plugins.ai_core.completions")


class PurposeCompletions:
    def __init__(self, engine: Engine):
        self.engine = engine

    async def complete(self, purpose: str, messages: list[dict], *, max_tokens: int | None = None,
                       temperature: float | None = None) -> str | None:
        chain, _ = await self.engine.candidates(purpose)  # the chat chain when the purpose has none
        overrides: dict = {}
        if max_tokens is not None:
            overrides["max_tokens"] = max_tokens
        if temperature is not None:
            overrides["temperature"] = temperature
        for candidate in chain:
            try:
                return await self.engine.complete_once(candidate, messages, overrides=overrides)
            except ProviderError as error:
                log.warning("model %s failed for %r (%s): %s", candidate.model.id, purpose, error.kind,
                            error.message)
        return None
