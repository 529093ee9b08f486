"""The bridge's tables (migrations/001_create_bridge.sql): bots with their secrets, who may
talk to them, link codes, each chat's session, received Telegram updates and the message log."""
from __future__ import annotations

import json
import secrets
import string
from typing import Any, cast

import aiopg

from gateway.database import execute, fetch_all, fetch_one, fetch_value, transaction

from .schemas import SECRET_FIELDS

BOT_ID_ALPHABET = string.ascii_lowercase + string.digits
BOT_COLUMNS = ("id, name, platform, enabled, settings, secrets, allow_linking, update_offset, last_error, "
               "created_at, updated_at")


def new_bot_id() -> str:
    return "bot_" + "".join(secrets.choice(BOT_ID_ALPHABET) for _ in range(10))


def split_config(platform: str, config: dict) -> tuple[dict, dict]:
    """(what may be shown, what is secret) of a platform's validated fields."""
    secret_names = SECRET_FIELDS[platform]
    shown = {key: value for key, value in config.items() if key not in secret_names}
    hidden = {key: value for key, value in config.items() if key in secret_names and value is not None}
    return shown, hidden


def mask(secret: str) -> str:
    """Enough to recognise a secret, never enough to use it."""
    return "••••" + secret[-4:] if len(secret) > 8 else "••••"


async def create_bot(db: aiopg.Pool, *, name: str, platform: str, enabled: bool, config: dict,
                     users: list[dict], allow_linking: bool) -> dict:
    shown, hidden = split_config(platform, config)
    bot_id = new_bot_id()
    async with transaction(db) as cursor:
        await cursor.execute(
            "INSERT INTO bridge_bots (id, name, platform, enabled, settings, secrets, allow_linking) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s)",
            (bot_id, name, platform, enabled, json.dumps(shown), json.dumps(hidden), allow_linking))
        await _replace_allow_list(cursor, bot_id, users)
    return await require_bot(db, bot_id)


async def _replace_allow_list(cursor: aiopg.Cursor, bot_id: str, users: list[dict]) -> None:
    await cursor.execute("DELETE FROM bridge_users WHERE bot_id = %s AND linked_by = 'allow_list'", (bot_id,))
    for user in users:
        await cursor.execute(
            "INSERT INTO bridge_users (bot_id, platform_user_id, user_id) VALUES (%s, %s, %s) "
            "ON CONFLICT (bot_id, platform_user_id) DO UPDATE SET user_id = EXCLUDED.user_id, "
            "linked_by = 'allow_list'", (bot_id, user["platform_user_id"], user["user_id"]))


async def update_bot(db: aiopg.Pool, bot: dict, changes: dict) -> dict:
    """`changes`: validated fields of a PATCH; `config` already merged with the stored one."""
    async with transaction(db) as cursor:
        if "config" in changes:
            shown, hidden = split_config(bot["platform"], changes["config"])
            await cursor.execute("UPDATE bridge_bots SET settings = %s, secrets = %s WHERE id = %s",
                                 (json.dumps(shown), json.dumps(hidden), bot["id"]))
        for column in ("name", "enabled", "allow_linking"):
            if column in changes:
                await cursor.execute(f"UPDATE bridge_bots SET {column} = %s WHERE id = %s",  # noqa: S608 - fixed names
                                     (changes[column], bot["id"]))
        if "users" in changes:
            await _replace_allow_list(cursor, bot["id"], changes["users"])
        await cursor.execute("UPDATE bridge_bots SET updated_at = now() WHERE id = %s", (bot["id"],))
    return await require_bot(db, bot["id"])


async def get_bot(db: aiopg.Pool, bot_id: str) -> dict | None:
    row = await fetch_one(db, f"SELECT {BOT_COLUMNS} FROM bridge_bots WHERE id = %s", (bot_id,))  # noqa: S608
    return _bot(row) if row else None


async def require_bot(db: aiopg.Pool, bot_id: str) -> dict:
    from gateway.errors import NotFound

    bot = await get_bot(db, bot_id)
    if bot is None:
        raise NotFound(f"No bot {bot_id!r}.", error_type="bot_not_found", hint="List the bots: GET /api/v1/bots.")
    return bot


async def list_bots(db: aiopg.Pool) -> list[dict]:
    rows = await fetch_all(db, f"SELECT {BOT_COLUMNS} FROM bridge_bots ORDER BY created_at, id")  # noqa: S608
    return [_bot(row) for row in rows]


def _bot(row: dict) -> dict:
    """A stored bot with its whole configuration (secrets included): for the bridge's own use."""
    return {**row, "config": {**row.pop("settings"), **row.pop("secrets")}}


async def delete_bot(db: aiopg.Pool, bot_id: str) -> bool:
    return await execute(db, "DELETE FROM bridge_bots WHERE id = %s", (bot_id,)) > 0


async def set_error(db: aiopg.Pool, bot_id: str, error: str | None) -> None:
    await execute(db, "UPDATE bridge_bots SET last_error = %s WHERE id = %s AND last_error IS DISTINCT FROM %s",
                  (error, bot_id, error))


# ---------------------------------------------------------------- who may talk

async def users_of(db: aiopg.Pool, bot_id: str) -> list[dict]:
    return await fetch_all(db, "SELECT platform_user_id, user_id, linked_by FROM bridge_users WHERE bot_id = %s "
                               "ORDER BY created_at, platform_user_id", (bot_id,))


async def accounts_of(db: aiopg.Pool, user_id: str) -> list[dict]:
    """The platform accounts linked to a gateway user on the enabled bots, with their bot."""
    return await fetch_all(db, """
        SELECT u.platform_user_id, b.id AS bot_id FROM bridge_users u JOIN bridge_bots b ON b.id = u.bot_id
        WHERE u.user_id = %s AND b.enabled ORDER BY b.created_at, u.platform_user_id""", (user_id,))


async def user_for(db: aiopg.Pool, bot_id: str, platform_user_id: str) -> str | None:
    return cast("str | None", await fetch_value(
        db, "SELECT user_id FROM bridge_users WHERE bot_id = %s AND platform_user_id = %s",
        (bot_id, platform_user_id)))


async def new_link_code(db: aiopg.Pool, bot_id: str, user_id: str, ttl_seconds: int) -> dict:
    """Six digits, unique among the bot's live codes; one live code per user (a new one replaces it)."""
    async with transaction(db) as cursor:
        await cursor.execute("DELETE FROM bridge_link_codes WHERE bot_id = %s AND (user_id = %s OR expires_at < now())",
                             (bot_id, user_id))
        while True:
            code = f"{secrets.randbelow(1_000_000):06d}"
            await cursor.execute(
                "INSERT INTO bridge_link_codes (bot_id, code, user_id, expires_at) "
                "VALUES (%s, %s, %s, now() + %s * interval '1 second') ON CONFLICT DO NOTHING "
                "RETURNING code, user_id, expires_at", (bot_id, code, user_id, ttl_seconds))
            row = await cursor.fetchone()
            if row:
                return dict(row)


async def redeem_link_code(db: aiopg.Pool, bot_id: str, code: str, platform_user_id: str,
                           max_failures: int) -> str | None:
    """The gateway user the code was issued for, now linked to the sender; None for a wrong or
    expired code (used once either way). A wrong code counts against every live code of the
    bot, since it could have been a guess at any of them; a code reaching `max_failures` is
    burnt, so no code can be guessed at more often than that in its life."""
    async with transaction(db) as cursor:
        await cursor.execute("DELETE FROM bridge_link_codes WHERE bot_id = %s AND code = %s AND expires_at > now() "
                             "RETURNING user_id", (bot_id, code))
        row = await cursor.fetchone()
        if row is None:
            await cursor.execute("UPDATE bridge_link_codes SET failures = failures + 1 WHERE bot_id = %s", (bot_id,))
            await cursor.execute("DELETE FROM bridge_link_codes WHERE bot_id = %s AND (failures >= %s "
                                 "OR expires_at <= now())", (bot_id, max_failures))
            return None
        await cursor.execute(
            "INSERT INTO bridge_users (bot_id, platform_user_id, user_id, linked_by) VALUES (%s, %s, %s, 'code') "
            "ON CONFLICT (bot_id, platform_user_id) DO UPDATE SET user_id = EXCLUDED.user_id, linked_by = 'code'",
            (bot_id, platform_user_id, row["user_id"]))
        return str(row["user_id"])


# ---------------------------------------------------------------- the generic webhook's messages

async def first_delivery(db: aiopg.Pool, bot_id: str, keys: list[str], keep_seconds: float) -> bool:
    """Record the keys of an incoming message (its message_id, its signature) for
    `keep_seconds`; False when any of them was recorded before and has not expired: a replay,
    or a client sending the same message again."""
    async with transaction(db) as cursor:
        await cursor.execute("DELETE FROM bridge_webhook_messages WHERE bot_id = %s AND expires_at <= now()",
                             (bot_id,))
        fresh = True
        for key in keys:
            await cursor.execute(
                "INSERT INTO bridge_webhook_messages (bot_id, key, expires_at) "
                "VALUES (%s, %s, now() + %s * interval '1 second') ON CONFLICT DO NOTHING",
                (bot_id, key, keep_seconds))
            fresh = fresh and cursor.rowcount == 1
        return fresh


# ---------------------------------------------------------------- chats and their sessions

def session_id_for(bot_id: str, chat_id: str, generation: int) -> str:
    return f"{bot_id}_{chat_id}_{generation}"[:128]


async def session_for(db: aiopg.Pool, bot_id: str, chat_id: str, user_id: str, *, new: bool = False) -> str:
    """The chat's session for the user; `new` (the `/new` command) moves on to the next one."""
    generation = await fetch_value(
        db, "INSERT INTO bridge_chats (bot_id, chat_id, user_id, generation) VALUES (%s, %s, %s, %s) "
            "ON CONFLICT (bot_id, chat_id, user_id) DO UPDATE SET generation = bridge_chats.generation + %s "
            "RETURNING generation", (bot_id, chat_id, user_id, 2 if new else 1, 1 if new else 0))
    return session_id_for(bot_id, chat_id, int(generation))


# ---------------------------------------------------------------- Telegram updates

async def record_updates(db: aiopg.Pool, bot_id: str, updates: list[dict]) -> None:
    """Keep the updates and move the offset past them in one transaction: after a restart
    getUpdates asks from there, and an update Telegram sends again is not kept twice."""
    if not updates:
        return
    async with transaction(db) as cursor:
        for update in updates:
            await cursor.execute("INSERT INTO bridge_updates (bot_id, update_id, body) VALUES (%s, %s, %s) "
                                 "ON CONFLICT DO NOTHING", (bot_id, int(update["update_id"]), json.dumps(update)))
        await cursor.execute("UPDATE bridge_bots SET update_offset = GREATEST(update_offset, %s) WHERE id = %s",
                             (max(int(update["update_id"]) for update in updates) + 1, bot_id))


async def record_update(db: aiopg.Pool, bot_id: str, update: dict) -> bool:
    """One update from the webhook; False when it was received before."""
    return await execute(db, "INSERT INTO bridge_updates (bot_id, update_id, body) VALUES (%s, %s, %s) "
                             "ON CONFLICT DO NOTHING", (bot_id, int(update["update_id"]), json.dumps(update))) > 0


async def pending_updates(db: aiopg.Pool, bot_id: str) -> list[dict]:
    """Updates received but not begun, oldest first. One begun when the bridge stopped is marked
    `interrupted` and not answered again: its reply may already have been sent."""
    await execute(db, "UPDATE bridge_updates SET status = 'interrupted' WHERE bot_id = %s AND status = 'running'",
                  (bot_id,))
    rows = await fetch_all(db, "SELECT update_id, body FROM bridge_updates WHERE bot_id = %s AND status = 'received' "
                               "ORDER BY update_id", (bot_id,))
    return [row["body"] for row in rows]


async def claim_update(db: aiopg.Pool, bot_id: str, update_id: int) -> bool:
    """Only one worker begins an update."""
    return await execute(db, "UPDATE bridge_updates SET status = 'running' WHERE bot_id = %s AND update_id = %s "
                             "AND status = 'received'", (bot_id, update_id)) > 0


async def finish_update(db: aiopg.Pool, bot_id: str, update_id: int) -> None:
    await execute(db, "UPDATE bridge_updates SET status = 'done' WHERE bot_id = %s AND update_id = %s",
                  (bot_id, update_id))
    # Done updates are only kept to refuse a repeat; Telegram never repeats an old one.
    await execute(db, "DELETE FROM bridge_updates WHERE bot_id = %s AND status = 'done' AND update_id < %s",
                  (bot_id, update_id - 1000))


async def offset_of(db: aiopg.Pool, bot_id: str) -> int:
    return int(await fetch_value(db, "SELECT update_offset FROM bridge_bots WHERE id = %s", (bot_id,)) or 0)


# ---------------------------------------------------------------- the message log

async def log_message(db: aiopg.Pool, bot_id: str, limit: int, **entry: Any) -> int:
    """Append to the bot's log, keeping its newest `limit` entries."""
    columns = ("direction", "chat_id", "platform_user_id", "user_id", "session_id", "text", "latency_ms", "error")
    values = [entry.get(column) for column in columns]
    values[1], values[2], values[5] = values[1] or "", values[2] or "", values[5] or ""
    entry_id = int(await fetch_value(
        db, f"INSERT INTO bridge_messages (bot_id, {', '.join(columns)}) "  # noqa: S608 - fixed names
            f"VALUES (%s, {', '.join(['%s'] * len(columns))}) RETURNING id", (bot_id, *values)))
    await execute(db, "DELETE FROM bridge_messages WHERE bot_id = %s AND id <= "
                      "(SELECT id FROM bridge_messages WHERE bot_id = %s ORDER BY id DESC OFFSET %s LIMIT 1)",
                  (bot_id, bot_id, limit))
    return entry_id


async def messages(db: aiopg.Pool, bot_id: str, limit: int, before: int | None,
                   keep: int) -> tuple[list[dict], bool]:
    rows = await fetch_all(
        db, "SELECT id, direction, chat_id, platform_user_id, user_id, session_id, text, latency_ms, error, "
            "created_at FROM (SELECT * FROM bridge_messages WHERE bot_id = %s ORDER BY id DESC LIMIT %s) AS kept "
            "WHERE (%s::bigint IS NULL OR id < %s) ORDER BY id DESC LIMIT %s",
        (bot_id, keep, before, before, limit + 1))
    return rows[:limit], len(rows) > limit
