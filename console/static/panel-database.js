// Database: the PostgreSQL the services use (embedded or DATABASE_URL), port checks of the
// optional servers, the memory table's row count, backups (take one now, the archives, the
// schedule), and the container stack's start/stop/restart.
import { $, actionButton, api, badge, bytes, duration, el, every, explain, get, notify, replace, table, when } from "./console.js";

function card(label, value, detail) {
  return el("div", { class: "card" }, el("div", { class: "label" }, label), el("div", { class: "value" }, value),
    el("div", { class: "detail" }, detail));
}

async function load() {
  const body = await get("/api/database/status");
  const memory = body.memoryTable || {};
  replace($("#db-cards"),
    card("PostgreSQL in use", badge(body.online ? "online" : "offline"),
      `${body.source === "embedded" ? "embedded" : "DATABASE_URL"} at ${body.host}:${body.port ?? "–"}`),
    card("Embedded PostgreSQL", badge(body.embedded.running ? "running" : "stopped"),
      body.embedded.running ? `pid ${body.embedded.pid}, port ${body.embedded.port}` : body.embedded.pgdata),
    card("Memory table rows", memory.available ? String(memory.rows) : "–",
      memory.available ? "memories of every user" : `memory service: ${memory.error || "not answering"}`));
  replace($("#db-ports"), table([
    { title: "Server", value: (p) => el("strong", {}, p.name) },
    { title: "Address", value: (p) => el("code", {}, `${p.host}:${p.port}`) },
    { title: "From", value: (p) => p.source },
    { title: "Port", value: (p) => badge(p.open ? "open" : "closed") },
    { title: "Latency", class: "num", value: (p) => (p.latencyMs === null ? "–" : `${p.latencyMs} ms`) },
  ], body.ports));
  $("#db-checked").textContent = `Checked ${when(body.checkedAt)}.`;
}

async function compose(action) {
  notify(`docker compose ${action}…`);
  const output = $("#db-output");
  try {
    const body = await api("POST", `/api/db/${action}`);
    output.textContent = body.output || "(no output)";
    notify(`Containers: ${action} done`, "ok");
  } catch (error) {
    output.textContent = explain(error) + (error.body && error.body.output ? `\n\n${error.body.output}` : "");
    throw error;
  } finally {
    output.hidden = false;
    await load();
  }
}

/** The schedule and the last backup, in words (the dashboard's Backups card says the same). */
function backupState(state) {
  const schedule = state.every ? `every ${duration(state.every)}, keeping ${state.keep || "all"}` : "none scheduled";
  if (state.running) return `Running since ${when(state.running.startedAt)}. Scheduled backups: ${schedule}.`;
  const last = state.last
    ? (state.last.ok ? `Last backup ${when(state.last.at)} (${state.last.reason}, ${bytes(state.last.size)}).`
      : `Last backup FAILED ${when(state.last.at)}: ${state.last.error || "see the console's log"}.`)
    : "No backup taken yet.";
  return `${last} Scheduled backups: ${schedule}${state.next ? `; next ${when(state.next)}` : ""}.`;
}

async function loadBackups() {
  const body = await get("/api/backups");
  $("#db-backup-state").textContent = backupState(body);
  replace($("#db-backups"), table([
    { title: "Archive", value: (b) => el("a", { href: `/api/backups/${encodeURIComponent(b.name)}`, download: b.name }, b.name) },
    { title: "Written", value: (b) => when(b.modifiedAt) },
    { title: "Size", class: "num", value: (b) => bytes(b.size) },
    { title: "Encrypted", value: (b) => (b.encrypted ? "yes" : "no") },
  ], body.backups, `No archive in ${body.directory} yet.`));
}

async function backUp() {
  notify("Backing up…");
  const output = $("#db-backup-output");
  try {
    const record = await api("POST", "/api/backups");
    output.hidden = true;
    notify(`Backup written: ${record.file} (${bytes(record.size)})`, "ok");
  } catch (error) {
    output.textContent = explain(error) + (error.body && error.body.backup ? `\n\n${error.body.backup.error}` : "");
    output.hidden = false;
    throw error;
  } finally {
    await loadBackups();
  }
}

const backupButton = $("#db-backup");
backupButton.replaceWith(actionButton(backupButton.textContent, backUp, { id: backupButton.id, class: backupButton.className }));
every(15000, loadBackups);

for (const action of ["start", "stop", "restart"]) {
  const button = $(`#db-${action}`);
  button.replaceWith(actionButton(button.textContent, () => compose(action), { id: button.id, class: button.className }));
}
$("#db-reload").addEventListener("click", () => load().catch((error) => notify(explain(error), "error")));
every(15000, load);
