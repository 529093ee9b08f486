// Chat Platforms: the platform bridge's bots (create, edit, enable/disable, delete) and each
// bot's message log, paged back in time.
import { $, actionButton, api, badge, el, explain, get, guard, notify, onSubmit, replace, table, when } from "./console.js";

const BASE = "/api/chat-platforms/bots";
// Each platform's configuration fields (docs/platform-bridge.md); secrets are never shown back.
const CONFIG_FIELDS = {
  telegram: [["bot_token", "Bot token (from @BotFather)", true], ["mode", "Mode: polling or webhook", false, ["polling", "webhook"]],
             ["webhook_secret", "Webhook secret (webhook mode)", true]],
  discord: [["application_id", "Application id", false], ["public_key", "Public key (64 hex digits)", false],
            ["bot_token", "Bot token", true]],
  webhook: [["outgoing_url", "Outgoing URL (where replies are posted)", false], ["signing_secret", "Signing secret (16+ characters)", true]],
};
let bots = [];
let editing = null;

function configInputs(platform, config = {}) {
  replace($("#bot-config"), CONFIG_FIELDS[platform].map(([key, label, secret, options]) =>
    el("label", { class: "field" }, label,
      options ? el("select", { name: `config.${key}` }, options.map((option) =>
        el("option", { value: option, selected: config[key] === option }, option)))
        : el("input", { name: `config.${key}`, type: secret ? "password" : "text", autocomplete: "off",
                        value: secret ? "" : config[key] || "",
                        placeholder: secret && config[key] ? `stored (${config[key]}); empty keeps it` : "" }))));
}

function render() {
  replace($("#bots"), table([
    { title: "Bot", value: (b) => el("span", {}, el("strong", {}, b.name), el("br"), el("code", { class: "muted" }, b.id)) },
    { title: "Platform", value: (b) => b.platform },
    { title: "State", value: (b) => el("span", {}, badge(b.status.state), b.status.error ? el("div", { class: "field-error" }, b.status.error) : null) },
    { title: "People", class: "num", value: (b) => b.users.length },
    { title: "Platform calls", class: "mono", value: (b) => Object.values(b.endpoints || {}).join(" ") || "–" },
    { title: "", value: (b) => el("div", { class: "actions" },
      actionButton(b.enabled ? "Disable" : "Enable", async () => {
        await api("POST", `${BASE}/${encodeURIComponent(b.id)}/${b.enabled ? "disable" : "enable"}`);
        await load();
      }),
      actionButton("Edit", async () => edit(b)),
      actionButton("Messages", () => messages(b)),
      b.allow_linking ? actionButton("Link code", async () => {
        const userId = window.prompt(`A link code for ${b.name}: which gateway user id will send it?`);
        if (!userId) return;
        const code = await api("POST", `${BASE}/${encodeURIComponent(b.id)}/link-codes`, { user_id: userId.trim() });
        $("#bot-log-title").textContent = `Link code for ${code.user_id} on ${b.name}`;
        replace($("#bot-log"), el("div", { class: "card" }, el("div", { class: "value mono" }, code.code),
          el("p", {}, code.instruction), el("div", { class: "detail" }, `Valid until ${when(code.expires_at)}; it works once.`)));
        replace($("#bot-log-pager"));
      }) : null,
      actionButton("Delete", async () => {
        if (!window.confirm(`Delete bot ${b.name}, with its people and log?`)) return;
        await api("DELETE", `${BASE}/${encodeURIComponent(b.id)}`);
        notify(`Bot ${b.name} deleted`, "ok");
        await load();
      }, { class: "danger" })) },
  ], bots, "No bot yet: add one on the left."));
}

function edit(bot) {
  editing = bot;
  const form = $("#bot-form");
  form.elements.namedItem("name").value = bot ? bot.name : "";
  form.platform.value = bot ? bot.platform : "telegram";
  form.platform.disabled = Boolean(bot);
  form.users.value = bot ? bot.users.filter((u) => u.linked_by !== "code")
    .map((u) => `${u.platform_user_id} = ${u.user_id}`).join("\n") : "";
  form.enabled.checked = bot ? bot.enabled : true;
  form.allow_linking.checked = bot ? bot.allow_linking : true;
  configInputs(form.platform.value, bot ? bot.config : {});
  $("#bot-form-title").textContent = bot ? `Edit ${bot.name}` : "Add a bot";
}

function parseUsers(text) {
  return text.split("\n").map((line) => line.trim()).filter(Boolean).map((line) => {
    const [platformUserId, userId] = line.split("=").map((part) => part.trim());
    return { platform_user_id: platformUserId, user_id: userId || "" };
  });
}

async function messages(bot, before) {
  $("#bot-log-title").textContent = `Message log: ${bot.name}`;
  const body = await get(`${BASE}/${encodeURIComponent(bot.id)}/messages`, { limit: 50, before });
  replace($("#bot-log"), table([
    { title: "When", value: (m) => when(m.created_at) },
    { title: "", value: (m) => badge(m.direction === "in" ? "in" : "out") },
    { title: "Who", value: (m) => m.user_id || el("span", { class: "muted" }, `${m.platform_user_id} (not allowed)`) },
    { title: "Text", class: "wrap", value: (m) => (m.error ? el("span", { class: "field-error" }, m.error) : m.text) },
    { title: "ms", class: "num", value: (m) => m.latency_ms ?? "–" },
  ], body.messages, "No messages yet."));
  replace($("#bot-log-pager"), body.has_more ? actionButton("Older", () => messages(bot, body.next_before)) : null,
    before ? actionButton("Newest", () => messages(bot)) : null);
}

async function load() {
  bots = (await get(BASE)).bots;
  render();
}

$("#bot-form").platform.addEventListener("change", (event) => configInputs(event.target.value));
$("#bot-form-new").addEventListener("click", () => edit(null));
onSubmit($("#bot-form"), async (data) => {
  const config = {};
  for (const [key, value] of data.entries()) {
    if (key.startsWith("config.") && value !== "") config[key.slice(7)] = value;
  }
  const body = { name: data.get("name").trim(), config, users: parseUsers(data.get("users")),
                 enabled: data.get("enabled") === "on", allow_linking: data.get("allow_linking") === "on" };
  if (editing) {
    await api("PATCH", `${BASE}/${encodeURIComponent(editing.id)}`, body);
  } else {
    await api("POST", BASE, { ...body, platform: data.get("platform") });
  }
  notify(`Bot ${body.name} saved`, "ok");
  edit(null);
  await load();
});
edit(null);
guard(() => load().catch((error) => notify(explain(error), "error")));
