// Services: start all in order, forced restart, stop all; per service start, stop, restart,
// build; live state from the /ws `status` push; each service's log with live `log` lines.
import { $, actionButton, api, badge, duration, el, get, notify, onPush, replace, table } from "./console.js";

const rows = new Map();
const LOG_LINES = 300;

function render() {
  const records = [...rows.values()];
  const running = records.filter((row) => row.status === "running").length;
  $("#services-summary").textContent = `${running} of ${records.length} running`;
  replace($("#services-table"), table([
    { title: "Service", value: (row) => el("span", {}, el("strong", {}, row.name), el("br"), el("code", { class: "muted" }, row.id)) },
    { title: "State", value: (row) => el("span", { dataset: { service: row.id }, class: "state" }, badge(row.status),
      row.lastError ? el("div", { class: "field-error" }, row.lastError) : null) },
    { title: "Port", class: "num", value: (row) => row.port },
    { title: "PID", class: "num", value: (row) => row.pid ?? "–" },
    { title: "Uptime", class: "num", value: (row) => (row.running ? duration(row.uptime) : "–") },
    { title: "Restarts", class: "num", value: (row) => row.restarts ?? 0 },
    { title: "Actions", value: (row) => el("div", { class: "actions" },
      ["start", "stop", "restart", "build"].map((action) => actionButton(action[0].toUpperCase() + action.slice(1),
        () => transition(row, action), { "data-action": action, "data-service": row.id,
                                         disabled: (action === "start" && row.running) || (action === "stop" && !row.running),
                                         class: action === "stop" ? "danger" : undefined })),
      row.rolling ? actionButton("Rolling restart", () => transition(row, "rolling-restart"),
        { "data-action": "rolling-restart", "data-service": row.id, disabled: !row.running,
          title: "Replace its processes one at a time: connected clients reconnect at once" }) : null) },
  ], records));
}

async function transition(row, action) {
  notify(`${action} ${row.name}…`);
  const record = await api("POST", `/api/services/${encodeURIComponent(row.id)}/${action}`);
  rows.set(record.id, record);
  render();
  notify(`${row.name}: ${record.status}`, "ok");
}

async function all(path, label) {
  notify(`${label}…`);
  try {
    const body = await api("POST", path);
    for (const record of body.services) rows.set(record.id, record);
    notify(`${label}: done`, "ok");
  } catch (error) {
    for (const record of (error.body && error.body.services) || []) rows.set(record.id, record);
    throw error;
  } finally {
    render();
  }
}

async function load() {
  const body = await get("/api/services");
  rows.clear();
  for (const record of body.services) rows.set(record.id, record);
  render();
  const select = $("#log-service");
  if (!select.options.length) {
    replace(select, body.services.map((record) => el("option", { value: record.id }, record.name)));
    await loadLog();
  }
}

let logOffset = 0;  // lines shown, counted back from the end: the next page starts there

async function loadLog() {
  const id = $("#log-service").value;
  const page = await get(`/api/logs/${encodeURIComponent(id)}`, { lines: LOG_LINES });
  logOffset = page.lines.length;
  $("#log-older").disabled = !page.hasMore;
  $("#log").textContent = page.lines.join("\n") || "(the log is empty)";
  $("#log").scrollTop = $("#log").scrollHeight;
}

async function olderLog() {
  const id = $("#log-service").value;
  const page = await get(`/api/logs/${encodeURIComponent(id)}`, { lines: LOG_LINES, offset: logOffset });
  logOffset += page.lines.length;
  $("#log-older").disabled = !page.hasMore;
  $("#log").textContent = `${page.lines.join("\n")}\n${$("#log").textContent}`;
  $("#log").scrollTop = 0;
}

function wire(id, action) {
  const button = $(id);
  const replacement = actionButton(button.textContent, action, { id: button.id, class: button.className });
  button.replaceWith(replacement);
}

wire("#start-all", () => all("/api/services/start-all", "Start all"));
wire("#start-all-fresh", () => all("/api/services/start-all-fresh", "Forced restart of all"));
wire("#stop-all", () => all("/api/services/stop-all", "Stop all"));
wire("#log-refresh", loadLog);
wire("#log-older", olderLog);
wire("#log-clear", async () => {
  await api("DELETE", `/api/logs/${encodeURIComponent($("#log-service").value)}`);
  await loadLog();
});
$("#log-service").addEventListener("change", () => loadLog().catch((error) => notify(String(error), "error")));

onPush("status", (message) => {
  rows.set(message.service, message.status);
  render();
});
onPush("log", (message) => {
  if (message.service !== $("#log-service").value) return;
  logOffset += 1;  // a new newest line: the oldest one shown sits one further back
  if (!$("#log-follow").checked) return;
  const log = $("#log");
  const lines = log.textContent.split("\n");
  lines.push(message.line);
  log.textContent = lines.slice(-LOG_LINES * 10).join("\n");
  log.scrollTop = log.scrollHeight;
});
setInterval(() => { for (const row of rows.values()) if (row.running) row.uptime += 5; render(); }, 5000);
load().catch((error) => notify(String(error.message || error), "error"));
