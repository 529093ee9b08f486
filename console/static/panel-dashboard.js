// Dashboard: running services, active sessions, message and memory totals, the database and the
// machine; polled every 5 s and refreshed on every `status` push.
import { $, badge, bytes, duration, el, every, get, meter, number, onPush, replace, table, when } from "./console.js";

function card(label, value, detail, id) {
  return el("div", { class: "card", id }, el("div", { class: "label" }, label), el("div", { class: "value" }, value),
    el("div", { class: "detail" }, detail));
}

function backupCard(state) {
  const last = state.last;
  const value = state.running ? badge("running") : last ? badge(last.ok ? "ok" : "failed") : "–";
  const lines = [last ? `last ${when(last.at)}${last.ok ? `, ${bytes(last.size)}` : ""}` : "none taken yet",
    state.every ? (state.next ? `next ${when(state.next)}` : "scheduled") : "none scheduled"];
  return card("Backups", value, lines.join("; "), "card-backups");
}

const known = (value) => value !== null && value !== undefined;
const unavailable = (part, service) => (part.available ? null : `${service} not answering`);

async function load() {
  const body = await get("/api/dashboard");
  const { services, sessions, memory, database, system, performance } = body;
  const samples = new Map((performance.services || []).map((row) => [row.id, row.sample]));
  replace($("#dashboard-cards"),
    card("Services running", `${services.running} / ${services.total}`,
      services.running === services.total ? "all healthy" : `${services.total - services.running} not running`, "card-services"),
    card("Active sessions", sessions.available ? String(sessions.activeSessions) : "–",
      unavailable(sessions, "gateway") || `${sessions.activeUsers} user(s) connected`, "card-sessions"),
    card("Messages", known(sessions.messageTotal) ? String(sessions.messageTotal) : "–",
      unavailable(sessions, "gateway") || (known(sessions.sessionTotal) ? `in ${sessions.sessionTotal} stored session(s)`
        : "not reported by this gateway"), "card-messages"),
    card("Memories", memory.available ? String(memory.total) : "–",
      unavailable(memory, "memory service") || "of every user", "card-memory"),
    card("Database", badge(database.online ? "online" : "offline"),
      `${database.source === "embedded" ? "embedded PostgreSQL" : "DATABASE_URL"}, port ${database.port ?? "–"}`, "card-database"),
    backupCard(database.backups));
  replace($("#dashboard-services"), table([
    { title: "Service", value: (row) => row.name },
    { title: "State", value: (row) => badge(row.status) },
    { title: "Uptime", class: "num", value: (row) => (row.running ? duration(row.uptime) : "–") },
    { title: "CPU", class: "num", value: (row) => (samples.get(row.id) ? `${number(samples.get(row.id).cpuPercent)} %` : "–") },
    { title: "Memory", class: "num", value: (row) => (samples.get(row.id) ? bytes(samples.get(row.id).rssBytes) : "–") },
  ], services.services));
  const rows = [
    ["CPU", `${number(system.cpuPercent)} % of ${system.cpuCount} core(s), load ${(system.loadAverage || []).join(" ")}`, system.cpuPercent],
    ["Memory", `${bytes(system.memory.usedBytes)} of ${bytes(system.memory.totalBytes)} (${number(system.memory.percent)} %)`, system.memory.percent],
  ];
  if (system.disk) rows.push(["Disk", `${bytes(system.disk.usedBytes)} of ${bytes(system.disk.totalBytes)} (${number(system.disk.percent)} %)`, system.disk.percent]);
  replace($("#dashboard-system"), rows.map(([label, text, percent]) =>
    el("div", { class: "field" }, el("span", {}, el("strong", {}, label), " ", text), meter(percent))));
  $("#dashboard-updated").textContent = `Updated ${when(Date.now())}; refreshes every 5 s and on every service change.`;
}

every(5000, load);
// A start-all pushes many states at once: one reload for a burst.
let burst = null;
onPush("status", () => {
  clearTimeout(burst);
  burst = setTimeout(() => load().catch(() => {}), 250);
});
