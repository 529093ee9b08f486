// People: the household's accounts (add with a one-time password or an invitation link, disable
// and enable, reset a password, make or unmake an administrator, delete after confirming what
// goes), and every personal API key with its last use (revoke any). Through the gateway's admin
// API (/api/people -> /api/v1/admin/users, /api/api-keys -> /api/v1/auth/api-keys).
import { $, actionButton, api, badge, el, explain, get, guard, notify, onSubmit, replace, table, when } from "./console.js";

const path = (person) => `/api/people/${encodeURIComponent(person.user_id)}`;

/** A secret the server shows once: a one-time password or an invitation link, with its person. */
function showSecret(person) {
  const box = $("#person-secret");
  if (person.one_time_password) {
    replace(box, el("p", { class: "notice" }, `One-time password of ${person.username} (shown once): `,
      el("code", { class: "secret" }, person.one_time_password)));
  } else if (person.invitation_code) {
    replace(box, el("p", { class: "notice" }, `Invitation of ${person.username} (shown once, until ${when(person.invitation_expires * 1000)}): `,
      el("code", { class: "secret" }, person.invitation_url || person.invitation_code)));
  } else {
    replace(box);
  }
}

async function change(person, body, done) {
  const changed = await api("PATCH", path(person), body);
  showSecret(changed);
  notify(done, "ok");
  await load();
}

async function remove(person) {
  const { counts } = await get(path(person));
  const what = Object.entries(counts).filter(([, n]) => n > 0).map(([kind, n]) => `${n} ${kind.replaceAll("_", " ")}`);
  const question = `Delete ${person.username} and all of their data${what.length ? ` (${what.join(", ")})` : ""}? This cannot be undone.`;
  if (!window.confirm(question)) return;
  await api("DELETE", `${path(person)}?confirm=true`);
  notify(`${person.username} deleted`, "ok");
  await load();
}

function actions(person) {
  return el("span", { class: "actions" },
    person.disabled
      ? actionButton("Enable", () => change(person, { disabled: false }, `${person.username} enabled`))
      : actionButton("Disable", () => change(person, { disabled: true }, `${person.username} disabled: signed out everywhere`)),
    actionButton("Reset password", () => change(person, { reset_password: "one_time_password" }, "New one-time password made")),
    actionButton(person.is_admin ? "Unmake administrator" : "Make administrator",
      () => change(person, { is_admin: !person.is_admin }, "Saved")),
    actionButton("Delete…", () => remove(person), { class: "danger" }));
}

async function loadPeople() {
  const body = await get("/api/people");
  $("#people-count").textContent = `${body.total}`;
  replace($("#people-list"), table([
    { title: "Person", value: (p) => el("span", {}, el("strong", {}, p.nickname), el("br"), el("code", { class: "muted" }, p.user_id)) },
    { title: "State", value: (p) => el("span", {}, badge(p.disabled ? "disabled" : "active"),
        p.is_admin ? badge("admin") : "", p.invited ? badge("invited") : "",
        p.password_change_required ? badge("one-time password") : "") },
    { title: "Added", value: (p) => when(p.created_at) },
    { title: "", value: actions },
  ], body.users, "Nobody besides the administrator yet."));
}

async function loadKeys() {
  const body = await get("/api/api-keys", { all: "true" });
  const active = body.keys.filter((key) => key.active).length;
  $("#keys-count").textContent = `${body.total}, ${active} active`;
  replace($("#keys-list"), table([
    { title: "Key", value: (k) => el("span", {}, el("strong", {}, k.name), el("br"), el("code", { class: "muted" }, k.id)) },
    { title: "Person", value: (k) => el("code", {}, k.user_id) },
    { title: "Scopes", value: (k) => k.scopes.join(", ") },
    { title: "Last used", value: (k) => (k.last_used_at ? when(k.last_used_at) : "never") },
    { title: "Expires", value: (k) => (k.expires_at ? when(k.expires_at) : "never") },
    { title: "State", value: (k) => badge(k.revoked_at ? "revoked" : k.active ? "active" : "expired") },
    { title: "", value: (k) => (k.revoked_at ? "" : actionButton("Revoke", async () => {
        await api("DELETE", `/api/api-keys/${encodeURIComponent(k.id)}`);
        notify(`Key ${k.name} revoked`, "ok");
        await loadKeys();
      }, { class: "danger" })) },
  ], body.keys, "No personal API key yet."));
}

async function load() {
  await Promise.all([loadPeople(), loadKeys()]);
}

onSubmit($("#person-form"), async (data) => {
  const body = { username: data.get("username").trim(), invite: data.get("invite") === "true",
                 is_admin: data.get("is_admin") === "on" };
  if (data.get("nickname").trim()) body.nickname = data.get("nickname").trim();
  if (data.get("email").trim()) body.email = data.get("email").trim();
  const person = await api("POST", "/api/people", body);
  showSecret(person);
  $("#person-form").reset();
  notify(`${person.username} added`, "ok");
  await load();
});

guard(() => load().catch((error) => notify(explain(error), "error")));
