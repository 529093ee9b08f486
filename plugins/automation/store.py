"""The automation tables: rules, scenes, the claims that make a trigger fire once, and the run
log. Plain parameterised SQL; every read that addresses a row by id also names its owner, so a
person never reaches another's rule or scene by guessing an id."""
from __future__ import annotations

import json
import uuid
from datetime import datetime
from typing import Any, Awaitable, Callable, Iterable, cast

import aiopg

from gateway.clock import rfc3339
from gateway.database import execute, fetch_all, fetch_one, fetch_value, transaction

RULE_COLUMNS = ("id, user_id, name, description, trigger_type, trigger_config, conditions, actions, enabled, "
                "next_run_at, last_run_at, created_at, updated_at")
SCENE_COLUMNS = "id, user_id, name, icon, rule_ids, actions, created_at, updated_at"
RUN_COLUMNS = ("id, user_id, rule_id, scene_id, trigger, trigger_detail, status, note, results, started_at, "
               "finished_at")
RULE_FIELDS = ("name", "description", "trigger_type", "trigger_config", "conditions", "actions", "enabled")
SCENE_FIELDS = ("name", "icon", "rule_ids", "actions")
JSON_FIELDS = frozenset({"trigger_config", "conditions", "actions", "rule_ids", "trigger_detail", "results"})
# Claims of device changes older than this are pruned: a feed hand-over repeats a change within
# seconds, never a day later.
CLAIM_RETENTION_HOURS = 24


def new_id() -> str:
    return uuid.uuid4().hex


def _out(row: dict | None) -> dict | None:
    if row is None:
        return None
    return {key: rfc3339(value) if isinstance(value, datetime) else value for key, value in row.items()}


def _param(field: str, value: Any) -> Any:
    return json.dumps(value) if field in JSON_FIELDS else value


# ---------------------------------------------------------------- rules

async def insert_rule(db: aiopg.Pool, user_id: str, rule: dict, next_run_at: datetime | None) -> dict:
    row = await fetch_one(db, f"""
        INSERT INTO automation_rules (id, user_id, name, description, trigger_type, trigger_config, conditions,
                                      actions, enabled, next_run_at)
        VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING {RULE_COLUMNS}""",
        (new_id(), user_id, rule["name"], rule["description"], rule["trigger_type"],
         json.dumps(rule["trigger_config"]), json.dumps(rule["conditions"]), json.dumps(rule["actions"]),
         rule["enabled"], next_run_at))
    return _out(row) or {}


async def list_rules(db: aiopg.Pool, user_id: str) -> list[dict]:
    rows = await fetch_all(db, f"SELECT {RULE_COLUMNS} FROM automation_rules WHERE user_id = %s "
                               "ORDER BY created_at, id", (user_id,))
    return [_out(row) or {} for row in rows]


async def get_rule(db: aiopg.Pool, rule_id: str, user_id: str | None) -> dict | None:
    """The rule; of `user_id` only, unless None (the administrator reaching any rule)."""
    if user_id is None:
        return _out(await fetch_one(db, f"SELECT {RULE_COLUMNS} FROM automation_rules WHERE id = %s", (rule_id,)))
    return _out(await fetch_one(db, f"SELECT {RULE_COLUMNS} FROM automation_rules WHERE id = %s AND user_id = %s",
                                (rule_id, user_id)))


async def update_rule(db: aiopg.Pool, rule_id: str, changes: dict,
                      next_run_at: datetime | None) -> dict | None:
    assignments = [f"{field} = %s" for field in changes] + ["next_run_at = %s", "updated_at = now()"]
    params = [_param(field, value) for field, value in changes.items()] + [next_run_at, rule_id]
    return _out(await fetch_one(db, f"UPDATE automation_rules SET {', '.join(assignments)} WHERE id = %s "
                                    f"RETURNING {RULE_COLUMNS}", params))


async def delete_rule(db: aiopg.Pool, rule_id: str) -> bool:
    async with transaction(db) as cursor:
        # A scene keeps the rules that are left.
        await cursor.execute("""UPDATE automation_scenes SET rule_ids = rule_ids - %s, updated_at = now()
                                WHERE rule_ids ? %s""", (rule_id, rule_id))
        await cursor.execute("DELETE FROM automation_rules WHERE id = %s", (rule_id,))
        return bool(cursor.rowcount)


async def owned_rule_ids(db: aiopg.Pool, user_id: str, rule_ids: Iterable[str]) -> set[str]:
    ids = list(rule_ids)
    if not ids:
        return set()
    rows = await fetch_all(db, "SELECT id FROM automation_rules WHERE user_id = %s AND id = ANY(%s)", (user_id, ids))
    return {row["id"] for row in rows}


async def rules_listening(db: aiopg.Pool, user_id: str, trigger_type: str) -> list[dict]:
    rows = await fetch_all(db, f"SELECT {RULE_COLUMNS} FROM automation_rules WHERE user_id = %s "
                               "AND trigger_type = %s AND enabled ORDER BY created_at, id", (user_id, trigger_type))
    return [_out(row) or {} for row in rows]


async def claim_device_change(db: aiopg.Pool, rule_id: str, event_id: str) -> bool:
    """True for the one caller that claims this change for this rule, on any instance."""
    claimed = await fetch_value(db, """INSERT INTO automation_device_claims (rule_id, event_id) VALUES (%s, %s)
                                       ON CONFLICT DO NOTHING RETURNING 1""", (rule_id, event_id))
    return claimed is not None


async def prune_claims(db: aiopg.Pool) -> int:
    return await execute(db, "DELETE FROM automation_device_claims WHERE claimed_at < now() - %s * interval '1 hour'",
                         (CLAIM_RETENTION_HOURS,))


async def claim_due_rules(db: aiopg.Pool, now: datetime, limit: int,
                          next_run: Callable[[dict, datetime], Awaitable[datetime | None]],
                          ) -> list[tuple[dict, datetime]]:
    """Claim the time rules due at `now` (rows another instance holds are skipped, not waited
    for), move each one's next_run_at on (`next_run(rule, due_at)`, None when it is done) in the
    same transaction, and answer each with the instant it was due."""
    claimed = []
    async with transaction(db) as cursor:
        await cursor.execute(f"""SELECT {RULE_COLUMNS} FROM automation_rules
                                 WHERE enabled AND next_run_at IS NOT NULL AND next_run_at <= %s
                                 ORDER BY next_run_at LIMIT %s FOR UPDATE SKIP LOCKED""", (now, limit))
        rows = [dict(row) for row in await cursor.fetchall()]
        for row in rows:
            due_at = row["next_run_at"]
            following = await next_run(row, max(due_at, now))
            await cursor.execute("UPDATE automation_rules SET next_run_at = %s, last_run_at = %s WHERE id = %s",
                                 (following, now, row["id"]))
            claimed.append((_out(row) or {}, due_at))
    return claimed


async def next_due(db: aiopg.Pool) -> datetime | None:
    return cast("datetime | None", await fetch_value(
        db, "SELECT min(next_run_at) FROM automation_rules WHERE enabled AND next_run_at IS NOT NULL"))


async def mark_ran(db: aiopg.Pool, rule_id: str, moment: datetime) -> None:
    await execute(db, "UPDATE automation_rules SET last_run_at = %s WHERE id = %s", (moment, rule_id))


# ---------------------------------------------------------------- scenes

async def insert_scene(db: aiopg.Pool, user_id: str, scene: dict) -> dict:
    row = await fetch_one(db, f"""INSERT INTO automation_scenes (id, user_id, name, icon, rule_ids, actions)
                                  VALUES (%s, %s, %s, %s, %s, %s) RETURNING {SCENE_COLUMNS}""",
                          (new_id(), user_id, scene["name"], scene["icon"], json.dumps(scene["rule_ids"]),
                           json.dumps(scene["actions"])))
    return _out(row) or {}


async def list_scenes(db: aiopg.Pool, user_id: str) -> list[dict]:
    rows = await fetch_all(db, f"SELECT {SCENE_COLUMNS} FROM automation_scenes WHERE user_id = %s "
                               "ORDER BY created_at, id", (user_id,))
    return [_out(row) or {} for row in rows]


async def get_scene(db: aiopg.Pool, scene_id: str, user_id: str | None) -> dict | None:
    if user_id is None:
        return _out(await fetch_one(db, f"SELECT {SCENE_COLUMNS} FROM automation_scenes WHERE id = %s", (scene_id,)))
    return _out(await fetch_one(db, f"SELECT {SCENE_COLUMNS} FROM automation_scenes WHERE id = %s AND user_id = %s",
                                (scene_id, user_id)))


async def update_scene(db: aiopg.Pool, scene_id: str, changes: dict) -> dict | None:
    assignments = [f"{field} = %s" for field in changes] + ["updated_at = now()"]
    params = [_param(field, value) for field, value in changes.items()] + [scene_id]
    return _out(await fetch_one(db, f"UPDATE automation_scenes SET {', '.join(assignments)} WHERE id = %s "
                                    f"RETURNING {SCENE_COLUMNS}", params))


async def delete_scene(db: aiopg.Pool, scene_id: str) -> bool:
    return bool(await execute(db, "DELETE FROM automation_scenes WHERE id = %s", (scene_id,)))


async def owned_scene_ids(db: aiopg.Pool, user_id: str, scene_ids: Iterable[str]) -> set[str]:
    ids = list(scene_ids)
    if not ids:
        return set()
    rows = await fetch_all(db, "SELECT id FROM automation_scenes WHERE user_id = %s AND id = ANY(%s)", (user_id, ids))
    return {row["id"] for row in rows}


# ---------------------------------------------------------------- runs

async def start_run(db: aiopg.Pool, user_id: str, rule_id: str | None, scene_id: str | None, trigger: str,
                    detail: dict, started_at: datetime) -> int:
    return int(await fetch_value(db, """
        INSERT INTO automation_runs (user_id, rule_id, scene_id, trigger, trigger_detail, status, started_at)
        VALUES (%s, %s, %s, %s, %s, 'running', %s) RETURNING id""",
        (user_id, rule_id, scene_id, trigger, json.dumps(detail), started_at)))


async def finish_run(db: aiopg.Pool, run_id: int, status: str, note: str, results: list[dict],
                     finished_at: datetime) -> dict:
    row = await fetch_one(db, f"""UPDATE automation_runs SET status = %s, note = %s, results = %s, finished_at = %s
                                  WHERE id = %s RETURNING {RUN_COLUMNS}""",
                          (status, note, json.dumps(results), finished_at, run_id))
    return _out(row) or {}


async def record_run(db: aiopg.Pool, user_id: str, rule_id: str | None, trigger: str, detail: dict,
                     status: str, note: str, moment: datetime) -> dict:
    """A run that did nothing (skipped: too late, or its conditions did not hold)."""
    row = await fetch_one(db, f"""
        INSERT INTO automation_runs (user_id, rule_id, trigger, trigger_detail, status, note, started_at, finished_at)
        VALUES (%s, %s, %s, %s, %s, %s, %s, %s) RETURNING {RUN_COLUMNS}""",
        (user_id, rule_id, trigger, json.dumps(detail), status, note, moment, moment))
    return _out(row) or {}


async def prune_runs(db: aiopg.Pool, kept: int) -> int:
    """Keep the newest `kept` runs of each rule and of each scene."""
    return await execute(db, """
        DELETE FROM automation_runs WHERE id IN (
            SELECT id FROM (SELECT id, row_number() OVER (PARTITION BY rule_id, scene_id ORDER BY id DESC) AS place
                            FROM automation_runs) ranked
            WHERE place > %s)""", (kept,))


async def list_runs(db: aiopg.Pool, column: str, owner_id: str, limit: int,
                    offset: int) -> tuple[list[dict], int]:
    assert column in ("rule_id", "scene_id")
    rows = await fetch_all(db, f"SELECT {RUN_COLUMNS} FROM automation_runs WHERE {column} = %s "
                               "ORDER BY id DESC LIMIT %s OFFSET %s", (owner_id, limit, offset))
    total = await fetch_value(db, f"SELECT count(*) FROM automation_runs WHERE {column} = %s", (owner_id,))
    return [_out(row) or {} for row in rows], int(total)
