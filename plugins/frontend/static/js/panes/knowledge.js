// Knowledge bases: create, open, add a document (text, a web address or an uploaded file), search.
import {clear, h} from "../dom.js";

export function mount(root, app) {
  const {api, t} = app;
  let current = null;
  const name = h("input", {required: true, maxlength: "100", placeholder: t("kb.name"), "aria-label": t("kb.name")});
  const create = h("form", {class: "row-form"}, name, h("button", {type: "submit", class: "primary"}, t("kb.create")));
  const bases = h("div", {class: "items"});
  const detail = h("div", {class: "kb-detail"});
  root.append(h("div", {class: "page"}, h("header", {class: "page-header"}, h("h2", {}, t("nav.knowledge"))), create, bases, detail));

  async function loadBases() {
    try {
      const answer = await api.get("/knowledge/bases");
      clear(bases);
      if (!answer.knowledge_bases.length) bases.append(h("p", {class: "muted"}, t("kb.empty")));
      for (const base of answer.knowledge_bases) {
        bases.append(h("button", {type: "button", class: "item kb", "aria-current": String(current === base.id),
          onclick: () => open(base.id)}, h("strong", {}, base.name), h("span", {class: "muted"}, ` · ${t("kb.docs", {count: base.doc_count})}`)));
      }
    } catch (error) { clear(bases).append(h("p", {class: "muted"}, error.message)); }
  }

  async function open(id) {
    current = id;
    loadBases();
    const answer = await api.get(`/knowledge/bases/${encodeURIComponent(id)}`);
    const base = answer.knowledge_base;
    const kind = h("select", {"aria-label": t("kb.kind")}, ...["text", "url", "file"].map((value) => h("option", {value}, t(`kb.kind_${value}`))));
    const title = h("input", {required: true, placeholder: t("kb.doc_title"), "aria-label": t("kb.doc_title")});
    const text = h("textarea", {rows: "3", placeholder: t("kb.text"), "aria-label": t("kb.text")});
    const file = h("input", {type: "file", hidden: true, "aria-label": t("kb.kind_file")});
    const add = h("form", {class: "row-form wrap"}, kind, title, text, file, h("button", {type: "submit", class: "primary"}, t("rem.add")));
    kind.addEventListener("change", () => { text.hidden = kind.value === "file"; file.hidden = kind.value !== "file";
      text.placeholder = t(kind.value === "url" ? "kb.url" : "kb.text"); });
    add.addEventListener("submit", async (event) => {
      event.preventDefault();
      try {
        const body = {title: title.value.trim(), source_type: kind.value};
        if (kind.value === "text") body.content = text.value;
        if (kind.value === "url") body.url = text.value.trim();
        if (kind.value === "file") body.file_id = (await api.upload(file.files[0])).id;
        await api.send("POST", `/knowledge/bases/${encodeURIComponent(id)}/documents`, body);
        open(id);
      } catch (error) { app.toast(error.message, {level: "error"}); }
    });
    const query = h("input", {type: "search", placeholder: t("kb.search"), "aria-label": t("kb.search")});
    const results = h("div", {class: "items"});
    const searchForm = h("form", {role: "search", class: "row-form"}, query, h("button", {type: "submit"}, t("kb.search_button")));
    searchForm.addEventListener("submit", async (event) => {
      event.preventDefault();
      try {
        const found = await api.send("POST", "/knowledge/search", {query: query.value.trim(), kb_ids: [id], limit: 10});
        clear(results);
        if (!found.chunks.length) results.append(h("p", {class: "muted"}, t("sessions.no_results")));
        for (const chunk of found.chunks) {
          results.append(h("article", {class: "item"}, h("strong", {}, chunk.document_title || ""), h("p", {}, chunk.text)));
        }
      } catch (error) { app.toast(error.message, {level: "error"}); }
    });
    const documents = h("div", {class: "items"});
    for (const document_ of answer.documents) {
      documents.append(h("article", {class: "item"}, h("strong", {}, document_.title),
        h("span", {class: "muted"}, ` · ${document_.source_type} · ${t("kb.chunks", {count: document_.chunk_count})}`),
        h("div", {class: "item-actions"}, h("button", {type: "button", class: "quiet danger", onclick: async () => {
          await api.request("DELETE", `/knowledge/documents/${encodeURIComponent(document_.id)}`).catch((error) => app.toast(error.message));
          open(id);
        }}, t("chat.delete")))));
    }
    clear(detail).append(h("h3", {}, base.name), searchForm, results, add, documents);
  }

  create.addEventListener("submit", async (event) => {
    event.preventDefault();
    try { const base = await api.send("POST", "/knowledge/bases", {name: name.value.trim()}); create.reset(); open(base.id); }
    catch (error) { app.toast(error.message, {level: "error"}); }
  });
  return {show: loadBases};
}
