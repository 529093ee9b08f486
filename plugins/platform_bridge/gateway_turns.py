"""The bridge as a client *of* the gateway: `POST /api/v1/bridge/turns` (webhooks plugin), a chat
turn of the person's session answered as server-sent events, over the core's one peer
transport (gateway/peers.py). Every failure is a `PeerFailed` whose `error_type` the message
log records (`gateway_unreachable` when the gateway could not be reached, `timeout` past the
reply's time limit, else the gateway's own errorType)."""
from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import AsyncIterator

from gateway.context import Context
from gateway.peers import PeerClient, PeerFailed, PeerTimeout

TURNS_PATH = "/api/v1/bridge/turns"
CHAT_REFUSED = "admin_only"  # the spec's 403 for a person who may not chat


@dataclass
class TurnOutcome:
    text: str = ""
    message_ids: list[int] = field(default_factory=list)


class GatewayTurns(PeerClient):
    def __init__(self, context: Context, timeout: float):
        # A 403 `admin_only` is the gateway's answer about the person (chat is not theirs), not
        # about the bridge's credential: passed on, and the bridge answers them plainly.
        super().__init__(context, "gateway", service="gateway", timeout=PeerTimeout.from_config(context.config),
                         passed_refusals=(CHAT_REFUSED,))
        self.reply_timeout = timeout

    def not_reached(self, error: BaseException) -> PeerFailed:
        return PeerFailed(f"the gateway could not be reached: {type(error).__name__}", "gateway_unreachable")

    async def turn(self, *, user_id: str, session_id: str, text: str, platform: str, title: str,
                   outcome: TurnOutcome) -> AsyncIterator[str]:
        """Yield the reply's pieces as they come; `outcome` holds the whole reply at the end.
        Raises PeerFailed."""
        body = {"user_id": user_id, "session_id": session_id, "text": text, "platform": platform, "title": title}
        try:
            async with asyncio.timeout(self.reply_timeout):
                # The whole reply's time limit bounds it; the silence limit only stands behind it.
                async for event in self.events(TURNS_PATH, body, silence=self.reply_timeout + 5):
                    if event.get("type") == "delta":
                        yield str(event.get("content") or "")
                    elif event.get("type") == "done":
                        outcome.text = str(event.get("text") or "")
                        outcome.message_ids = list(event.get("message_ids") or [])
                        return
                    elif event.get("type") == "error":
                        raise PeerFailed(str(event.get("error") or "the turn failed"),
                                         str(event.get("errorType") or "ai_core_failed"))
            raise PeerFailed("the gateway's answer ended before the reply did", "gateway_failed")
        except TimeoutError:
            raise PeerFailed(f"no whole reply within {self.reply_timeout:g}s", "timeout") from None
