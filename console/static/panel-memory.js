// Memory: list or search a person's memories, add one, delete one (through the gateway).
import { $, actionButton, fieldError, api, el, get, guard, notify, explain, onSubmit, pager, replace, table, when } from "./console.js";

const CATEGORIES = ["identity", "preference", "health", "relationship", "work", "schedule", "other"];
const PAGE = 25;
let offset = 0;

function filters() {
  const form = $("#memory-filter");
  return { user_id: form.user_id.value.trim(), q: form.q.value.trim(), category: form.category.value };
}

async function load() {
  const { user_id, q, category } = filters();
  let memories;
  let total;
  if (q) {
    // Without a user the gateway searches the administrator's own memories: ask whose.
    if (!user_id) throw fieldError("user_id", "Search looks through one person's memories: name them.");
    const body = await get("/api/memory/search", { q, user_id, category, limit: 50 });
    memories = body.memories;
    total = memories.length;
  } else {
    const body = await get("/api/memory", { user_id, category, limit: PAGE, offset });
    memories = body.memories;
    total = body.total;
  }
  $("#memory-count").textContent = q ? `(${total} found)` : `(${total} in all)`;
  replace($("#memory-list"), table([
    { title: "Content", class: "wrap", value: (m) => m.content },
    { title: "User", value: (m) => el("code", {}, m.user_id) },
    { title: "Category", value: (m) => m.category },
    { title: "Priority", class: "num", value: (m) => m.priority },
    q ? { title: "Score", class: "num", value: (m) => (m.score ?? 0).toFixed(3) }
      : { title: "Updated", value: (m) => when(m.updated_at) },
    { title: "Source", value: (m) => m.source },
    { title: "", value: (m) => actionButton("Delete", async () => {
      if (!window.confirm(`Delete this memory of ${m.user_id}?\n\n${m.content}`)) return;
      await api("DELETE", `/api/memory?id=${encodeURIComponent(m.id)}&user_id=${encodeURIComponent(m.user_id)}`);
      notify("Memory deleted", "ok");
      await load();
    }, { class: "danger", "data-memory": m.id }) },
  ], memories, q ? "No memory matches." : "No memories yet."));
  pager($("#memory-pager"), { offset, limit: PAGE, total: q ? 0 : total,
                              go: async (next) => { offset = next; await load(); } });
}

for (const select of document.querySelectorAll("select[name=category]")) {
  for (const category of CATEGORIES) select.append(el("option", { value: category }, category));
}
$("#memory-create").category.value = "other";
onSubmit($("#memory-filter"), async () => { offset = 0; await load(); });
onSubmit($("#memory-create"), async (data) => {
  const body = await api("POST", "/api/memory", {
    user_id: data.get("user_id").trim(), content: data.get("content").trim(),
    category: data.get("category"), priority: Number(data.get("priority")),
  });
  notify(`Memory ${body.action}`, "ok");
  $("#memory-create").content.value = "";
  if (!$("#memory-filter").user_id.value) $("#memory-filter").user_id.value = data.get("user_id").trim();
  await load();
});

guard(() => load().catch((error) => notify(explain(error), "error")));
