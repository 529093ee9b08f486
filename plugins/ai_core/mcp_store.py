"""The table `ai_mcp_servers` (migration 005): the MCP servers the administrator added."""
from __future__ import annotations

import json

import aiopg

from gateway.database import execute, fetch_all

COLUMNS = ("name", "transport", "command", "args", "env", "url", "headers", "enabled", "allowed_tools",
           "timeout_seconds")


async def list_servers(db: aiopg.Pool) -> list[dict]:
    return await fetch_all(db, f"SELECT {', '.join(COLUMNS)}, updated_at FROM ai_mcp_servers ORDER BY name")


async def save_server(db: aiopg.Pool, server: dict, *, create_only: bool = False) -> bool:
    """Insert `server`, or replace the one of its name unless `create_only`; False when
    `create_only` found the name taken."""
    values = {**server, "args": json.dumps(server["args"]), "env": json.dumps(server["env"]),
              "headers": json.dumps(server["headers"]),
              "allowed_tools": None if server["allowed_tools"] is None else json.dumps(server["allowed_tools"])}
    conflict = "DO NOTHING" if create_only else (
        "DO UPDATE SET " + ", ".join(f"{column} = EXCLUDED.{column}" for column in COLUMNS[1:]) + ", updated_at = now()")
    placeholders = ", ".join(f"%({column})s" for column in COLUMNS)
    return await execute(db, f"INSERT INTO ai_mcp_servers ({', '.join(COLUMNS)}) VALUES ({placeholders}) "
                             f"ON CONFLICT (name) {conflict}", values) > 0


async def delete_server(db: aiopg.Pool, name: str) -> bool:
    return await execute(db, "DELETE FROM ai_mcp_servers WHERE name = %s", (name,)) > 0
