// Memories (docs/memory.md): what the assistant remembers about the person — listed newest
// first, searched by meaning and words, added by hand, deleted one by one.
import {clear, formatTime, h} from "../dom.js";
import {busy, field, heading, ownId, statusLine} from "../ui.js";

const CATEGORIES = ["identity", "preference", "health", "relationship", "work", "schedule", "other"];

export function mount(root, app) {
  const {api, t} = app;
  let query = "";
  const searchInput = h("input", {type: "search", name: "q", maxlength: "1000", "data-i18n-placeholder": "memories.search",
    placeholder: t("memories.search"), "data-i18n-label": "memories.search", "aria-label": t("memories.search")});
  const searchButton = h("button", {type: "submit", class: "quiet", "data-i18n": "memories.search_button"}, t("memories.search_button"));
  const searchForm = h("form", {role: "search", class: "pane-form search-row"}, searchInput, searchButton);
  const content = h("input", {name: "content", required: true, maxlength: "2000", autocomplete: "off",
    "data-i18n-placeholder": "memories.content_placeholder", placeholder: t("memories.content_placeholder")});
  const category = h("select", {name: "category"},
    CATEGORIES.map((name) => h("option", {value: name, "data-i18n": `memories.cat_${name}`}, t(`memories.cat_${name}`))));
  category.value = "other";
  const add = h("button", {type: "submit", class: "primary", "data-i18n": "memories.add"}, t("memories.add"));
  const addForm = h("form", {class: "pane-form"}, field(t, "memories.content", content, "grow"),
    field(t, "memories.category", category), add);
  const status = statusLine();
  const list = h("ul", {class: "card-list memory-list"});
  root.append(h("div", {class: "pane-body"}, heading(t, "memories.title"), h("p", {class: "muted", "data-i18n": "memories.intro"},
    t("memories.intro")), searchForm, addForm, status, list));

  function item(memory) {
    const remove = h("button", {type: "button", class: "quiet danger", "data-action": "delete",
      "aria-label": t("memories.delete_label", {content: memory.content.slice(0, 60)})}, t("memories.delete"));
    remove.addEventListener("click", () => {
      if (!confirm(t("memories.delete_confirm"))) return;
      busy(app, remove, async () => {
        await api.request("DELETE", "/memory", {query: {id: memory.id, user_id: ownId(app)}});
        element.remove();
        app.toast(t("memories.deleted"), {level: "success", timeout: 3000});
        if (!list.querySelector(".memory")) show([]);
      });
    });
    const key = `memories.cat_${memory.category}`;
    const element = h("li", {class: "tile memory", "data-id": memory.id},
      h("div", {class: "card-main"}, h("p", {class: "memory-content"}, memory.content),
        h("p", {class: "meta"}, h("span", {class: "badge"}, t(key) === key ? memory.category : t(key)),
          h("span", {}, t("memories.priority", {priority: memory.priority ?? 5})),
          h("span", {}, t(`memories.source_${memory.source}`) === `memories.source_${memory.source}` ? memory.source : t(`memories.source_${memory.source}`)),
          memory.updated_at ? h("time", {}, formatTime(memory.updated_at, app.language)) : null),
        memory.previous_content ? h("p", {class: "muted"}, t("memories.previously", {content: memory.previous_content})) : null),
      h("div", {class: "card-actions"}, remove));
    return element;
  }

  function show(memories) {
    clear(list);
    status.textContent = query ? t("memories.results", {count: memories.length, query}) : "";
    if (!memories.length) list.append(h("li", {class: "muted empty-line"}, t(query ? "memories.no_results" : "memories.empty")));
    for (const memory of memories) list.append(item(memory));
  }

  async function load() {
    try {
      const answer = query
        ? await api.get("/memory/search", {q: query, limit: 50, user_id: ownId(app)})
        : await api.get("/memory", {limit: 200, user_id: ownId(app)});
      show(answer.memories || []);
    } catch (error) {
      clear(list);
      status.textContent = error.hint ? `${error.message} — ${error.hint}` : error.message;
    }
  }

  searchForm.addEventListener("submit", (event) => {
    event.preventDefault();
    query = searchInput.value.trim();
    busy(app, searchButton, load);
  });
  searchInput.addEventListener("search", () => { if (!searchInput.value) { query = ""; load(); } });
  addForm.addEventListener("submit", (event) => {
    event.preventDefault();
    const text = content.value.trim();
    if (!text) return;
    busy(app, add, async () => {
      const answer = await api.send("POST", "/memory", {content: text, category: category.value, user_id: ownId(app)});
      app.toast(t(`memories.action_${answer.action || "created"}`), {level: "success", timeout: 3000});
      content.value = "";
      await load();
    });
  });
  return {show: load};
}
