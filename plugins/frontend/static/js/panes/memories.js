// Memories (docs/memory.md): what the assistant remembers about the person — listed newest
// first, searched by meaning and words, added by hand, edited, deleted one by one.
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
  // Said plainly when the assistant cannot reflect on conversations: no language model for it.
  const thinking = h("p", {class: "notice info thinking-off", "data-i18n": "memories.thinking_off", hidden: true},
    t("memories.thinking_off"));
  root.append(h("div", {class: "pane-body"}, heading(t, "memories.title"), h("p", {class: "muted", "data-i18n": "memories.intro"},
    t("memories.intro")), thinking, searchForm, addForm, status, list));
  api.get("/thinking-status").then((answer) => { thinking.hidden = Boolean(answer.model_configured); }).catch(() => {});

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
    const edit = h("button", {type: "button", class: "quiet", "data-action": "edit", "aria-expanded": "false",
      "aria-label": t("memories.edit_label", {content: memory.content.slice(0, 60)})}, t("memories.edit"));
    edit.addEventListener("click", () => {
      if (element.querySelector(".memory-edit")) return;
      edit.setAttribute("aria-expanded", "true");
      element.querySelector(".card-main").append(editForm(memory, element, edit));
      element.querySelector(".memory-edit textarea").focus();
    });
    const key = `memories.cat_${memory.category}`;
    const element = h("li", {class: "tile memory", "data-id": memory.id},
      h("div", {class: "card-main"}, h("p", {class: "memory-content"}, memory.content),
        h("p", {class: "meta"}, h("span", {class: "badge"}, t(key) === key ? memory.category : t(key)),
          h("span", {}, t("memories.priority", {priority: memory.priority ?? 5})),
          h("span", {}, t(`memories.source_${memory.source}`) === `memories.source_${memory.source}` ? memory.source : t(`memories.source_${memory.source}`)),
          memory.updated_at ? h("time", {}, formatTime(memory.updated_at, app.language)) : null),
        memory.previous_content ? h("p", {class: "muted"}, t("memories.previously", {content: memory.previous_content})) : null),
      h("div", {class: "card-actions"}, edit, remove));
    return element;
  }

  // Edit in place: the content (embedded again by the memory service), category and priority,
  // saved with PUT /memory?id= as given (no merging); the list is then read again.
  function editForm(memory, element, edit) {
    const text = h("textarea", {name: "content", required: true, maxlength: "2000", rows: "2"}, memory.content);
    const categorySelect = h("select", {name: "category"},
      CATEGORIES.map((name) => h("option", {value: name}, t(`memories.cat_${name}`))));
    categorySelect.value = CATEGORIES.includes(memory.category) ? memory.category : "other";
    const priority = h("input", {name: "priority", type: "number", min: "0", max: "10", step: "1",
      value: String(memory.priority ?? 5)});
    const save = h("button", {type: "submit", class: "primary"}, t("memories.save"));
    const cancel = h("button", {type: "button", class: "quiet"}, t("memories.cancel"));
    const form = h("form", {class: "pane-form memory-edit", "aria-label": t("memories.edit_label", {content: memory.content.slice(0, 60)})},
      field(t, "memories.content", text, "grow"), field(t, "memories.category", categorySelect),
      field(t, "memories.priority_label", priority), save, cancel);
    const close = () => { form.remove(); edit.setAttribute("aria-expanded", "false"); edit.focus(); };
    cancel.addEventListener("click", close);
    form.addEventListener("keydown", (event) => { if (event.key === "Escape") close(); });
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      const content = text.value.trim();
      if (!content) return;
      busy(app, save, async () => {
        await api.request("PUT", "/memory", {query: {id: memory.id, user_id: ownId(app)},
          json: {content, category: categorySelect.value, priority: Number(priority.value)}});
        app.toast(t("memories.saved"), {level: "success", timeout: 3000});
        await load();
      });
    });
    return form;
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
