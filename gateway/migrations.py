"""Plugins own their tables through numbered migration files (`001_create_users.sql`), applied in
order under an advisory lock, each once, recorded in `schema_migrations`. Each file runs in one
transaction with its record: one that fails leaves nothing of itself behind (PostgreSQL's DDL is
transactional), so a file may not end that transaction itself (COMMIT, BEGIN...)."""
from __future__ import annotations

import importlib.resources
import logging
import re
from typing import Iterable

import aiopg
import psycopg2

from .database import DatabaseError, in_transaction, pooled_connection

log = logging.getLogger("gateway.migrations")

MIGRATION_FILE = re.compile(r"^(\d{3,})_([A-Za-z0-9_\-]+)\.sql$")
MIGRATION_LOCK_ID = 0x6761_7465  # "gate": one lock for all services' migrations

# What a migration's statements may not start with: each would end (or try to nest) the
# transaction the runner holds, and a failure after it would leave half a migration applied.
_TRANSACTION_CONTROL = re.compile(
    r"(BEGIN|START\s+TRANSACTION|COMMIT|END|ROLLBACK(?!\s+TO\b)|ABORT|PREPARE\s+TRANSACTION)\b", re.I)
# What a scan skips over: comments, quoted strings and names, dollar-quoted bodies (a function's
# own BEGIN ... END).
_SQL_SKIPPED = re.compile(r"--[^\n]*|/\*.*?\*/|'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|(\$[A-Za-z_0-9]*\$).*?\1", re.S)


def transaction_control(sql: str) -> str | None:
    """The first statement of `sql` that controls the transaction (`COMMIT`, `BEGIN`...), or None.
    A standard SQL function body (`BEGIN ATOMIC ... END`) is not one."""
    code = _SQL_SKIPPED.sub(" ", sql)
    atomic = False
    for statement in code.split(";"):
        statement = statement.strip()
        if atomic:
            atomic = not re.match(r"END\b", statement, re.I)
            continue
        if re.search(r"\bBEGIN\s+ATOMIC\b", statement, re.I):
            atomic = not re.search(r"\bEND\s*$", statement, re.I)
            continue
        if _TRANSACTION_CONTROL.match(statement):
            return " ".join(statement.split())[:60]
    return None


def migration_files(package: str, directory: str) -> list[tuple[int, str, str]]:
    """(version, name, sql) of a plugin's migrations, in order; a malformed name is an error."""
    root = importlib.resources.files(package).joinpath(directory)
    found: list[tuple[int, str, str]] = []
    if not root.is_dir():
        return found
    for entry in root.iterdir():
        if not entry.name.endswith(".sql"):
            continue
        match = MIGRATION_FILE.match(entry.name)
        if not match:
            raise DatabaseError(f"migration {package}/{directory}/{entry.name} is not named NNN_name.sql")
        sql = entry.read_text(encoding="utf-8")
        control = transaction_control(sql)
        if control is not None:
            raise DatabaseError(f"migration {package}/{directory}/{entry.name} controls the transaction "
                                f"({control!r}): each migration runs in one transaction the runner holds, so "
                                f"that one that fails leaves nothing behind; remove the statement")
        found.append((int(match.group(1)), match.group(2), sql))
    found.sort()
    versions = [version for version, _, _ in found]
    if len(versions) != len(set(versions)):
        raise DatabaseError(f"two migrations in {package}/{directory} share a number")
    return found


async def apply_migrations(db: aiopg.Pool, plans: Iterable[tuple[str, list[tuple[int, str, str]]]]) -> list[str]:
    """Apply what has not been applied yet; return `plugin/NNN_name` of each one applied. Each
    migration and its record commit together; one that fails is rolled back whole (the database
    as it was before it, the plugin's level unchanged), stops the run, and the error names the
    plugin and the file. The migrations applied before it in this run stay applied."""
    applied: list[str] = []
    async with pooled_connection(db) as connection:
        async with connection.cursor() as cursor:
            await cursor.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK_ID,))
            try:
                await cursor.execute(
                    "CREATE TABLE IF NOT EXISTS schema_migrations ("
                    " plugin text NOT NULL, version integer NOT NULL, name text NOT NULL,"
                    " applied_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (plugin, version))")
                for plugin, files in plans:
                    await cursor.execute("SELECT version FROM schema_migrations WHERE plugin = %s", (plugin,))
                    done = {row[0] for row in await cursor.fetchall()}
                    for version, name, sql in files:
                        if version in done:
                            continue
                        try:
                            async with in_transaction(connection, cursor):
                                await cursor.execute(sql)
                                await cursor.execute(
                                    "INSERT INTO schema_migrations (plugin, version, name) VALUES (%s, %s, %s)",
                                    (plugin, version, name))
                        except psycopg2.Error as error:
                            level = f"{max(done):03d}" if done else "none applied"
                            raise DatabaseError(
                                f"migration {plugin}/{version:03d}_{name} failed (the file {version:03d}_{name}.sql "
                                f"of the plugin {plugin!r}) and was rolled back: nothing of it was applied, and the "
                                f"plugin's migrations stay at {level}. PostgreSQL said: {str(error).strip()}") from error
                        done.add(version)
                        applied.append(f"{plugin}/{version:03d}_{name}")
                        log.info("applied migration %s/%03d_%s", plugin, version, name)
            finally:
                await cursor.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK_ID,))
    return applied
