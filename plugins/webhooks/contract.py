"""What the webhooks plugin offers other plugins: its check of the operator's webhook key, so
that another feature's endpoint for outside systems (an automation event) accepts the same
credential the same way."""
from __future__ import annotations

from typing import Protocol

from aiohttp import web

from gateway.contracts import ContractKey


class WebhookKey(Protocol):
    def present(self, request: web.Request) -> bool:
        """Whether the request carries an `X-Webhook-Key` header at all."""
        ...

    def check(self, request: web.Request) -> None:
        """Unauthorized (`invalid_webhook_key`) unless the header holds the configured WEBHOOK_KEY
        (compared in constant time; no key configured refuses every request)."""
        ...


WEBHOOK_KEY: ContractKey[WebhookKey] = ContractKey("webhooks.key", "the operator's webhook key check")
