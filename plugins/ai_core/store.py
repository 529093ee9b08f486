"""SQL for the AI core's tables: providers, models, routing rules and tool-call records (the
conversations are the gateway's). Read on every request, so an edit through the admin API is
seen at once by every instance without a cache to invalidate."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import cast

import aiopg

from gateway.database import execute, fetch_all, fetch_one, fetch_value, transaction


@dataclass(frozen=True)
class Provider:
    name: str
    base_url: str
    api_key: str


@dataclass(frozen=True)
class Model:
    id: str
    name: str
    provider: str
    description: str = ""
    priority: int = 0
    tags: tuple[str, ...] = ()
    params: dict = field(default_factory=dict)
    enabled: bool = True
    updated_at: str = ""


@dataclass(frozen=True)
class Route:
    purpose: str
    fallback_chain: tuple[str, ...]
    required: bool


@dataclass(frozen=True)
class Candidate:
    """One model of a chain, with the provider that serves it."""
    model: Model
    provider: Provider


def _iso(value: datetime | None) -> str:
    return value.isoformat() if value is not None else ""


def _model(row: dict) -> Model:
    return Model(id=row["id"], name=row["name"], provider=row["provider"],
                 description=row["description"], priority=row["priority"],
                 tags=tuple(row["tags"] or ()), params=dict(row["params"] or {}),
                 enabled=row["enabled"], updated_at=_iso(row["updated_at"]))


def mask_key(api_key: str) -> str:
    """Enough of a key to recognise it, never enough to use it."""
    if not api_key:
        return ""
    return "****" + api_key[-4:] if len(api_key) > 8 else "****"


# ---------------------------------------------------------------- providers

async def list_providers(db: aiopg.Pool) -> list[Provider]:
    rows = await fetch_all(db, "SELECT name, base_url, api_key FROM ai_providers ORDER BY name")
    return [Provider(**row) for row in rows]


async def save_provider(db: aiopg.Pool, name: str, base_url: str, api_key: str | None) -> None:
    """`api_key` None keeps the stored key (the admin page shows only a masked key)."""
    if api_key is None:
        await execute(db, """
            INSERT INTO ai_providers (name, base_url) VALUES (%s, %s)
            ON CONFLICT (name) DO UPDATE SET base_url = EXCLUDED.base_url, updated_at = now()""",
                      (name, base_url))
    else:
        await execute(db, """
            INSERT INTO ai_providers (name, base_url, api_key) VALUES (%s, %s, %s)
            ON CONFLICT (name) DO UPDATE SET base_url = EXCLUDED.base_url,
                api_key = EXCLUDED.api_key, updated_at = now()""", (name, base_url, api_key))


async def get_provider_key(db: aiopg.Pool, name: str) -> str | None:
    key = await fetch_value(db, "SELECT api_key FROM ai_providers WHERE name = %s", (name,))
    return cast("str | None", key)


async def delete_provider(db: aiopg.Pool, name: str) -> bool:
    return await execute(db, "DELETE FROM ai_providers WHERE name = %s", (name,)) > 0


# ---------------------------------------------------------------- models

async def list_models(db: aiopg.Pool) -> list[Model]:
    rows = await fetch_all(db, "SELECT * FROM ai_models ORDER BY priority DESC, id")
    return [_model(row) for row in rows]


async def save_model(db: aiopg.Pool, model: dict) -> None:
    await execute(db, """
        INSERT INTO ai_models (id, name, provider, description, priority, tags, params, enabled)
        VALUES (%(id)s, %(name)s, %(provider)s, %(description)s, %(priority)s, %(tags)s,
                %(params)s, %(enabled)s)
        ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name, provider = EXCLUDED.provider,
            description = EXCLUDED.description, priority = EXCLUDED.priority, tags = EXCLUDED.tags,
            params = EXCLUDED.params, enabled = EXCLUDED.enabled, updated_at = now()""",
                  {**model, "tags": json.dumps(list(model["tags"])), "params": json.dumps(model["params"])})


async def delete_model(db: aiopg.Pool, model_id: str) -> bool:
    return await execute(db, "DELETE FROM ai_models WHERE id = %s", (model_id,)) > 0


# ---------------------------------------------------------------- routing

async def list_routes(db: aiopg.Pool) -> list[Route]:
    rows = await fetch_all(db, "SELECT purpose, fallback_chain, required FROM ai_routes ORDER BY purpose")
    return [Route(row["purpose"], tuple(row["fallback_chain"]), row["required"]) for row in rows]


async def save_route(db: aiopg.Pool, purpose: str, fallback_chain: list[str], required: bool) -> None:
    await execute(db, """
        INSERT INTO ai_routes (purpose, fallback_chain, required) VALUES (%s, %s, %s)
        ON CONFLICT (purpose) DO UPDATE SET fallback_chain = EXCLUDED.fallback_chain,
            required = EXCLUDED.required, updated_at = now()""",
                  (purpose, json.dumps(fallback_chain), required))


async def delete_route(db: aiopg.Pool, purpose: str) -> bool:
    return await execute(db, "DELETE FROM ai_routes WHERE purpose = %s", (purpose,)) > 0


async def routing_snapshot(db: aiopg.Pool) -> tuple[dict[str, Provider], dict[str, Model], dict[str, Route]]:
    """Everything routing needs, read in one round trip per table on one connection."""
    async with transaction(db) as cursor:
        await cursor.execute("SELECT name, base_url, api_key FROM ai_providers")
        providers = {row["name"]: Provider(**row) for row in await cursor.fetchall()}
        await cursor.execute("SELECT * FROM ai_models")
        models = {row["id"]: _model(dict(row)) for row in await cursor.fetchall()}
        await cursor.execute("SELECT purpose, fallback_chain, required FROM ai_routes")
        routes = {row["purpose"]: Route(row["purpose"], tuple(row["fallback_chain"]), row["required"])
                  for row in await cursor.fetchall()}
    return providers, models, routes


async def seed_from_environment(db: aiopg.Pool, base_url: str, api_key: str, model_name: str) -> bool:
    """First start only: a provider, a model and the `chat` route from OPENAI_BASE_URL,
    OPENAI_API_KEY and DEFAULT_MODEL. Later edits by the administrator are never overwritten."""
    async with transaction(db) as cursor:
        await cursor.execute("SELECT pg_advisory_xact_lock(hashtext('ai_core_seed'))")
        await cursor.execute("SELECT 1 FROM ai_core_state WHERE key = 'seeded_from_environment'")
        if await cursor.fetchone() is not None:
            return False
        await cursor.execute("""
            INSERT INTO ai_providers (name, base_url, api_key) VALUES ('openai', %s, %s)
            ON CONFLICT (name) DO NOTHING""", (base_url, api_key))
        if model_name:
            await cursor.execute("""
                INSERT INTO ai_models (id, name, provider, description, priority, tags)
                VALUES (%s, %s, 'openai', 'seeded from DEFAULT_MODEL', 100, '["chat"]')
                ON CONFLICT (id) DO NOTHING""", (model_name, model_name))
            await cursor.execute("""
                INSERT INTO ai_routes (purpose, fallback_chain, required) VALUES ('chat', %s, FALSE)
                ON CONFLICT (purpose) DO NOTHING""", (json.dumps([model_name]),))
        await cursor.execute("INSERT INTO ai_core_state (key, value) VALUES ('seeded_from_environment', now()::text)")
    return True


# ---------------------------------------------------------------- tool calls

async def record_tool_call(db: aiopg.Pool, record: dict) -> None:
    await execute(db, """
        INSERT INTO ai_tool_calls (call_id, tool_name, arguments, result, error, status, duration_ms,
                                   session_id, user_id, model)
        VALUES (%(call_id)s, %(tool_name)s, %(arguments)s, %(result)s, %(error)s, %(status)s,
                %(duration_ms)s, %(session_id)s, %(user_id)s, %(model)s)""",
                  {**record, "arguments": json.dumps(record["arguments"], ensure_ascii=False),
                   "result": None if record["result"] is None
                   else json.dumps(record["result"], ensure_ascii=False, default=str)})


def _call(row: dict) -> dict:
    return {**row, "created_at": _iso(row["created_at"])}


async def list_tool_calls(db: aiopg.Pool, tool_name: str | None, user_id: str | None, page: int,
                          page_size: int) -> tuple[list[dict], int]:
    where, params = [], []
    if tool_name:
        where.append("tool_name = %s")
        params.append(tool_name)
    if user_id:
        where.append("user_id = %s")
        params.append(user_id)
    clause = ("WHERE " + " AND ".join(where)) if where else ""
    total = await fetch_value(db, f"SELECT count(*) FROM ai_tool_calls {clause}", params)
    rows = await fetch_all(db, f"""
        SELECT id, call_id, tool_name, arguments, result, error, status, duration_ms, session_id,
               user_id, model, created_at
        FROM ai_tool_calls {clause} ORDER BY created_at DESC, id DESC LIMIT %s OFFSET %s""",
                           [*params, page_size, (page - 1) * page_size])
    return [_call(row) for row in rows], int(total)


async def tool_call_statistics(db: aiopg.Pool) -> list[dict]:
    rows = await fetch_all(db, """
        SELECT tool_name, count(*) AS count,
               count(*) FILTER (WHERE status = 'failed') AS failures,
               avg(duration_ms) AS mean_duration_ms,
               percentile_cont(0.95) WITHIN GROUP (ORDER BY duration_ms) AS p95_duration_ms,
               max(created_at) AS last_called_at
        FROM ai_tool_calls GROUP BY tool_name ORDER BY count(*) DESC, tool_name""")
    return [{"tool_name": row["tool_name"], "count": int(row["count"]), "failures": int(row["failures"]),
             "mean_duration_ms": round(float(row["mean_duration_ms"] or 0), 3),
             "p95_duration_ms": round(float(row["p95_duration_ms"] or 0), 3),
             "last_called_at": _iso(row["last_called_at"])} for row in rows]


# -- the tool calls that wait for a person's yes (confirmation.py)
async def supersede_confirmations(db: aiopg.Pool, user_id: str, session_id: str) -> None:
    """The session's pending call, if any, lapses: a session waits for one yes at a time."""
    await execute(db, """
            UPDATE ai_pending_confirmations SET status = 'superseded', decided_at = now()
             WHERE user_id = %s AND session_id = %s AND status = 'pending'""", (user_id, session_id))


async def insert_confirmation(db: aiopg.Pool, confirmation_id: str, user_id: str, session_id: str, tool_name: str,
                              arguments: str, kinds: list[str], effect: str, language: str, model: str | None,
                              expires: datetime) -> None:
    """Store a pending call; `arguments` is its JSON text."""
    await execute(db, """
            INSERT INTO ai_pending_confirmations (id, user_id, session_id, tool_name, arguments, kinds, effect,
                                                  language, model, expires_at)
            VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)""",
                  (confirmation_id, user_id, session_id, tool_name, arguments, kinds, effect, language, model,
                   expires))


async def pending_confirmation(db: aiopg.Pool, user_id: str, session_id: str) -> dict | None:
    """The session's newest pending call, with `expired`."""
    return await fetch_one(db, """
            SELECT id, user_id, session_id, tool_name, arguments, effect, language, model,
                   expires_at <= now() AS expired
              FROM ai_pending_confirmations
             WHERE user_id = %s AND session_id = %s AND status = 'pending'
             ORDER BY created_at DESC LIMIT 1""", (user_id, session_id))


async def decide_confirmation(db: aiopg.Pool, confirmation_id: str, status: str, *, unexpired_only: bool) -> int:
    """Move a pending call to `status` (with `unexpired_only`, only if it has not expired); rows changed."""
    still_valid = " AND expires_at > now()" if unexpired_only else ""
    return await execute(db, f"""
            UPDATE ai_pending_confirmations SET status = %s, decided_at = now()
             WHERE id = %s AND status = 'pending'{still_valid}""", (status, confirmation_id))
