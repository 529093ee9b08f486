// The MCP servers the assistant uses (part of Model Config): each with its state, its tools and
// its last error, through the gateway's admin API; docs/mcp.md.
import { $, actionButton, api, badge, el, fieldError, get, notify, onSubmit, replace, table } from "./console.js";

const BASE = "/api/mcp-servers";
const field = (form, name) => form.elements.namedItem(name);
const path = (name) => `${BASE}/${encodeURIComponent(name)}`;
let servers = [];

export async function loadMcpServers() {
  servers = (await get(BASE)).servers;
  replace($("#mcp-servers"), table([
    { title: "Name", value: (s) => el("strong", {}, s.name) },
    { title: "Runs", value: (s) => el("code", {}, s.transport === "stdio" ? [s.command, ...s.args].join(" ") : s.url) },
    { title: "State", value: (s) => badge(s.status.state) },
    { title: "Tools", value: (s) => s.status.tools.join(", ") || "–" },
    { title: "Last error", value: (s) => (s.status.last_error ? el("span", { class: "field-error" }, s.status.last_error) : "–") },
    { title: "", value: (s) => el("div", { class: "actions" },
      actionButton("Edit", async () => edit(s)),
      actionButton(s.enabled ? "Switch off" : "Switch on", async () => {
        await api("PUT", path(s.name), { ...withoutStatus(s), enabled: !s.enabled });
        await loadMcpServers();
      }),
      actionButton("Delete", async () => {
        if (!window.confirm(`Delete the MCP server ${s.name}? Its tools leave the assistant's.`)) return;
        await api("DELETE", path(s.name));
        notify(`MCP server ${s.name} deleted`, "ok");
        await loadMcpServers();
      }, { class: "danger" })) },
  ], servers, "No MCP server: the assistant uses its own tools only."));
}

function withoutStatus(server) {
  const { status, ...saved } = server;
  return saved;
}

function edit(server) {
  const form = $("#mcp-form");
  for (const name of ["name", "transport", "command", "url", "timeout_seconds"]) field(form, name).value = server[name];
  field(form, "args").value = server.args.join("\n");
  field(form, "env").value = JSON.stringify(server.env);
  field(form, "headers").value = JSON.stringify(server.headers);
  field(form, "allowed_tools").value = (server.allowed_tools || []).join(", ");
  field(form, "enabled").checked = server.enabled;
  $("#mcp-form-title").textContent = `Edit MCP server ${server.name} (masked values keep the stored ones)`;
}

function json(data, name) {
  try {
    return JSON.parse(data.get(name) || "{}");
  } catch (error) {
    throw fieldError(name, `not valid JSON (${error.message})`);
  }
}

onSubmit($("#mcp-form"), async (data) => {
  const name = data.get("name").trim();
  const allowed = data.get("allowed_tools").split(",").map((item) => item.trim()).filter(Boolean);
  const timeout = Number(data.get("timeout_seconds"));
  await api("PUT", path(name), {
    name, transport: data.get("transport"), command: data.get("command").trim(),
    args: data.get("args").split("\n").map((line) => line.trim()).filter(Boolean),
    env: json(data, "env"), url: data.get("url").trim(), headers: json(data, "headers"),
    enabled: data.get("enabled") === "on", allowed_tools: allowed.length ? allowed : null,
    timeout_seconds: Number.isFinite(timeout) && data.get("timeout_seconds") !== "" ? timeout : data.get("timeout_seconds"),
  });
  notify(`MCP server ${name} saved`, "ok");
  $("#mcp-form-title").textContent = "Add an MCP server";
  await loadMcpServers();
});
