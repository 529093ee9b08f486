"""What the notifications plugin offers other plugins: a notification pushed to a user's devices
and kept in their inbox."""
from __future__ import annotations

from typing import Protocol

from gateway.contracts import ContractKey


class Notifications(Protocol):
    async def push(self, user_id: str, type: str, title: str, body: str, data: dict | None = None, *,
                   notification_id: str | None = None) -> dict:
        """Store the notification in `user_id`'s inbox and send a `notification` frame to every
        device of theirs; returns the spec's Notification object (`delivered`: a device was
        connected). `notification_id` (a UUID) makes the push idempotent: a second push with the
        same id sends nothing and returns the stored one, so a caller that may retry after a
        crash (a scheduler) never notifies twice."""
        ...


NOTIFICATIONS: ContractKey[Notifications] = ContractKey("notifications.push", "notifications to devices")
