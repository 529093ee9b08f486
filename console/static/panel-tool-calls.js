// Tool Calls: the AI core's record of every tool call, with per-tool statistics, filtered by
// tool (and user) and paged.
import { $, actionButton, badge, el, explain, get, guard, notify, number, onSubmit, replace, table, when } from "./console.js";

let page = 1;

function short(value) {
  const text = typeof value === "string" ? value : JSON.stringify(value);
  return text && text.length > 160 ? `${text.slice(0, 160)}…` : text;
}

async function stats() {
  const body = await get("/api/tool-calls/stats");
  $("#tool-totals").textContent = `(${body.total_calls} calls, ${body.total_failures} failed)`;
  const select = $("#tool-filter").tool_name;
  const chosen = select.value;
  replace(select, el("option", { value: "" }, "all tools"),
    body.tools.map((tool) => el("option", { value: tool.tool_name }, tool.tool_name)));
  select.value = chosen;
  replace($("#tool-stats"), table([
    { title: "Tool", value: (t) => actionButton(t.tool_name, async () => {
      select.value = t.tool_name; page = 1; await calls();
    }, { class: "link" }) },
    { title: "Calls", class: "num", value: (t) => t.count },
    { title: "Failures", class: "num", value: (t) => t.failures },
    { title: "Mean ms", class: "num", value: (t) => number(t.mean_duration_ms) },
    { title: "p95 ms", class: "num", value: (t) => number(t.p95_duration_ms) },
    { title: "Last called", value: (t) => when(t.last_called_at) },
  ], body.tools, "No tool has been called yet."));
}

async function calls() {
  const form = $("#tool-filter");
  const pageSize = Number(form.page_size.value);
  const body = await get("/api/tool-calls", { tool_name: form.tool_name.value, user_id: form.user_id.value.trim(),
                                              page, page_size: pageSize });
  $("#tool-count").textContent = `(${body.total})`;
  replace($("#tool-calls"), table([
    { title: "When", value: (c) => when(c.created_at) },
    { title: "Tool", value: (c) => el("code", {}, c.tool_name) },
    { title: "Status", value: (c) => badge(c.status) },
    { title: "Arguments", class: "wrap mono", value: (c) => short(c.arguments) },
    { title: "Result", class: "wrap mono", value: (c) => (c.error ? el("span", { class: "field-error" }, c.error) : short(c.result)) },
    { title: "ms", class: "num", value: (c) => number(c.duration_ms) },
    { title: "User", value: (c) => c.user_id || "–" },
    { title: "Model", value: (c) => c.model || "–" },
  ], body.calls, "No calls match."));
  const pages = Math.max(1, Math.ceil(body.total / pageSize));
  replace($("#tool-pager"),
    actionButton("Previous", async () => { page -= 1; await calls(); }, { disabled: page <= 1 }),
    el("span", { class: "muted" }, `page ${page} of ${pages}`),
    actionButton("Next", async () => { page += 1; await calls(); }, { disabled: page >= pages }));
}

onSubmit($("#tool-filter"), async () => { page = 1; await calls(); });
guard(() => Promise.all([stats(), calls()]).catch((error) => notify(explain(error), "error")));
