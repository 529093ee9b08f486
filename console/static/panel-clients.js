// Clients: every client the gateway has seen (device, user agent, online state) and the
// operator's note on each, editable in place.
import { $, api, badge, el, explain, get, guard, notify, onSubmit, replace, table, when } from "./console.js";

function noteForm(client) {
  const form = el("form", { class: "inline", "data-client": client.client_id },
    el("label", { class: "field" }, el("input", { name: "note", value: client.note || "", maxlength: 1000,
                                                  placeholder: "add a note", "aria-label": "Note" })),
    el("button", { type: "submit" }, "Save"));
  onSubmit(form, async (data) => {
    const body = await api("PUT", `/api/clients/${encodeURIComponent(client.client_id)}/note`, { note: data.get("note") });
    client.note = body.note;
    notify("Note saved", "ok");
  });
  return form;
}

async function load() {
  const body = await get("/api/clients", { user_id: $("#clients-filter").user_id.value.trim() });
  const online = body.clients.filter((client) => client.online).length;
  $("#clients-count").textContent = `${body.total} client(s), ${online} online`;
  replace($("#clients-list"), table([
    { title: "Device", value: (c) => el("span", {}, el("strong", {}, c.device_name || "unnamed"), el("br"), el("code", { class: "muted" }, c.client_id)) },
    { title: "User", value: (c) => el("code", {}, c.user_id) },
    { title: "State", value: (c) => badge(c.online ? "online" : "offline") },
    { title: "Last seen", value: (c) => when(c.last_seen) },
    { title: "User agent", class: "wrap muted", value: (c) => c.user_agent || "–" },
    { title: "Note", value: noteForm },
  ], body.clients, "No client has connected yet."));
}

onSubmit($("#clients-filter"), load);
guard(() => load().catch((error) => notify(explain(error), "error")));
