"""`GET /api/v1/admin/stats`: the stored totals the console's dashboard shows (counted through the
sessions plugin's contract; tests/console/test_proxies.py reads them through the console)."""
from __future__ import annotations

from tests.admin.conftest import error_of


async def test_only_the_administrator_reads_the_totals_and_only_where_sessions_are_kept(gateway):
    await error_of(await gateway.get("/api/v1/admin/stats", headers=gateway.alice), 403, "admin_only")
    await error_of(await gateway.get("/api/v1/admin/stats"), 401, "unauthorized")
    # This gateway is built without the sessions plugin.
    await error_of(await gateway.get("/api/v1/admin/stats", headers=gateway.admin), 503, "sessions_unavailable")
    await error_of(await gateway.get("/api/v1/admin/sessions/s1/messages", headers=gateway.admin), 503,
                   "sessions_unavailable")
