"""The bridge's one way into the gateway: `POST /api/v1/bridge/turns` (webhooks plugin), a
chat turn of the person's session answered as server-sent events."""
from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import AsyncIterator

import aiohttp

from gateway.sse import sse_data


class GatewayFailed(Exception):
    """The turn gave no reply: `error_type` as the gateway named it (`gateway_unreachable`
    when it could not be reached)."""

    def __init__(self, error: str, error_type: str):
        super().__init__(error)
        self.error, self.error_type = error, error_type


@dataclass
class TurnOutcome:
    text: str = ""
    message_ids: list[int] = field(default_factory=list)


class GatewayTurns:
    def __init__(self, http: aiohttp.ClientSession, base_url: str, headers: dict[str, str], timeout: float):
        self.http, self.base_url, self.headers, self.timeout = http, base_url.rstrip("/"), headers, timeout

    async def stream(self, *, user_id: str, session_id: str, text: str, platform: str, title: str,
                     outcome: TurnOutcome) -> AsyncIterator[str]:
        """Yield the reply's pieces as they come; `outcome` holds the whole reply at the end.
        Raises GatewayFailed."""
        body = {"user_id": user_id, "session_id": session_id, "text": text, "platform": platform, "title": title}
        try:
            async with asyncio.timeout(self.timeout):
                async with self.http.post(f"{self.base_url}/api/v1/bridge/turns", json=body,
                                          headers={**self.headers, "Accept": "text/event-stream"}) as response:
                    if response.status != 200:
                        error = await _error_of(response)
                        raise GatewayFailed(error.get("error") or f"the gateway answered {response.status}",
                                            error.get("errorType") or "gateway_failed")
                    async for data in sse_data(response.content, errors="replace"):
                        event = json.loads(data)
                        if event.get("type") == "delta":
                            yield str(event.get("content") or "")
                        elif event.get("type") == "done":
                            outcome.text = str(event.get("text") or "")
                            outcome.message_ids = list(event.get("message_ids") or [])
                            return
                        elif event.get("type") == "error":
                            raise GatewayFailed(str(event.get("error") or "the turn failed"),
                                                str(event.get("errorType") or "ai_core_failed"))
            raise GatewayFailed("the gateway's answer ended before the reply did", "gateway_failed")
        except TimeoutError:
            raise GatewayFailed(f"no whole reply within {self.timeout:g}s", "timeout") from None
        except (aiohttp.ClientError, ValueError) as error:
            raise GatewayFailed(f"the gateway could not be reached: {type(error).__name__}",
                                "gateway_unreachable") from None


async def _error_of(response: aiohttp.ClientResponse) -> dict:
    try:
        body = await response.json(content_type=None)
    except (ValueError, aiohttp.ClientError):
        return {}
    return body if isinstance(body, dict) else {}
