"""Notifications: `POST /api/v1/notifications/push`, the `NOTIFICATIONS` contract (reminders and
automation push through it), and the inbox that keeps every notification.

A notification goes out as a `notification` WebSocket event to every device of the user on every
gateway instance sharing the bus, and is stored first, so that a person reads it later in the
inbox (`GET /api/v1/notifications`) and a device that was away when it came (a phone offline at
9:00) is sent it, on that connection only, when it connects again. Devices are told apart by the
`client_id` they connect with; each one's last moment seen connected is kept, so a device that
saw a notification live is not sent it again.

See docs/notifications.md and docs/reminders.md ("The inbox and missed delivery")."""
from __future__ import annotations

import asyncio
import logging

from gateway import database
from gateway.context import Context
from gateway.plugins import Plugin, Registrar

from . import person_data
from .api import INBOX, OFFPAGE, routes
from .contract import NOTIFICATIONS
from .inbox import Notifications
from .offpage import OffPageDelivery
from .schemas import NOTIFICATION_TYPES, NotificationFrame, NotificationSettings

log = logging.getLogger("plugins.notifications")

__all__ = ["NOTIFICATION_TYPES", "plugin"]


class NotificationsPlugin(Plugin):
    name = "notifications"
    depends = ("auth_tokens",)
    settings_class = NotificationSettings
    description = "Notifications pushed to a user's devices over WebSocket, kept in an inbox"
    # Release 0.1.0 kept this list in the core's [fetch] section.
    former_settings = {"fetch.push_hosts": "plugins.notifications.push_hosts"}

    def setup(self, registrar: Registrar[NotificationSettings]) -> None:
        settings = registrar.settings
        offpage = OffPageDelivery(registrar.context, settings)
        inbox = Notifications(registrar.context, settings, offpage)
        registrar.provide(NOTIFICATIONS, inbox)
        registrar.app_state(INBOX, inbox)
        registrar.app_state(OFFPAGE, offpage)
        registrar.routes(routes)
        registrar.migrations("plugins.notifications")
        person_data.register(registrar, offpage.bridge)
        registrar.ws_server_message("notification", NotificationFrame, "A notification pushed to the user's devices "
                                    "(POST /api/v1/notifications/push, or a reminder); `missed` when it came while "
                                    "this device was away and is sent on its return.")
        hub = registrar.context.hub
        hub.on_connect(inbox.on_connect)
        hub.on_disconnect(inbox.on_disconnect)

        async def keep_devices_seen(context: Context) -> None:
            while True:
                await asyncio.sleep(settings.device_heartbeat)
                try:
                    await inbox.seen_now()
                except Exception as error:  # the database away for a moment: the next beat tries again
                    if not database.unavailable(error):
                        raise
                    log.warning("could not mark connected devices seen: %s", error)

        async def prune(context: Context) -> None:
            while True:
                try:
                    removed = await inbox.prune(settings.retention_days)
                    if removed:
                        log.info("pruned %d notifications older than %d days", removed, settings.retention_days)
                except Exception:  # tried again at the next round
                    log.exception("pruning old notifications failed")
                await asyncio.sleep(6 * 3600)

        async def deliver_off_page(context: Context) -> None:
            await asyncio.gather(*(offpage.work() for _ in range(settings.push_workers)))

        registrar.job("devices_seen", keep_devices_seen)
        registrar.job("offpage_delivery", deliver_off_page)
        registrar.job("prune", prune)


plugin = NotificationsPlugin()
