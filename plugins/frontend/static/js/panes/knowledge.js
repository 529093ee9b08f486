// Knowledge bases (docs/knowledge.md): the person's bases (create, delete), a base's documents
// with their indexing state (polled while any is still pending or indexing), a document added
// from text, an uploaded file or a web address, and a search of the base.
import {clear, formatTime, h} from "../dom.js";
import {renderMarkdown} from "../render.js";
import {busy, button, field, heading, ownId, statusLine} from "../ui.js";

const SOURCES = ["text", "file", "url"];
const POLL_MS = 2000;

export function mount(root, app) {
  const {api, t} = app;
  const state = {bases: [], current: null, documents: [], source: "text", timer: null};

  // ---------------------------------------------------------------- bases
  const baseName = h("input", {name: "name", required: true, maxlength: "200", autocomplete: "off"});
  const baseDescription = h("input", {name: "description", maxlength: "2000", autocomplete: "off"});
  const createBase = h("button", {type: "submit", class: "primary", "data-i18n": "knowledge.create"}, t("knowledge.create"));
  const baseForm = h("form", {class: "pane-form stacked base-form"}, field(t, "knowledge.base_name", baseName),
    field(t, "knowledge.base_description", baseDescription), createBase);
  const baseList = h("ul", {class: "base-list", "aria-label": t("knowledge.bases")});
  const side = h("aside", {class: "kb-side"}, h("h3", {"data-i18n": "knowledge.bases"}, t("knowledge.bases")), baseList, baseForm);

  // ---------------------------------------------------------------- one base
  const baseTitle = h("h3", {class: "kb-title"});
  const baseMeta = h("p", {class: "muted"});
  const deleteBase = button(t, "knowledge.delete_base", {class: "quiet danger", "data-action": "delete-base"});
  const docTitle = h("input", {name: "title", required: true, maxlength: "500", autocomplete: "off"});
  const docText = h("textarea", {name: "content", rows: "5"});
  const docFile = h("input", {type: "file", name: "file",
    accept: ".txt,.md,.markdown,.csv,.json,.pdf,.docx,text/*,application/pdf,application/json"});
  const docUrl = h("input", {type: "url", name: "url", placeholder: "https://", inputmode: "url"});
  const sourceFields = {text: field(t, "knowledge.content", docText), file: field(t, "knowledge.file", docFile),
    url: field(t, "knowledge.url", docUrl)};
  const sourceTabs = h("div", {class: "tabs", role: "tablist", "aria-label": t("knowledge.source")});
  const sourceButtons = {};
  for (const source of SOURCES) {
    sourceButtons[source] = h("button", {type: "button", role: "tab", class: "tab", "data-source": source,
      "data-i18n": `knowledge.source_${source}`, onclick: () => chooseSource(source)}, t(`knowledge.source_${source}`));
    sourceTabs.append(sourceButtons[source]);
  }
  const addDoc = h("button", {type: "submit", class: "primary", "data-i18n": "knowledge.add_document"}, t("knowledge.add_document"));
  const docForm = h("form", {class: "pane-form stacked doc-form"}, h("h4", {"data-i18n": "knowledge.add_document"}, t("knowledge.add_document")),
    sourceTabs, field(t, "knowledge.doc_title", docTitle), sourceFields.text, sourceFields.file, sourceFields.url, addDoc);
  const docList = h("ul", {class: "card-list doc-list"});
  const searchInput = h("input", {type: "search", name: "query", maxlength: "2000", "data-i18n-placeholder": "knowledge.search",
    placeholder: t("knowledge.search"), "data-i18n-label": "knowledge.search", "aria-label": t("knowledge.search")});
  const searchButton = h("button", {type: "submit", class: "quiet", "data-i18n": "knowledge.search_button"}, t("knowledge.search_button"));
  const searchForm = h("form", {role: "search", class: "pane-form search-row"}, searchInput, searchButton);
  const results = h("ol", {class: "card-list search-hits", "aria-live": "polite"});
  const status = statusLine();
  const main = h("div", {class: "kb-main"},
    h("div", {class: "pane-header"}, h("div", {}, baseTitle, baseMeta), deleteBase),
    searchForm, results, h("h4", {"data-i18n": "knowledge.documents"}, t("knowledge.documents")), docList, docForm);
  const placeholder = h("p", {class: "muted kb-none", "data-i18n": "knowledge.choose"}, t("knowledge.choose"));
  root.append(h("div", {class: "pane-body"}, heading(t, "knowledge.title"), status,
    h("div", {class: "kb-layout"}, side, h("div", {class: "kb-content"}, placeholder, main))));

  function chooseSource(source) {
    state.source = source;
    for (const [name, tab] of Object.entries(sourceButtons)) tab.setAttribute("aria-selected", String(name === source));
    for (const [name, element] of Object.entries(sourceFields)) element.hidden = name !== source;
    docText.required = source === "text";
    docFile.required = source === "file";
    docUrl.required = source === "url";
  }

  function renderBases() {
    clear(baseList);
    if (!state.bases.length) baseList.append(h("li", {class: "muted"}, t("knowledge.no_bases")));
    for (const base of state.bases) {
      const open = h("button", {type: "button", class: "base", "aria-current": String(base.id === state.current),
        "data-id": base.id, onclick: () => selectBase(base.id)},
        h("span", {class: "base-name"}, base.name), h("span", {class: "badge"}, String(base.doc_count ?? 0)));
      baseList.append(h("li", {}, open));
    }
    const base = state.bases.find((item) => item.id === state.current);
    main.hidden = !base;
    placeholder.hidden = Boolean(base);
    if (base) {
      baseTitle.textContent = base.name;
      baseMeta.textContent = [base.description, t("knowledge.doc_count", {count: base.doc_count ?? 0})].filter(Boolean).join(" · ");
    }
  }

  function renderDocuments() {
    clear(docList);
    if (!state.documents.length) docList.append(h("li", {class: "muted empty-line"}, t("knowledge.no_documents")));
    for (const document of state.documents) {
      const remove = h("button", {type: "button", class: "quiet danger", "data-action": "delete-document",
        "aria-label": t("knowledge.delete_document_label", {title: document.title})}, t("knowledge.delete"));
      remove.addEventListener("click", () => {
        if (!confirm(t("knowledge.delete_document_confirm", {title: document.title}))) return;
        busy(app, remove, async () => {
          await api.request("DELETE", `/knowledge/documents/${document.id}`, {query: {user_id: ownId(app)}});
          await Promise.all([loadBases(), loadDocuments()]);
        });
      });
      const statusKey = `knowledge.status_${document.index_status}`;
      docList.append(h("li", {class: "tile document", "data-id": document.id, "data-status": document.index_status},
        h("div", {class: "card-main"}, h("strong", {class: "card-title"}, document.title),
          h("p", {class: "meta"}, h("span", {class: `badge status-${document.index_status}`}, t(statusKey)),
            h("span", {}, t(`knowledge.source_${document.source_type}`)),
            h("span", {}, t("knowledge.size", {chars: document.content_length ?? 0, chunks: document.chunk_count ?? 0})),
            h("time", {}, formatTime(document.created_at, app.language))),
          document.index_error ? h("p", {class: "muted"}, document.index_error) : null,
          document.source_type === "url" && document.source_ref ? h("p", {class: "meta"},
            h("a", {href: document.source_ref, target: "_blank", rel: "noopener noreferrer"}, document.source_ref)) : null),
        h("div", {class: "card-actions"}, remove)));
    }
  }

  async function loadBases() {
    try {
      const answer = await api.get("/knowledge/bases", {user_id: ownId(app)});
      state.bases = answer.knowledge_bases || [];
      if (state.current && !state.bases.some((base) => base.id === state.current)) state.current = null;
      if (!state.current && state.bases.length) state.current = state.bases[0].id;
      status.textContent = "";
      renderBases();
    } catch (error) {
      status.textContent = error.hint ? `${error.message} — ${error.hint}` : error.message;
    }
  }

  async function loadDocuments() {
    clearTimeout(state.timer);
    if (!state.current) { state.documents = []; return; }
    const id = state.current;
    try {
      const answer = await api.get(`/knowledge/bases/${id}/documents`, {user_id: ownId(app)});
      if (id !== state.current) return;
      state.documents = answer.documents || [];
      renderDocuments();
      // Long documents are indexed in the background: follow them until they are ready.
      if (state.documents.some((item) => item.index_status === "pending" || item.index_status === "indexing") && !root.hidden) {
        state.timer = setTimeout(() => { loadDocuments(); loadBases(); }, POLL_MS);
      }
    } catch (error) {
      status.textContent = error.message;
    }
  }

  async function selectBase(id) {
    state.current = id;
    clear(results);
    searchInput.value = "";
    renderBases();
    await loadDocuments();
  }

  baseForm.addEventListener("submit", (event) => {
    event.preventDefault();
    const name = baseName.value.trim();
    if (!name) return;
    busy(app, createBase, async () => {
      const base = await api.send("POST", "/knowledge/bases", {name, description: baseDescription.value.trim(), user_id: ownId(app)});
      baseForm.reset();
      state.current = base.id;
      await loadBases();
      await selectBase(base.id);
      docTitle.focus();
    });
  });

  deleteBase.addEventListener("click", () => {
    const base = state.bases.find((item) => item.id === state.current);
    if (!base || !confirm(t("knowledge.delete_base_confirm", {name: base.name}))) return;
    busy(app, deleteBase, async () => {
      await api.request("DELETE", `/knowledge/bases/${base.id}`, {query: {user_id: ownId(app)}});
      state.current = null;
      await loadBases();
      await loadDocuments();
    });
  });

  docForm.addEventListener("submit", (event) => {
    event.preventDefault();
    const title = docTitle.value.trim() || (docFile.files[0] && docFile.files[0].name) || docUrl.value.trim();
    if (!title || !state.current) return;
    busy(app, addDoc, async () => {
      const body = {title, source_type: state.source, user_id: ownId(app)};
      if (state.source === "text") body.content = docText.value;
      else if (state.source === "url") body.url = docUrl.value.trim();
      else {
        if (!docFile.files[0]) return;
        body.file_id = (await api.upload(docFile.files[0])).id;
      }
      const document = await api.send("POST", `/knowledge/bases/${state.current}/documents`, body);
      app.toast(t(document.index_status === "ready" ? "knowledge.added_ready" : "knowledge.added_pending", {title}),
        {level: "success", timeout: 3000});
      docForm.reset();
      await Promise.all([loadBases(), loadDocuments()]);
    });
  });
  docFile.addEventListener("change", () => {
    if (!docTitle.value && docFile.files[0]) docTitle.value = docFile.files[0].name.replace(/\.[^.]+$/, "");
  });

  searchForm.addEventListener("submit", (event) => {
    event.preventDefault();
    const query = searchInput.value.trim();
    if (!query || !state.current) return;
    busy(app, searchButton, async () => {
      const answer = await api.send("POST", "/knowledge/search", {query, kb_ids: [state.current], limit: 10, user_id: ownId(app)});
      clear(results);
      if (!(answer.chunks || []).length) results.append(h("li", {class: "muted empty-line"}, t("knowledge.no_hits")));
      for (const chunk of answer.chunks || []) {
        // Where it is: the document, then the headings above the passage (the first heading is
        // often the document's own title, said once).
        const path = [...(chunk.heading_path || [])];
        if (path[0] === chunk.document_title) path.shift();
        results.append(h("li", {class: "tile hit"}, h("div", {class: "card-main"},
          h("strong", {class: "card-title"}, [chunk.document_title, ...path].join(" › ")),
          h("div", {class: "hit-text markdown"}, renderMarkdown(chunk.text, t)),   // sanitised (render.js)
          chunk.kb_name ? h("p", {class: "meta"}, chunk.kb_name) : null)));
      }
    });
  });

  chooseSource("text");
  const offLanguage = app.onLanguage(() => { renderBases(); renderDocuments(); });
  return {
    async show() { await loadBases(); await loadDocuments(); },
    hide() { clearTimeout(state.timer); },
    unmount() { clearTimeout(state.timer); offLanguage(); },
  };
}
