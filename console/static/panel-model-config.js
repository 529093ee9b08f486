// Model Config: the AI core's providers, models and routing rules through the gateway's admin
// API; validation errors appear next to the field they name.
import { $, actionButton, api, badge, el, explain, fieldError, get, guard, notify, onSubmit, replace, showFieldErrors,
         table } from "./console.js";
import { loadMcpServers } from "./mcp-servers.js";

const BASE = "/api/model-config";
let providers = [];
let models = [];

// Not form.name / form.id: those are the form's own attributes.
const field = (form, name) => form.elements.namedItem(name);
const path = (kind, key) => `${BASE}/${kind}/${encodeURIComponent(key)}`;

async function load() {
  const [providerBody, modelBody, routeBody] = await Promise.all([
    get(`${BASE}/providers`), get(`${BASE}/models`), get(`${BASE}/routing`)]);
  providers = providerBody.providers;
  models = modelBody.models;
  renderProviders();
  renderModels();
  renderRoutes(Array.isArray(routeBody) ? routeBody : routeBody.routes || []);
}

function renderProviders() {
  const select = $("#model-form").provider;
  const chosen = select.value;
  replace(select, providers.map((p) => el("option", { value: p.name }, p.name)));
  if (chosen) select.value = chosen;
  replace($("#providers"), table([
    { title: "Name", value: (p) => el("strong", {}, p.name) },
    { title: "Base URL", value: (p) => el("code", {}, p.base_url) },
    { title: "API key", value: (p) => (p.has_api_key ? el("code", {}, p.api_key) : el("span", { class: "muted" }, "none")) },
    { title: "", value: (p) => el("div", { class: "actions" },
      actionButton("Check", async () => {
        const result = await api("POST", `${BASE}/health-check`, { provider: p.name });
        notify(result.message || (result.ok ? "reachable" : result.error), result.ok ? "ok" : "error");
      }),
      actionButton("Edit", async () => {
        const form = $("#provider-form");
        field(form, "name").value = p.name;
        field(form, "base_url").value = p.base_url;
        field(form, "api_key").value = "";
        $("#provider-form-title").textContent = `Edit provider ${p.name} (an empty key keeps the stored one)`;
        field(form, "base_url").focus();
      }),
      actionButton("Delete", async () => {
        if (!window.confirm(`Delete provider ${p.name}?`)) return;
        await api("DELETE", path("providers", p.name));
        notify(`Provider ${p.name} deleted`, "ok");
        await load();
      }, { class: "danger" })) },
  ], providers, "No provider yet: the offline agent answers. Add an OpenAI-compatible provider below."));
}

function renderModels() {
  replace($("#models"), table([
    { title: "Id", value: (m) => el("strong", {}, m.id) },
    { title: "Model", value: (m) => el("code", {}, m.name) },
    { title: "Provider", value: (m) => m.provider },
    { title: "Priority", class: "num", value: (m) => m.priority },
    { title: "Tags", value: (m) => (m.tags || []).join(", ") || "–" },
    { title: "Parameters", class: "mono", value: (m) => (Object.keys(m.params || {}).length ? JSON.stringify(m.params) : "–") },
    { title: "State", value: (m) => badge(m.enabled ? "enabled" : "disabled") },
    { title: "", value: (m) => el("div", { class: "actions" },
      actionButton("Edit", async () => {
        const form = $("#model-form");
        field(form, "id").value = m.id;
        field(form, "name").value = m.name;
        form.provider.value = m.provider;
        form.description.value = m.description || "";
        form.priority.value = m.priority;
        form.tags.value = (m.tags || []).join(", ");
        form.params.value = JSON.stringify(m.params || {});
        form.enabled.checked = m.enabled;
        $("#model-form-title").textContent = `Edit model ${m.id}`;
      }),
      actionButton("Delete", async () => {
        if (!window.confirm(`Delete model ${m.id}?`)) return;
        await api("DELETE", path("models", m.id));
        notify(`Model ${m.id} deleted`, "ok");
        await load();
      }, { class: "danger" })) },
  ], models, "No model yet."));
}

function renderRoutes(routes) {
  replace($("#routes"), table([
    { title: "Purpose", value: (r) => el("strong", {}, r.purpose) },
    { title: "Fallback chain", value: (r) => r.fallback_chain.join(" → ") },
    { title: "Required", value: (r) => (r.required ? "yes" : "no") },
    { title: "", value: (r) => el("div", { class: "actions" },
      actionButton("Edit", async () => {
        const form = $("#route-form");
        form.purpose.value = r.purpose;
        form.fallback_chain.value = r.fallback_chain.join(", ");
        form.required.checked = r.required;
      }),
      actionButton("Delete", async () => {
        if (!window.confirm(`Delete the ${r.purpose} rule?`)) return;
        await api("DELETE", path("routing", r.purpose));
        await load();
      }, { class: "danger" })) },
  ], routes, "No routing rule: every enabled model is tried by priority."));
}

const list = (text) => text.split(",").map((item) => item.trim()).filter(Boolean);

onSubmit($("#provider-form"), async (data) => {
  const name = data.get("name").trim();
  const body = { base_url: data.get("base_url").trim() };
  if (data.get("api_key")) body.api_key = data.get("api_key");
  await api("POST", path("providers", name), body);
  notify(`Provider ${name} saved`, "ok");
  $("#provider-form").reset();
  $("#provider-form-title").textContent = "Add a provider";
  await load();
});

onSubmit($("#model-form"), async (data) => {
  const id = data.get("id").trim();
  let params;
  try {
    params = JSON.parse(data.get("params") || "{}");
  } catch (error) {
    throw fieldError("params", `not valid JSON (${error.message})`);
  }
  const priority = data.get("priority") === "" ? 0 : Number(data.get("priority"));
  await api("POST", path("models", id), {
    name: data.get("name").trim(), provider: data.get("provider") || "", description: data.get("description"),
    priority: Number.isInteger(priority) ? priority : data.get("priority"), tags: list(data.get("tags")), params,
    enabled: data.get("enabled") === "on",
  });
  notify(`Model ${id} saved`, "ok");
  $("#model-form-title").textContent = "Add a model";
  await load();
});

onSubmit($("#route-form"), async (data) => {
  const purpose = data.get("purpose").trim();
  await api("POST", path("routing", purpose), { fallback_chain: list(data.get("fallback_chain")),
                                                 required: data.get("required") === "on" });
  notify(`Rule ${purpose} saved`, "ok");
  await load();
});

$("#fetch-models").addEventListener("click", async () => {
  const provider = $("#model-form").provider.value;
  if (!provider) { notify("Add a provider first.", "error"); return; }
  try {
    const body = await get(path("fetch-models", provider));
    replace($("#provider-models"), body.models.map((m) => el("option", { value: m.id })));
    notify(`${body.total} model(s) at ${provider}: pick one in "Provider's model name"`, "ok");
  } catch (error) {
    showFieldErrors($("#model-form"), error);
    notify(explain(error), "error");
  }
});

guard(() => {
  load().catch((error) => notify(explain(error), "error"));
  loadMcpServers().catch((error) => notify(explain(error), "error"));
});
