// Sessions: the gateway's live sessions grouped by user, each with its connected devices, and
// the message history of the one chosen.
import { $, actionButton, badge, el, explain, get, guardEvery, notify, replace, table, when } from "./console.js";

function devices(session) {
  if (!session.devices || !session.devices.length) return el("span", { class: "muted" }, "no device connected");
  return el("ul", {}, session.devices.map((device) => el("li", {},
    el("strong", {}, device.device_name || device.client_id || "unnamed device"),
    el("span", { class: "muted" }, ` ${device.user_agent || ""} · since ${when(device.connected_at)}`))));
}

async function history(session) {
  $("#history-title").textContent = `Message history: ${session.title || session.session_id} (${session.user_id})`;
  const body = await get(`/api/sessions/${encodeURIComponent(session.session_id)}/messages`,
                         { user_id: session.user_id, limit: 100 });
  replace($("#sessions-history"), table([
    { title: "When", value: (m) => when(m.created_at) },
    { title: "Role", value: (m) => badge(m.role) },
    { title: "Message", class: "wrap", value: (m) => m.content },
  ], body.messages || [], "No messages in this session."));
}

async function load() {
  const body = await get("/api/sessions/active");
  const users = Object.entries(body.users || {});
  $("#sessions-summary").textContent =
    `${body.total_sessions ?? 0} active session(s) of ${body.total_users ?? users.length} user(s)`;
  if (!users.length) {
    replace($("#sessions-users"), el("p", { class: "empty" }, "Nobody is connected right now."));
    return;
  }
  replace($("#sessions-users"), users.map(([userId, sessions]) => el("div", { class: "user-group" },
    el("h3", {}, userId, el("span", { class: "muted" }, ` · ${sessions.length} session(s)`)),
    table([
      { title: "Session", value: (s) => el("span", {}, s.title || "(untitled)", el("br"), el("code", { class: "muted" }, s.session_id)) },
      { title: "Devices", value: devices },
      { title: "Turn", value: (s) => (s.turn_running ? badge("running") : el("span", { class: "muted" }, "idle")) },
      { title: "Queue", class: "num", value: (s) => s.queue_length ?? 0 },
      { title: "Last activity", value: (s) => when(s.last_activity) },
      { title: "", value: (s) => actionButton("History", () => history(s)) },
    ], sessions))));
}

$("#sessions-reload").addEventListener("click", () => load().catch((error) => notify(explain(error), "error")));
guardEvery(10000, load);
