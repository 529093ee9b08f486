// Timeline: a person's memories and thinking entries merged, newest first, paged.
import { $, badge, el, explain, get, guard, notify, onSubmit, pager, replace, table, when } from "./console.js";

const LIMIT = 50;
let offset = 0;

function detail(item) {
  if (item.memory) return `${item.memory.category}, priority ${item.memory.priority}, ${item.memory.source}`;
  if (item.thinking) return item.thinking.suggestion ? `suggests: ${item.thinking.suggestion}` : item.thinking.kind;
  return "";
}

async function load() {
  const userId = $("#timeline-filter").user_id.value.trim();
  const body = await get("/api/memory-timeline", { user_id: userId, limit: LIMIT, offset });
  $("#timeline-count").textContent = `(${body.total})`;
  replace($("#timeline-list"), table([
    { title: "When", value: (item) => when(item.timestamp) },
    { title: "Type", value: (item) => badge(item.type) },
    { title: "User", value: (item) => el("code", {}, item.user_id) },
    { title: "Content", class: "wrap", value: (item) => item.content },
    { title: "Detail", class: "wrap muted", value: detail },
  ], body.items, "Nothing yet."));
  pager($("#timeline-pager"), { offset, limit: LIMIT, total: body.total, go: async (next) => { offset = next; await load(); } });
}

onSubmit($("#timeline-filter"), async () => { offset = 0; await load(); });
guard(() => load().catch((error) => notify(explain(error), "error")));
