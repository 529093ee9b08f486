"""The auth plugin's SQL: users, hashed refresh tokens and spent access tokens."""
from __future__ import annotations

import hashlib
from datetime import datetime, timezone

import psycopg2
import psycopg2.errors

from gateway.database import execute, fetch_one, fetch_required, fetch_value, transaction
from gateway.errors import Conflict


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _timestamp(unix_seconds: float) -> datetime:
    return datetime.fromtimestamp(unix_seconds, tz=timezone.utc)


async def create_user(db, username: str, email: str, nickname: str, password_hash: str) -> dict:
    try:
        return await fetch_required(
            db, "INSERT INTO auth_users (username, email, nickname, password_hash)"
                " VALUES (%s, %s, %s, %s) RETURNING username, nickname, created_at",
            (username, email, nickname, password_hash))
    except psycopg2.errors.UniqueViolation:
        raise Conflict("This username is already taken.", error_type="username_taken",
                       hint="Choose another username.") from None


async def find_user(db, username: str) -> dict | None:
    return await fetch_one(
        db, "SELECT username, nickname, password_hash, created_at FROM auth_users"
            " WHERE lower(username) = lower(%s)", (username,))


async def installed_at(db) -> datetime | None:
    """When the auth tables were created: the administrator's account dates from then."""
    return await fetch_value(
        db, "SELECT applied_at FROM schema_migrations WHERE plugin = 'auth' ORDER BY version LIMIT 1")


async def store_refresh(db, token: str, family: str, user_id: str, expires: float) -> None:
    await execute(db, "INSERT INTO auth_refresh_tokens (token_hash, family_id, user_id, expires_at)"
                      " VALUES (%s, %s, %s, %s)",
                  (token_hash(token), family, user_id, _timestamp(expires)))


async def rotate_refresh(db, old_token: str, family: str, new_token: str, new_expires: float) -> str:
    """Spend `old_token` and record `new_token` in its family, atomically.

    Returns "rotated"; "unknown" when the token was never issued (or has been purged);
    "revoked" when its login was revoked (logout, or an earlier reuse); "reused" when it was
    already spent, in which case the whole family is revoked: either the client or a thief
    holds a copy, and we cannot tell which."""
    async with transaction(db) as cursor:
        await cursor.execute(
            "SELECT family_id, user_id, used_at, revoked_at FROM auth_refresh_tokens"
            " WHERE token_hash = %s FOR UPDATE", (token_hash(old_token),))
        row = await cursor.fetchone()
        if row is None or row["family_id"] != family:
            return "unknown"
        if row["revoked_at"] is not None:
            return "revoked"
        if row["used_at"] is not None:
            await cursor.execute("UPDATE auth_refresh_tokens SET revoked_at = now()"
                                 " WHERE family_id = %s AND revoked_at IS NULL", (family,))
            return "reused"
        await cursor.execute("UPDATE auth_refresh_tokens SET used_at = now() WHERE token_hash = %s",
                             (token_hash(old_token),))
        await cursor.execute(
            "INSERT INTO auth_refresh_tokens (token_hash, family_id, user_id, expires_at)"
            " VALUES (%s, %s, %s, %s)", (token_hash(new_token), family, row["user_id"], _timestamp(new_expires)))
        return "rotated"


async def family_revoked(db, family: str) -> bool:
    return bool(await fetch_value(
        db, "SELECT EXISTS (SELECT 1 FROM auth_refresh_tokens WHERE family_id = %s AND revoked_at IS NOT NULL)",
        (family,)))


async def revoke_family(db, family: str) -> int:
    return await execute(db, "UPDATE auth_refresh_tokens SET revoked_at = now()"
                             " WHERE family_id = %s AND revoked_at IS NULL", (family,))


async def revoke_user(db, user_id: str) -> int:
    return await execute(db, "UPDATE auth_refresh_tokens SET revoked_at = now()"
                             " WHERE user_id = %s AND revoked_at IS NULL", (user_id,))


async def revoke_user_except(db, user_id: str, kept_families: set[str]) -> int:
    return await execute(db, "UPDATE auth_refresh_tokens SET revoked_at = now()"
                             " WHERE user_id = %s AND revoked_at IS NULL AND NOT family_id = ANY(%s)",
                         (user_id, sorted(kept_families)))


async def spend_access(db, jti: str, user_id: str, expires: float) -> bool:
    """Mark an access token as spent; False when it already was."""
    inserted = await execute(
        db, "INSERT INTO auth_spent_access_tokens (jti, user_id, expires_at) VALUES (%s, %s, %s)"
            " ON CONFLICT (jti) DO NOTHING", (jti, user_id, _timestamp(expires)))
    return inserted == 1


async def purge_expired(db) -> None:
    await execute(db, "DELETE FROM auth_refresh_tokens WHERE expires_at < now()")
    await execute(db, "DELETE FROM auth_spent_access_tokens WHERE expires_at < now()")
