// Thinking: the assistant's autonomous-thinking log from the memory service, by user, paged.
import { $, actionButton, api, badge, el, explain, get, guard, notify, onSubmit, pager, replace, table, when } from "./console.js";

const LIMIT = 50;
let offset = 0;

async function load() {
  const userId = $("#thinking-filter").user_id.value.trim();
  const body = await get("/api/v1/thinking", { user_id: userId, limit: LIMIT, offset });
  $("#thinking-count").textContent = `(${body.total})`;
  replace($("#thinking-list"), table([
    { title: "When", value: (e) => when(e.created_at) },
    { title: "User", value: (e) => el("code", {}, e.user_id) },
    { title: "Kind", value: (e) => badge(e.kind) },
    { title: "Thought", class: "wrap", value: (e) => e.content },
    { title: "Suggestion", class: "wrap", value: (e) => e.suggestion || "–" },
    { title: "Model", value: (e) => e.model || "–" },
    { title: "", value: (e) => actionButton("Delete", async () => {
      if (!window.confirm("Delete this thinking entry?")) return;
      await api("DELETE", `/api/v1/thinking/${encodeURIComponent(e.id)}?user_id=${encodeURIComponent(e.user_id)}`);
      await load();
    }, { class: "danger" }) },
  ], body.entries, "No thinking entries yet: the gateway's thinking job writes them after conversations."));
  pager($("#thinking-pager"), { offset, limit: LIMIT, total: body.total, go: async (next) => { offset = next; await load(); } });
}

onSubmit($("#thinking-filter"), async () => { offset = 0; await load(); });
guard(() => load().catch((error) => notify(explain(error), "error")));
