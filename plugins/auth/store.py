"""The auth plugin's SQL: users, hashed refresh tokens and spent access tokens."""
from __future__ import annotations

import hashlib
from datetime import datetime, timezone
from typing import Any, cast

import aiopg
import psycopg2
import psycopg2.errors

from gateway.database import execute, fetch_all, fetch_one, fetch_required, fetch_value, transaction
from gateway.errors import Conflict


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _timestamp(unix_seconds: float) -> datetime:
    return datetime.fromtimestamp(unix_seconds, tz=timezone.utc)


USER_COLUMNS = ("username, email, nickname, password_hash, created_at, disabled_at, is_admin,"
                " password_change_required, token_generation")


async def create_user(db: aiopg.Pool, username: str, email: str, nickname: str, password_hash: str, *,
                      is_admin: bool = False, password_change_required: bool = False) -> dict:
    try:
        async with transaction(db) as cursor:
            await cursor.execute(
                "INSERT INTO auth_users (username, email, nickname, password_hash, is_admin,"
                " password_change_required) VALUES (%s, %s, %s, %s, %s, %s) RETURNING " + USER_COLUMNS,
                (username, email, nickname, password_hash, is_admin, password_change_required))
            row: dict[str, Any] = await cursor.fetchone()
            # A new person of a deleted one's name is someone else: their tokens are not refused.
            await cursor.execute("DELETE FROM auth_deleted_people WHERE user_id = %s", ("user_" + row["username"],))
            return row
    except psycopg2.errors.UniqueViolation:
        raise Conflict("This username is already taken.", error_type="username_taken",
                       hint="Choose another username.") from None


async def find_user(db: aiopg.Pool, username: str) -> dict | None:
    return await fetch_one(
        db, "SELECT " + USER_COLUMNS + " FROM auth_users WHERE lower(username) = lower(%s)", (username,))


async def list_users(db: aiopg.Pool) -> list[dict]:
    return await fetch_all(db, "SELECT " + USER_COLUMNS + " FROM auth_users ORDER BY lower(username)")


async def person_state(db: aiopg.Pool, user_id: str, username: str) -> dict | None:
    """What decides whether a person's access token still counts: their token generation and
    whether they are disabled; `deleted` for a person deleted lately; None for no such person."""
    return await fetch_one(
        db, "SELECT token_generation, disabled_at IS NOT NULL AS disabled, false AS deleted FROM auth_users"
            " WHERE lower(username) = lower(%s) AND 'user_' || username = %s"
            " UNION ALL SELECT NULL, true, true FROM auth_deleted_people WHERE user_id = %s LIMIT 1",
        (username, user_id, user_id))


async def update_user(db: aiopg.Pool, username: str, *, disabled: bool | None = None,
                      is_admin: bool | None = None, password_hash: str | None = None,
                      password_change_required: bool | None = None, nickname: str | None = None,
                      new_generation: bool = False) -> dict | None:
    """Change a person; `new_generation` ends every access token issued before."""
    assignments: list[str] = []
    values: list[object] = []
    if disabled is not None:
        assignments.append("disabled_at = CASE WHEN %s THEN coalesce(disabled_at, now()) END")
        values.append(disabled)
    if is_admin is not None:
        assignments.append("is_admin = %s")
        values.append(is_admin)
    if password_hash is not None:
        assignments.append("password_hash = %s")
        values.append(password_hash)
    if password_change_required is not None:
        assignments.append("password_change_required = %s")
        values.append(password_change_required)
    if nickname is not None:
        assignments.append("nickname = %s")
        values.append(nickname)
    if new_generation:
        assignments.append("token_generation = nextval('auth_token_generations')")
    if not assignments:
        return await find_user(db, username)
    return await fetch_one(
        db, f"UPDATE auth_users SET {', '.join(assignments)} WHERE lower(username) = lower(%s)"
            " RETURNING " + USER_COLUMNS, (*values, username))


async def delete_user(db: aiopg.Pool, username: str) -> bool:
    """Remove a person's account and everything of theirs the auth plugin keeps."""
    user_id = "user_" + username
    async with transaction(db) as cursor:
        await cursor.execute("DELETE FROM auth_users WHERE lower(username) = lower(%s) RETURNING username",
                             (username,))
        if await cursor.fetchone() is None:
            return False
        for table in ("auth_refresh_tokens", "auth_spent_access_tokens", "auth_user_preferences",
                      "auth_invitations", "auth_api_keys"):
            await cursor.execute(f"DELETE FROM {table} WHERE user_id = %s", (user_id,))
        await cursor.execute("INSERT INTO auth_deleted_people (user_id) VALUES (%s) ON CONFLICT (user_id)"
                             " DO UPDATE SET deleted_at = now()", (user_id,))
        return True


async def count_own_rows(db: aiopg.Pool, user_id: str) -> dict[str, int]:
    row = await fetch_required(
        db, "SELECT (SELECT count(*) FROM auth_api_keys WHERE user_id = %s AND revoked_at IS NULL) AS api_keys,"
            " (SELECT count(*) FROM auth_refresh_tokens WHERE user_id = %s AND revoked_at IS NULL"
            "  AND used_at IS NULL AND expires_at > now()) AS logins", (user_id, user_id))
    return {"api_keys": int(row["api_keys"]), "logins": int(row["logins"])}


# -- invitations
async def create_invitation(db: aiopg.Pool, code: str, user_id: str, expires: float) -> None:
    await execute(db, "INSERT INTO auth_invitations (code_hash, user_id, expires_at) VALUES (%s, %s, %s)",
                  (token_hash(code), user_id, _timestamp(expires)))


async def take_invitation(db: aiopg.Pool, code: str) -> str | None:
    """The person an unexpired invitation names; the invitation is used up."""
    return cast("str | None", await fetch_value(
        db, "DELETE FROM auth_invitations WHERE code_hash = %s RETURNING"
            " CASE WHEN expires_at > now() THEN user_id END", (token_hash(code),)))


async def drop_invitations(db: aiopg.Pool, user_id: str) -> None:
    await execute(db, "DELETE FROM auth_invitations WHERE user_id = %s", (user_id,))


# -- personal API keys
KEY_COLUMNS = "id, user_id, name, scopes, created_at, expires_at, last_used_at, revoked_at"


async def create_api_key(db: aiopg.Pool, key_id: str, user_id: str, name: str, key: str, scopes: list[str],
                         expires_at: datetime | None) -> dict:
    return await fetch_required(
        db, "INSERT INTO auth_api_keys (id, user_id, name, key_hash, scopes, expires_at)"
            " VALUES (%s, %s, %s, %s, %s, %s) RETURNING " + KEY_COLUMNS,
        (key_id, user_id, name, token_hash(key), scopes, expires_at))


async def list_api_keys(db: aiopg.Pool, user_id: str | None) -> list[dict]:
    """A person's keys (every key with None), newest first; revoked ones included."""
    if user_id is None:
        return await fetch_all(db, "SELECT " + KEY_COLUMNS + " FROM auth_api_keys ORDER BY created_at DESC, id")
    return await fetch_all(db, "SELECT " + KEY_COLUMNS + " FROM auth_api_keys WHERE user_id = %s"
                               " ORDER BY created_at DESC, id", (user_id,))


async def revoke_api_key(db: aiopg.Pool, key_id: str, user_id: str | None) -> dict | None:
    """Revoke a key (a person's own, or anyone's with None); None when there is no such key."""
    owner = "" if user_id is None else " AND user_id = %s"
    values: tuple = (key_id,) if user_id is None else (key_id, user_id)
    return await fetch_one(
        db, "UPDATE auth_api_keys SET revoked_at = coalesce(revoked_at, now()) WHERE id = %s" + owner
            + " RETURNING " + KEY_COLUMNS, values)


async def revoke_user_api_keys(db: aiopg.Pool, user_id: str) -> int:
    return await execute(db, "UPDATE auth_api_keys SET revoked_at = now() WHERE user_id = %s AND revoked_at IS NULL",
                         (user_id,))


async def api_key_for(db: aiopg.Pool, key: str) -> dict | None:
    """The key with its person's state, when it is valid now (not revoked, not expired)."""
    return await fetch_one(
        db, "SELECT k.id, k.user_id, k.scopes, k.last_used_at, u.username, u.nickname, u.is_admin,"
            " u.disabled_at IS NOT NULL AS disabled, u.username IS NULL AS no_person"
            " FROM auth_api_keys k LEFT JOIN auth_users u"
            "   ON lower(u.username) = lower(substr(k.user_id, 6)) AND 'user_' || u.username = k.user_id"
            " WHERE k.key_hash = %s AND k.revoked_at IS NULL AND (k.expires_at IS NULL OR k.expires_at > now())",
        (token_hash(key),))


async def touch_api_key(db: aiopg.Pool, key_id: str) -> None:
    await execute(db, "UPDATE auth_api_keys SET last_used_at = now() WHERE id = %s", (key_id,))


async def installed_at(db: aiopg.Pool) -> datetime | None:
    """When the auth tables were created: the administrator's account dates from then."""
    return cast("datetime | None", await fetch_value(
        db, "SELECT applied_at FROM schema_migrations WHERE plugin = 'auth' ORDER BY version LIMIT 1"))


async def store_refresh(db: aiopg.Pool, token: str, family: str, user_id: str, expires: float) -> None:
    await execute(db, "INSERT INTO auth_refresh_tokens (token_hash, family_id, user_id, expires_at)"
                      " VALUES (%s, %s, %s, %s)",
                  (token_hash(token), family, user_id, _timestamp(expires)))


async def rotate_refresh(db: aiopg.Pool, old_token: str, family: str, new_token: str,
                         new_expires: float) -> str:
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


async def family_revoked(db: aiopg.Pool, family: str) -> bool:
    return bool(await fetch_value(
        db, "SELECT EXISTS (SELECT 1 FROM auth_refresh_tokens WHERE family_id = %s AND revoked_at IS NOT NULL)",
        (family,)))


async def revoke_family(db: aiopg.Pool, family: str) -> int:
    return await execute(db, "UPDATE auth_refresh_tokens SET revoked_at = now()"
                             " WHERE family_id = %s AND revoked_at IS NULL", (family,))


async def revoke_user(db: aiopg.Pool, user_id: str) -> int:
    return await execute(db, "UPDATE auth_refresh_tokens SET revoked_at = now()"
                             " WHERE user_id = %s AND revoked_at IS NULL", (user_id,))


async def revoke_user_except(db: aiopg.Pool, user_id: str, kept_families: set[str]) -> int:
    return await execute(db, "UPDATE auth_refresh_tokens SET revoked_at = now()"
                             " WHERE user_id = %s AND revoked_at IS NULL AND NOT family_id = ANY(%s)",
                         (user_id, sorted(kept_families)))


async def spend_access(db: aiopg.Pool, jti: str, user_id: str, expires: float) -> bool:
    """Mark an access token as spent; False when it already was."""
    inserted = await execute(
        db, "INSERT INTO auth_spent_access_tokens (jti, user_id, expires_at) VALUES (%s, %s, %s)"
            " ON CONFLICT (jti) DO NOTHING", (jti, user_id, _timestamp(expires)))
    return inserted == 1


async def purge_expired(db: aiopg.Pool) -> None:
    await execute(db, "DELETE FROM auth_refresh_tokens WHERE expires_at < now()")
    await execute(db, "DELETE FROM auth_spent_access_tokens WHERE expires_at < now()")
    await execute(db, "DELETE FROM auth_invitations WHERE expires_at < now()")
    await execute(db, "DELETE FROM auth_deleted_people WHERE deleted_at < now() - interval '1 day'")


async def stored_timezone(db: aiopg.Pool, user_id: str) -> str | None:
    """The time zone a person chose (zones.py checks it is still a zone), if any."""
    zone = await fetch_value(db, "SELECT timezone FROM auth_user_preferences WHERE user_id = %s",
                             (user_id,))
    return zone if isinstance(zone, str) else None


async def store_timezone(db: aiopg.Pool, user_id: str, zone: str) -> None:
    await execute(db,
                  "INSERT INTO auth_user_preferences (user_id, timezone) VALUES (%s, %s) "
                  "ON CONFLICT (user_id) DO UPDATE SET timezone = EXCLUDED.timezone, updated_at = now()",
                  (user_id, zone))
