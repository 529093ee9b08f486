// Database: the PostgreSQL the services use (embedded or DATABASE_URL), port checks of the
// optional servers, the memory table's row count, and the container stack's start/stop/restart.
import { $, actionButton, api, badge, el, every, explain, get, notify, replace, table, when } from "./console.js";

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

for (const action of ["start", "stop", "restart"]) {
  const button = $(`#db-${action}`);
  button.replaceWith(actionButton(button.textContent, () => compose(action), { id: button.id, class: button.className }));
}
$("#db-reload").addEventListener("click", () => load().catch((error) => notify(explain(error), "error")));
every(15000, load);
