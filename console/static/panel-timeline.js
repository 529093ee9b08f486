// Timeline: a person's memories and thinking entries merged, newest first, paged.
import { $, badge, el, explain, guard, notify, userPagedList, when } from "./console.js";

function detail(item) {
  if (item.memory) return `${item.memory.category}, priority ${item.memory.priority}, ${item.memory.source}`;
  if (item.thinking) return item.thinking.suggestion ? `suggests: ${item.thinking.suggestion}` : item.thinking.kind;
  return "";
}

const load = userPagedList({
  form: $("#timeline-filter"), path: "/api/memory-timeline", items: "items", count: $("#timeline-count"),
  list: $("#timeline-list"), pagerBox: $("#timeline-pager"), empty: "Nothing yet.",
  columns: [
    { title: "When", value: (item) => when(item.timestamp) },
    { title: "Type", value: (item) => badge(item.type) },
    { title: "User", value: (item) => el("code", {}, item.user_id) },
    { title: "Content", class: "wrap", value: (item) => item.content },
    { title: "Detail", class: "wrap muted", value: detail },
  ],
});

guard(() => load().catch((error) => notify(explain(error), "error")));
