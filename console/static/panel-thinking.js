// Thinking: the assistant's autonomous-thinking log from the memory service, by user, paged.
import { $, actionButton, api, badge, el, explain, guard, notify, userPagedList, when } from "./console.js";

const load = userPagedList({
  form: $("#thinking-filter"), path: "/api/v1/thinking", items: "entries", count: $("#thinking-count"),
  list: $("#thinking-list"), pagerBox: $("#thinking-pager"),
  empty: "No thinking entries yet: the gateway's thinking job writes them about recently active people, "
    + "every hour once a language model is connected.",
  columns: [
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
  ],
});

// Says so plainly when the job has no model to think with (it then never writes an entry).
async function showModelState() {
  const status = await api("GET", "/api/thinking-status");
  $("#thinking-model").hidden = Boolean(status.model_configured);
}

guard(() => {
  showModelState().catch(() => {});  // the gateway down: the services banner says so
  return load().catch((error) => notify(explain(error), "error"));
});
