"""The stored spoken replies: their blobs, the `voice_reply_audio` rows that record each
stored key (so it can be deleted), and signed links to them. The table's SQL lives here, beside
the plugin's migrations."""
from __future__ import annotations

import asyncio
import hashlib
import logging
import secrets
from typing import TYPE_CHECKING

import aiopg

from gateway.database import execute, fetch_all
from gateway.downloads import LinkSigner

if TYPE_CHECKING:
    from gateway.context import Context

log = logging.getLogger("plugins.voice.spoken")

AUDIO_TYPES = {"wav": "audio/wav", "mp3": "audio/mpeg", "ogg": "audio/ogg"}


async def record_audio(db: aiopg.Pool, storage_key: str, user_id: str) -> None:
    await execute(db, "INSERT INTO voice_reply_audio (storage_key, user_id) VALUES (%s, %s)",
                  (storage_key, user_id))


async def audio_older_than(db: aiopg.Pool, retention_days: float, limit: int) -> list[str]:
    """The storage keys of up to `limit` audios older than `retention_days`, oldest first."""
    rows = await fetch_all(db, "SELECT storage_key FROM voice_reply_audio WHERE created_at < "
                               "now() - %s * interval '1 day' ORDER BY created_at LIMIT %s",
                           (retention_days, limit))
    return [str(row["storage_key"]) for row in rows]


async def audio_of(db: aiopg.Pool, user_id: str) -> list[str]:
    rows = await fetch_all(db, "SELECT storage_key FROM voice_reply_audio WHERE user_id = %s",
                           (user_id,))
    return [str(row["storage_key"]) for row in rows]


async def count_audio_of(db: aiopg.Pool, user_id: str) -> int:
    rows = await fetch_all(db, "SELECT count(*) AS n FROM voice_reply_audio WHERE user_id = %s",
                           (user_id,))
    return int(rows[0]["n"])


async def forget_audio(db: aiopg.Pool, storage_key: str) -> None:
    await execute(db, "DELETE FROM voice_reply_audio WHERE storage_key = %s",
                  (storage_key,))


def owner_of(user_id: str) -> str:
    """The audio folder of a user: not the id itself, which may hold any character."""
    return hashlib.sha256(b"voice-audio:" + user_id.encode("utf-8", "surrogatepass")).hexdigest()[:32]


class AudioStore:
    """Reply audio in the blob store under `voice/replies/<owner>/<name>`, links to it, and
    its deletion after `retention_days` (each stored key is recorded in `voice_reply_audio`)."""

    def __init__(self, context: "Context", url_ttl: int, retention_days: float):
        self.context = context
        self.url_ttl = url_ttl
        self.retention_days = retention_days
        self.links = LinkSigner(context.config, "voice-audio")

    @staticmethod
    def key(owner: str, name: str) -> str:
        return f"voice/replies/{owner}/{name}"

    async def put(self, user_id: str, audio: bytes, extension: str) -> str:
        """Store `audio`; its signed URL."""
        owner, name = owner_of(user_id), f"{secrets.token_hex(16)}.{extension}"
        key = self.key(owner, name)
        # Recorded first: a blob is never stored without the row that lets it be deleted.
        await record_audio(self.context.db, key, user_id)
        await self.context.blobs.put(key, audio, AUDIO_TYPES.get(extension, ""))
        return self.url(owner, name)

    async def delete_old(self, limit: int = 500) -> int:
        """Delete up to `limit` stored audios older than the retention; how many."""
        keys = await audio_older_than(self.context.db, self.retention_days, limit)
        for key in keys:
            await self.context.blobs.delete(key)
            await forget_audio(self.context.db, key)
        return len(keys)

    async def count_of(self, user_id: str) -> dict[str, int]:
        """What deleting the person removes (auth contract `PERSON_DATA`)."""
        return {"spoken_replies": await count_audio_of(self.context.db, user_id)}

    async def delete_of(self, user_id: str) -> None:
        """Every stored spoken reply of a person being deleted, blob first (as `delete_old`)."""
        for key in await audio_of(self.context.db, user_id):
            await self.context.blobs.delete(key)
            await forget_audio(self.context.db, key)

    async def sweep(self, context: "Context", interval: float = 3600.0) -> None:
        """The job: old reply audio goes, hour by hour."""
        while True:
            try:
                while await self.delete_old() == 500:
                    pass
            except Exception as error:  # an outage must not end the job
                log.warning("deleting old reply audio failed: %r", error)
            await asyncio.sleep(interval)

    def url(self, owner: str, name: str) -> str:
        base = self.context.config.settings.core.public_base_url.rstrip("/")
        return f"{base}/api/v1/voice/audio/{owner}/{name}?{self.links.query(f'{owner}/{name}', self.url_ttl)}"
