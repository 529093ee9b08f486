"""Notifications that reach a person with no page open: a Web Push (RFC 8030) to each browser
they subscribed, its payload encrypted for that browser (RFC 8291) and signed for with the
deployment's VAPID key (RFC 8292); and, for the types that warrant it (reminders), a message to
their linked chat-platform accounts through the platform bridge's service API.

Off the request path: `enqueue` only puts the notification on a bounded queue that this
plugin's workers drain, so firing a reminder never waits on a push service."""
from __future__ import annotations

import asyncio
import ipaddress
import logging
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import aiopg

from gateway.context import Context
from gateway.errors import BadRequest, NotFound, ServiceUnavailable
from gateway.fetch import FetchError, FetchRefused, GuardedFetcher
from gateway.fetch_policy import FetchPolicy
from gateway.peers import PeerClient, PeerFailed, PeerTimeout
from gateway.clock import rfc3339

from . import store, webpush
from .schemas import NotificationSettings

log = logging.getLogger("plugins.notifications.push")

GONE_STATUSES = frozenset({404, 410})


def _retryable(status: int) -> bool:
    return status == 429 or status >= 500


def _origin(endpoint: str) -> str:
    parts = urlsplit(endpoint)
    return f"{parts.scheme}://{parts.netloc}"


def _subscription(row: dict) -> dict:
    return {"id": row["id"], "endpoint_origin": _origin(row["endpoint"]), "device_name": row["device_name"],
            "created_at": rfc3339(row["created_at"]),
            "last_push_at": rfc3339(row["last_push_at"]) if row["last_push_at"] else None,
            "last_error": row["last_error"]}


def _invalid(field: str, problem: str) -> BadRequest:
    return BadRequest(f"Invalid body: {field}: {problem}", error_type="validation_error",
                      hint="Send the browser's PushSubscription as PushSubscription.toJSON() gives it.",
                      extra={"fields": {field: [problem]}})


class OffPageDelivery:
    def __init__(self, context: Context, settings: NotificationSettings):
        self.context, self.settings = context, settings
        # The platform bridge's service API, over the core's peer transport.
        self.bridge = PeerClient(context, "platform_bridge", service="platform bridge",
                                 timeout=PeerTimeout.from_config(context.config, total=settings.push_timeout * 3))
        self.queue: asyncio.Queue[tuple[str, dict]] = asyncio.Queue(maxsize=settings.push_queue_size)
        self._keys: webpush.VapidKeys | None = None
        self._keys_lock = asyncio.Lock()

    @property
    def db(self) -> aiopg.Pool:
        return self.context.db

    @property
    def policy(self) -> FetchPolicy:
        """The egress policy for push services: public hosts as any fetch, and what the
        operator allowed in `[plugins.notifications] push_hosts` (a test's loopback push server)."""
        return FetchPolicy.from_config(self.context.config, hosts=self.settings.push_hosts,
                                       hosts_setting="[plugins.notifications] push_hosts")

    def fetcher(self) -> GuardedFetcher:
        return GuardedFetcher.for_context(self.context, policy=self.policy, timeout=self.settings.push_timeout,
                                          max_redirects=0, max_bytes=64 * 1024)

    # -- the VAPID key
    async def keys(self) -> webpush.VapidKeys:
        """Read (or generate, the first time) `DATA_DIR/vapid_private.pem`, once per process."""
        if self._keys is None:
            async with self._keys_lock:
                if self._keys is None:
                    data_dir = Path(self.context.config.data_dir)
                    try:
                        self._keys = await asyncio.get_running_loop().run_in_executor(
                            None, webpush.load_or_create_vapid_keys, data_dir)
                    except (OSError, ValueError) as error:
                        log.error("the VAPID key in %s cannot be used: %s", data_dir, error)
                        raise ServiceUnavailable(
                            "Web Push is not available: the server's VAPID key cannot be read or written.",
                            error_type="push_unavailable",
                            hint=f"The operator should check {data_dir / webpush.KEY_FILE} (see the log).") from None
        return self._keys

    def subject(self) -> str:
        chosen = str(self.settings.push_subject or "").strip()
        if chosen:
            return chosen
        base = self.context.config.settings.core.public_base_url.strip().rstrip("/")
        return base if base.startswith("https://") else "mailto:admin@localhost"

    # -- subscriptions
    def validate(self, body: dict) -> tuple[str, str, str]:
        """The endpoint and the two keys, normalised; 400 naming the field when one is wrong."""
        endpoint = body["endpoint"].strip()
        try:
            parts = urlsplit(endpoint)
            host, port = parts.hostname, parts.port
        except ValueError:
            raise _invalid("endpoint", "not a URL") from None
        if parts.scheme not in ("https", "http") or not host or parts.username or parts.password:
            raise _invalid("endpoint", "must be an https URL")
        if parts.scheme == "http" and not self._explicitly_allowed(host, port or 80):
            raise _invalid("endpoint", "must be https (http only for a host allowed in "
                                       "[plugins.notifications] push_hosts)")
        try:
            self.fetcher().check_url(endpoint)
        except FetchRefused as refusal:
            raise _invalid("endpoint", str(refusal)) from None
        try:
            p256dh = webpush.b64url_decode(body["keys"]["p256dh"])
            webpush.load_public_key(p256dh)
        except ValueError:
            raise _invalid("keys.p256dh", "must be base64url of a 65-byte P-256 public key") from None
        try:
            auth = webpush.b64url_decode(body["keys"]["auth"])
        except ValueError:
            auth = b""
        if len(auth) != 16:
            raise _invalid("keys.auth", "must be base64url of 16 bytes")
        return endpoint, webpush.b64url(p256dh), webpush.b64url(auth)

    def _explicitly_allowed(self, host: str, port: int) -> bool:
        policy = self.policy
        if policy.allow_private or host.lower() in policy.allow_hosts or (host.lower(), port) in policy.allow_endpoints:
            return True
        try:
            address = ipaddress.ip_address(host.strip("[]"))
        except ValueError:
            return False
        return any(address.version == n.version and address in n for n in policy.allow_networks)

    async def subscribe(self, user_id: str, body: dict) -> tuple[dict, bool]:
        """Store (or take over: the same browser, another person) a subscription; whether it is new."""
        endpoint, p256dh, auth = self.validate(body)
        now = self.context.clock.now()
        row = await store.upsert_subscription(self.db, str(uuid.uuid4()), user_id, endpoint, p256dh, auth,
                                              body["device_name"].strip(), now)
        # The oldest beyond the bound are forgotten: browsers that stopped being used.
        await store.keep_newest_subscriptions(self.db, user_id, self.settings.push_max_subscriptions)
        return _subscription(row), bool(row["created"])

    async def subscriptions(self, user_id: str) -> list[dict]:
        rows = await store.subscriptions_in_order(self.db, user_id)
        return [_subscription(row) for row in rows]

    async def unsubscribe(self, user_id: str, subscription_id: str) -> None:
        try:
            key = str(uuid.UUID(subscription_id))
        except ValueError:
            key = None
        if key is None or not await store.delete_subscription_of(self.db, user_id, key):
            raise NotFound(f"No push subscription {subscription_id!r} of yours.", error_type="subscription_not_found",
                           hint="List them with GET /api/v1/notifications/push/subscriptions.")

    # -- delivery
    def enqueue(self, user_id: str, notification: dict) -> None:
        """Hand a stored notification to the workers; never waits."""
        wanted = notification["type"] in self.settings.push_types or \
            notification["type"] in self.settings.platform_types
        if not wanted:
            return
        try:
            self.queue.put_nowait((user_id, notification))
        except asyncio.QueueFull:
            log.warning("off-page delivery queue full (%d): notification %s for %s is only in the inbox",
                        self.queue.maxsize, notification["id"], user_id)

    async def work(self) -> None:
        """One worker: takes notifications off the queue until cancelled."""
        while True:
            user_id, notification = await self.queue.get()
            try:
                await self.deliver(user_id, notification)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("notification %s could not be delivered off the page", notification["id"])
            finally:
                self.queue.task_done()

    async def deliver(self, user_id: str, notification: dict) -> None:
        sends = []
        if notification["type"] in self.settings.push_types:
            rows = await store.subscriptions_of(self.db, user_id)
            if rows:
                payload = webpush.fit_payload({
                    "id": notification["id"], "type": notification["type"], "title": notification["title"],
                    "body": notification["body"], "timestamp": rfc3339(notification["created_at"]),
                    "data": notification["data"] or {}})
                sends += [self.push(row, payload, notification["type"]) for row in rows]
        if notification["type"] in self.settings.platform_types:
            sends.append(self.message_platforms(user_id, notification))
        # Each way on its own: one failing (the database away a moment) does not stop the others.
        for outcome in await asyncio.gather(*sends, return_exceptions=True):
            if isinstance(outcome, Exception):
                log.error("notification %s: one way off the page failed: %s", notification["id"], outcome,
                          exc_info=outcome)

    async def push(self, subscription: dict, payload: bytes, type: str) -> None:
        """One push to one browser, tried again on 429 / 5xx / no answer with a doubling wait;
        a 404 or 410 (the browser unsubscribed) forgets the subscription."""
        keys = await self.keys()
        endpoint = subscription["endpoint"]
        loop = asyncio.get_running_loop()
        body = await loop.run_in_executor(None, lambda: webpush.encrypt(
            payload, webpush.b64url_decode(subscription["p256dh"]), webpush.b64url_decode(subscription["auth"])))
        delay = self.settings.push_retry_delay
        problem = ""
        for attempt in range(1, self.settings.push_attempts + 1):
            headers = {"TTL": str(self.settings.push_ttl), "Content-Encoding": "aes128gcm",
                       "Content-Type": "application/octet-stream",
                       "Urgency": "high" if type in ("reminder", "warning") else "normal",
                       "Authorization": keys.authorization(endpoint, self.subject())}
            wait = delay
            try:
                result = await self.fetcher().fetch(endpoint, method="POST", data=body, headers=headers)
            except FetchRefused as refusal:
                await self._record(subscription, f"refused by the fetch policy: {refusal}")
                log.warning("push to %s refused: %s", _origin(endpoint), refusal)
                return
            except FetchError as error:
                problem = f"{_origin(endpoint)} did not answer: {error}"
            else:
                if result.ok:
                    await self._record(subscription, None)
                    return
                if result.status in GONE_STATUSES:
                    await store.forget_subscription(self.db, subscription["id"])
                    log.info("push subscription %s is gone (%d): forgotten", subscription["id"], result.status)
                    return
                problem = f"{_origin(endpoint)} answered {result.status}: {result.text()[:200]}"
                if not _retryable(result.status):
                    break
                retry_after = result.headers.get("Retry-After", "")
                if retry_after.strip().isdigit():
                    wait = float(retry_after)
            if attempt < self.settings.push_attempts:
                await asyncio.sleep(min(wait, self.settings.push_max_retry_delay))
                delay *= 2
        await self._record(subscription, problem)
        log.warning("push to subscription %s given up: %s", subscription["id"], problem)

    async def _record(self, subscription: dict, error: str | None) -> None:
        if error is None:
            await store.record_push_sent(self.db, subscription["id"], self.context.clock.now())
        else:
            await store.record_push_error(self.db, subscription["id"], error[:500])

    async def message_platforms(self, user_id: str, notification: dict) -> None:
        """The notification as a chat message to every chat-platform account the person linked:
        the platform bridge's `POST /api/v1/users/{user_id}/messages` (service credential)."""
        if not self.context.peer_url("platform_bridge"):
            return
        title, body = notification["title"], notification["body"]
        text = (f"⏰ {title}" + (f"\n{body}" if body and body != title else ""))[:4000]
        delay, problem = self.settings.push_retry_delay, ""
        for attempt in range(1, self.settings.push_attempts + 1):
            try:
                answer = await self.bridge.call("POST", f"/api/v1/users/{user_id}/messages", json_body={"text": text})
            except PeerFailed as error:
                problem = error.error
                if error.peer_status is not None and not _retryable(error.peer_status):
                    break
            else:
                failed = [d for d in answer.get("deliveries", []) if isinstance(d, dict) and d.get("error")]
                for delivery in failed:
                    log.warning("notification %s to %s on %s (bot %s) failed: %s", notification["id"],
                                user_id, delivery.get("platform"), delivery.get("bot_id"), delivery["error"])
                return
            if attempt < self.settings.push_attempts:
                await asyncio.sleep(min(delay, self.settings.push_max_retry_delay))
                delay *= 2
        log.warning("notification %s was not sent to %s's chat platforms: %s", notification["id"], user_id, problem)
