"""The gateway as the AI core's peer. Tools that need what the gateway keeps (a person's stored
messages, devices, reminders, knowledge) ask the gateway's own HTTP API with the service
credential, over the core's one peer transport (gateway/peers.py).

The gateway takes the service credential for an administrator identity of kind "service", which
names the person it acts for with the query parameter `user_id` — where every endpoint of the
gateway reads whom the administrator acts for, whatever the method and whether the body is JSON,
a form or absent; a tool acts only for the person of its turn (`ToolCallContext.ask_gateway`)."""
from __future__ import annotations

from typing import Any

from gateway.peers import PeerContext, PeerAnswer, PeerClient, PeerFailed, PeerTimeout

from .contract import GatewayFailed


class GatewayPeer(PeerClient):
    """Every failure is a `GatewayFailed`, worded for the model that reads it: the gateway's
    status and errorType when it answered, none when it could not be reached."""

    def __init__(self, context: PeerContext, read_timeout: float) -> None:
        super().__init__(context, "gateway", service="gateway",
                         timeout=PeerTimeout.from_config(context.config, read=read_timeout))

    def not_reached(self, error: BaseException) -> PeerFailed:
        return GatewayFailed(f"the gateway cannot be reached ({error.__class__.__name__})")

    def check(self, answer: PeerAnswer) -> PeerAnswer:
        if answer.status >= 400:
            body = answer.json() or {}
            error_type = body.get("errorType")
            raise GatewayFailed(f"the gateway answered {answer.status}: {body.get('error') or 'no message'}",
                                answer.status, error_type if isinstance(error_type, str) else None)
        return answer

    async def ask(self, method: str, path: str, *, acting_for: str, params: dict | None = None,
                          body: dict | None = None) -> Any:
        """The gateway's decoded JSON answer to `method path`, asked on behalf of `acting_for`."""
        answer = await self.request(method, path, params={**(params or {}), "user_id": acting_for},
                                    json_body=body)
        try:
            return answer.decoded()
        except ValueError:
            raise GatewayFailed("the gateway answered something other than JSON") from None
