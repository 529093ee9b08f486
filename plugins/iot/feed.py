"""The feed: the IoT service's change stream (`/api/v1/devices/ws`, every owner's changes to the
service credential) turned into `device_update` frames to each owner's connected devices and
calls of the `DEVICES` contract's change listeners.

One gateway instance at a time follows it, whichever holds a lease on the bus (`iot:feed`,
renewed every third of its length; released when the instance stops; taken over by another
instance once a dead holder's lease runs out), so a change reaches each device and each listener
once however many instances run: the hub carries the frame to devices connected elsewhere. A
change is also claimed by its event_id on the bus before it is passed on, so one heard twice (two
instances briefly both following at a hand-over) still goes out once. The stream is opened again
after any failure, waiting longer each time (up to `feed_retry_max`). Changes made while no
instance follows the stream are not replayed: a client reads the current state with
`GET /api/v1/devices` when it (re)connects."""
from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import uuid
from datetime import datetime
from typing import Awaitable, Callable

import aiohttp

from gateway.context import Context
from gateway.peers import PeerClient, PeerFailed

from .contract import DeviceChange
from .settings import DevicesSettings

log = logging.getLogger("plugins.iot.feed")

FEED_PATH = "/api/v1/devices/ws"
LEASE_KEY = "iot:feed"
SEEN_PREFIX = "iot:event:"


def epoch_ms(timestamp: str) -> int:
    """An RFC 3339 time as milliseconds since the epoch (now, when it cannot be read)."""
    try:
        return int(datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp() * 1000)
    except (TypeError, ValueError, AttributeError):
        return int(datetime.now().timestamp() * 1000)


def change_of(frame: dict) -> DeviceChange:
    """The service's `device_update` frame as a DeviceChange; KeyError/TypeError/ValueError when
    it lacks what one needs."""
    device = frame["device"]
    changes = frame.get("changes") or {}
    if not isinstance(device, dict) or not isinstance(changes, dict):
        raise TypeError("device and changes must be objects")
    return DeviceChange(event_id=str(frame["event_id"]), user_id=str(frame["user_id"]),
                        device_id=str(frame.get("device_id") or device["id"]), device=device, changes=changes,
                        cause=str(frame.get("cause") or "operation"), timestamp=str(frame.get("timestamp") or ""))


def device_update_frame(change: DeviceChange, operation_id: str | None) -> dict:
    """The `device_update` frame a person's devices receive (DeviceUpdateFrame)."""
    return {"type": "device_update", "event_id": change.event_id, "device_id": change.device_id,
            "device": change.device, "changes": change.changes, "cause": change.cause,
            "operation_id": operation_id, "timestamp": epoch_ms(change.timestamp)}


class DeviceFeed:
    def __init__(self, context: Context, settings: DevicesSettings,
                 listeners: list[Callable[[DeviceChange], Awaitable[None]]], peer: PeerClient):
        self.context = context
        self.settings = settings
        self.listeners = listeners
        self.peer = peer  # the IoT service, over the core's peer transport
        self.instance = uuid.uuid4().hex
        self.lease_seconds: float = settings.feed_lease_seconds
        self.following = asyncio.Event()   # set while this instance has the stream open (tests wait on it)

    # ------------------------------------------------------------ the lease

    async def run(self, context: Context) -> None:
        """The job: hold the lease (or wait for it), follow the stream while holding it."""
        bus = context.bus
        while True:
            try:
                if await bus.set(LEASE_KEY, self.instance, ttl=self.lease_seconds, only_if_absent=True) \
                        or await bus.renew_if(LEASE_KEY, self.instance, self.lease_seconds):
                    log.info("this gateway instance follows the IoT service's changes")
                    try:
                        await self.hold()
                    finally:
                        self.following.clear()
                        with contextlib.suppress(Exception):
                            await bus.delete_if(LEASE_KEY, self.instance)
            except asyncio.CancelledError:
                raise
            except Exception as error:  # the bus failed (Redis down), or a bug: start again, the lease may be gone
                log.warning("the device feed stopped (%s: %s); starting again", error.__class__.__name__, error)
            await asyncio.sleep(self.lease_seconds / 3)

    async def hold(self) -> None:
        """Follow the stream, renewing the lease, until the lease is lost."""
        follower = asyncio.create_task(self.follow())
        try:
            while True:
                done, _ = await asyncio.wait({follower}, timeout=self.lease_seconds / 3)
                if done:
                    follower.result()  # follow() only ends by failing: let run() log it
                    return
                if not await self.context.bus.renew_if(LEASE_KEY, self.instance, self.lease_seconds):
                    log.warning("the device feed's lease passed to another gateway instance")
                    return
        finally:
            follower.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await follower

    # ------------------------------------------------------------ the stream

    async def follow(self) -> None:
        """Keep the IoT service's change stream open, reading it, reconnecting with backoff."""
        delay: float = self.settings.feed_retry_min
        complained = False
        while True:
            try:
                # asyncio.timeout, not wait_for: on Python 3.11 a wait_for whose connect fails as the
                # job is cancelled raises the failure, and the cancellation is lost.
                async with asyncio.timeout(self.settings.timeout):
                    socket = await self.peer.connect(FEED_PATH, heartbeat=self.settings.feed_heartbeat)
                async with socket:
                    log.info("following the IoT service's changes at %s", self.peer.base_url() + FEED_PATH)
                    self.following.set()
                    delay, complained = self.settings.feed_retry_min, False
                    async for message in socket:
                        if message.type == aiohttp.WSMsgType.TEXT:
                            await self.handle(message.data)
                        elif message.type == aiohttp.WSMsgType.ERROR:
                            break
                self.following.clear()
                log.warning("the IoT service closed its change stream; opening it again")
            except (PeerFailed, aiohttp.ClientError, asyncio.TimeoutError, OSError) as error:
                self.following.clear()
                (log.debug if complained else log.warning)(
                    "the IoT service's change stream cannot be opened (%s: %s); trying again",
                    error.__class__.__name__, getattr(error, "error", error))
                complained = True
            await asyncio.sleep(delay * random.uniform(0.8, 1.2))
            delay = min(delay * 2, self.settings.feed_retry_max)

    async def handle(self, data: str) -> None:
        """One frame of the stream: a change goes out once, to the owner's devices and the listeners."""
        try:
            frame = json.loads(data)
        except ValueError:
            log.warning("the IoT service sent a frame that is not JSON: %.200s", data)
            return
        if not isinstance(frame, dict) or frame.get("type") != "device_update":
            return  # heartbeats
        try:
            change = change_of(frame)
        except (KeyError, TypeError, ValueError) as error:
            log.warning("the IoT service sent a device_update without %s: %.300s", error, data)
            return
        try:
            if not await self.context.bus.set(SEEN_PREFIX + change.event_id, self.instance,
                                              ttl=self.settings.dedupe_seconds, only_if_absent=True):
                return  # another instance passed it on already
            operation_id = frame.get("operation_id")
            await self.context.hub.send_to_user(change.user_id, device_update_frame(
                change, str(operation_id) if operation_id is not None else None))
        except Exception:
            log.exception("the change %s of %s could not be sent to its owner's devices",
                          change.event_id, change.device_id)
        for listener in list(self.listeners):
            try:
                await listener(change)
            except Exception:
                log.exception("a device change listener failed on %s", change.event_id)
