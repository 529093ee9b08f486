"""What the notifications plugin offers other plugins: a notification pushed to a user's devices."""
from __future__ import annotations

from typing import Protocol

from gateway.contracts import ContractKey


class Notifications(Protocol):
    async def push(self, user_id: str, type: str, title: str, body: str, data: dict | None = None) -> dict:
        """Send a `notification` frame to every device of `user_id`; returns the notification."""
        ...


NOTIFICATIONS: ContractKey[Notifications] = ContractKey("notifications.push", "notifications to devices")
