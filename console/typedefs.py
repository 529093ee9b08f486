"""Every typed key the console stores on its application (the database panel's own is in
console/database.py, beside the class it holds)."""
from __future__ import annotations

from aiohttp import web

from .logstore import LogStore
from .peers import Peers
from .performance import PerformanceMonitor
from .push import PushHub, SttLog
from .supervisor import Supervisor

SUPERVISOR = web.AppKey("console_supervisor", Supervisor)
PUSH = web.AppKey("console_push", PushHub)
LOGS = web.AppKey("console_logs", LogStore)
STT_LOG = web.AppKey("console_stt_log", SttLog)
STARTED = web.AppKey("console_started", float)  # time.monotonic() at start, for uptime
CREDENTIAL = web.AppKey("console_credential", str)  # empty: loopback only, none asked
PEERS = web.AppKey("console_peers", Peers)  # the one client session to the services
PERFORMANCE = web.AppKey("console_performance", PerformanceMonitor)
PROXY_MAX_BODY = web.AppKey("console_proxy_max_body", int)  # bytes a proxied request body may have
