// Memories: what the assistant remembers about the person; list, search, add, delete.
import {clear, h} from "../dom.js";

export function mount(root, app) {
  const {api, t} = app;
  const search = h("input", {type: "search", placeholder: t("mem.search"), "aria-label": t("mem.search")});
  const content = h("input", {required: true, maxlength: "2000", placeholder: t("mem.new"), "aria-label": t("mem.new")});
  const form = h("form", {class: "row-form"}, content, h("button", {type: "submit", class: "primary"}, t("rem.add")));
  const list = h("div", {class: "items"});
  root.append(h("div", {class: "page"}, h("header", {class: "page-header"}, h("h2", {}, t("nav.memories")),
    h("form", {role: "search", onsubmit: (event) => { event.preventDefault(); load(); }}, search)), form, list));

  async function load() {
    try {
      const query = search.value.trim();
      const answer = query ? await api.get("/memory/search", {q: query, limit: 50}) : await api.get("/memory", {limit: 200});
      clear(list);
      const memories = answer.memories || [];
      if (!memories.length) list.append(h("p", {class: "muted"}, t(query ? "sessions.no_results" : "mem.empty")));
      for (const memory of memories) {
        list.append(h("article", {class: "item"}, h("p", {}, memory.content),
          h("span", {class: "muted"}, [memory.category, memory.priority !== undefined ? `★ ${memory.priority}` : ""].filter(Boolean).join(" · ")),
          h("div", {class: "item-actions"}, h("button", {type: "button", class: "quiet danger", onclick: async () => {
            try { await api.request("DELETE", "/memory", {query: {id: memory.id}}); load(); }
            catch (error) { app.toast(error.message, {level: "error"}); }
          }}, t("chat.delete")))));
      }
    } catch (error) { clear(list).append(h("p", {class: "muted"}, error.message)); }
  }

  let timer = 0;
  search.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(load, 300); });
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try { await api.send("POST", "/memory", {content: content.value.trim()}); form.reset(); load(); }
    catch (error) { app.toast(error.message, {level: "error"}); }
  });
  return {show: load};
}
