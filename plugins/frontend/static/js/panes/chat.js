// The chat pane: the session list (new, rename, delete, search, export) and the conversation,
// streamed over /ws/chat. Frames of other sessions mark those sessions as updated.
import {ApiError} from "../api.js";
import {append, clear, formatTime, h} from "../dom.js";
import {codeBlock, renderMarkdown, renderPart, renderStreaming} from "../render.js";
import {ReplySpeaker, VoiceRecorder, voiceSupported} from "../voice.js";

// Documents the knowledge plugin reads (docs/knowledge.md): by extension, since browsers give
// Markdown and Word files various MIME types, or none. Other text/* files are read as text too;
// HTML is not taken by the upload (pages come in as addresses).
const DOCUMENT_EXTENSIONS = [".pdf", ".docx", ".md", ".markdown", ".txt", ".text", ".csv", ".json"];
const DOCUMENT_POLL_MS = 1500;
const KB_NAME_MAX = 200;

function isDocument(file) {
  const name = (file.name || "").toLowerCase();
  if (DOCUMENT_EXTENSIONS.some((extension) => name.endsWith(extension))) return true;
  return file.type.startsWith("text/") && file.type !== "text/html";
}
// Going back to a conversation shows its newest messages (one request, few enough to render at
// once: more than a screen), and older pages come as the person scrolls up towards them.
const NEWEST_PAGE = 20;
const HISTORY_PAGE = 50;
// How far above the top of the view the next older page starts loading.
const OLDER_AHEAD_PX = 800;
// Conversations whose newest page this page remembers, to show at once when the person goes back.
const REMEMBERED_SESSIONS = 20;
// Frames that mean a conversation's stored messages changed: its remembered page is not shown.
const CHANGING_FRAMES = ["response", "stream_start", "stream_end", "multi_message", "review", "error",
  "voice_final", "voice_transcript", "history_changed"];

export function mount(root, app) {
  const {api, t} = app;
  const state = {
    sessions: [], current: null, turns: new Map(), pending: new Map(), shownIds: new Set(),
    unread: new Set(), attachments: [], searching: false, creating: null,
    sessionBases: new Map(),   // session id -> its own knowledge base's id (attached documents)
    // Replies streaming in the open session (turn keys), and an edit sent, waiting for its history_changed.
    streaming: new Set(), awaitingEdit: null,
    // The stored history shown: the oldest message's id, whether older ones exist, a page underway.
    oldestId: null, hasOlder: false, loadingOlder: null, historyIds: new Set(),
    // Session id → the last answer for its newest page, while no frame said it changed since.
    remembered: new Map(),
  };
  // Each bubble's text as sent or stored (what Copy copies and Edit starts from).
  const texts = new WeakMap();

  // ------------------------------------------------------------------ layout
  const newButton = h("button", {type: "button", class: "primary", "data-i18n": "sessions.new"}, t("sessions.new"));
  const search = h("input", {type: "search", class: "search", "data-i18n-placeholder": "sessions.search",
    placeholder: t("sessions.search"), "data-i18n-label": "sessions.search_label", "aria-label": t("sessions.search_label")});
  const list = h("ul", {class: "session-list", "aria-label": t("sessions.label")});
  const results = h("div", {class: "search-results", hidden: true});
  const drawer = h("aside", {id: "drawer", class: "drawer", "aria-label": t("sessions.label")},
    h("div", {class: "drawer-actions"}, newButton), h("form", {role: "search", class: "search-form"}, search),
    results, list);
  const title = h("h2", {class: "session-title"});
  const rename = h("button", {type: "button", class: "quiet", "data-i18n": "chat.rename"}, t("chat.rename"));
  const remove = h("button", {type: "button", class: "quiet danger", "data-i18n": "chat.delete"}, t("chat.delete"));
  const exportSelect = h("select", {class: "quiet", "data-i18n-label": "chat.export_label", "aria-label": t("chat.export_label")},
    h("option", {value: "", "data-i18n": "chat.export"}, t("chat.export")),
    h("option", {value: "json", "data-i18n": "chat.export_json"}, t("chat.export_json")),
    h("option", {value: "markdown", "data-i18n": "chat.export_markdown"}, t("chat.export_markdown")),
    h("option", {value: "txt", "data-i18n": "chat.export_txt"}, t("chat.export_txt")));
  const history = h("div", {class: "history"});
  const live = h("div", {class: "live"});
  const older = h("button", {type: "button", class: "quiet older", hidden: true, "data-i18n": "chat.older"}, t("chat.older"));
  const empty = h("p", {class: "empty", "data-i18n": "chat.empty"}, t("chat.empty"));
  const messages = h("div", {class: "messages", role: "log", "aria-live": "polite", tabindex: "0"},
    older, empty, history, live);
  const fileInput = h("input", {type: "file", hidden: true, multiple: true,
    accept: `image/*,application/pdf,text/plain,text/markdown,${DOCUMENT_EXTENSIONS.join(",")}`});
  const attach = h("button", {type: "button", class: "icon attach", "data-i18n-label": "chat.attach",
    "aria-label": t("chat.attach"), title: t("chat.attach")});
  const tray = h("div", {class: "attachments", hidden: true});
  const attachNote = h("p", {class: "attach-note", role: "alert", hidden: true});
  const input = h("textarea", {rows: "1", class: "input", "data-i18n-placeholder": "chat.placeholder",
    placeholder: t("chat.placeholder"), "data-i18n-label": "chat.input_label", "aria-label": t("chat.input_label")});
  const send = h("button", {type: "submit", class: "primary send", "data-i18n": "chat.send"}, t("chat.send"));
  // While a reply streams: stops it (the reply so far stays).
  const stop = h("button", {type: "button", class: "stop", hidden: true, "data-i18n": "chat.stop"}, t("chat.stop"));
  const speaker = new ReplySpeaker(api);
  const recorder = new VoiceRecorder(app, () => (speaker.enabled ? "voice_msg" : "text"));
  const talk = h("button", {type: "button", class: "icon talk", "data-i18n-label": "chat.talk", "aria-label": t("chat.talk"),
    title: t("chat.talk"), "aria-pressed": "false", hidden: !voiceSupported()});
  const speak = h("button", {type: "button", class: "icon speak", "data-i18n-label": "chat.speak", "aria-label": t("chat.speak"),
    title: t("chat.speak"), "aria-pressed": String(speaker.enabled)});
  const interim = h("p", {class: "voice-interim", role: "status", hidden: true});
  const composer = h("form", {class: "composer"}, attachNote, tray, interim,
    h("div", {class: "composer-row"}, attach, fileInput, talk, input, speak, stop, send));
  const conversation = h("div", {class: "conversation"},
    h("header", {class: "conversation-header"}, title, h("div", {class: "session-actions"}, rename, exportSelect, remove)),
    messages, composer);
  append(root, [drawer, conversation]);

  const closeDrawer = () => {
    document.body.classList.remove("drawer-open");
    document.querySelector('[data-action="toggle-drawer"]')?.setAttribute("aria-expanded", "false");
  };

  // ------------------------------------------------------------------ sessions
  // The gateway titles a session it was not given a title for in the language asked ("New chat",
  // "新对话": docs/sessions.md): shown in the interface's language now, like a session with no title.
  const SERVER_DEFAULT_TITLES = ["新对话", "New chat"];
  const untitled = (session) => !session || !session.title || SERVER_DEFAULT_TITLES.includes(session.title);
  function sessionTitle(session) {
    return untitled(session) ? t("sessions.untitled") : session.title;
  }

  function renderList() {
    clear(list);
    if (!state.sessions.length) list.append(h("li", {class: "muted"}, t("sessions.empty")));
    for (const session of state.sessions) {
      const button = h("button", {type: "button", class: "session", "aria-current": session.id === state.current ? "true" : "false",
        onclick: () => { select(session.id); closeDrawer(); }},
        h("span", {class: "session-name"}, sessionTitle(session)),
        state.unread.has(session.id) ? h("span", {class: "dot", "aria-label": "new"}, "●") : null,
        h("time", {class: "session-time"}, formatTime(session.updated_at, app.language)));
      list.append(h("li", {}, button));
    }
    const session = state.sessions.find((item) => item.id === state.current);
    title.textContent = sessionTitle(session);
  }

  async function loadSessions() {
    const answer = await api.get("/sessions");
    state.sessions = answer.sessions || [];
    renderList();
  }

  async function createSession() {
    // The message box gets the focus unless the person moved it meanwhile (into the search box,
    // say): what they type there must stay there.
    const focused = document.activeElement;
    // A message sent before the new conversation exists waits for it (else it would go to the
    // one being left, and vanish from the view as the new one opens).
    let shown = null;
    const made = api.send("POST", "/sessions", {}).then((session) => {
      state.sessions.unshift(session);
      shown = select(session.id);
    });
    const creating = made.catch(() => undefined);
    state.creating = creating;
    try {
      await made;
      await shown;
    } finally {
      if (state.creating === creating) state.creating = null;
    }
    if (document.activeElement === focused || document.activeElement === document.body) input.focus();
  }

  async function select(id) {
    state.current = id;
    state.unread.delete(id);
    localStorage.setItem("assistant.session", id);
    state.turns.clear();
    state.pending.clear();
    state.streaming.clear();
    state.awaitingEdit = null;
    updateBusy();
    // What the page showed goes with it: a message shown before must be shown again here.
    state.shownIds.clear();
    clear(history);
    clear(live);
    renderList();
    // The history's request goes out first: the socket's reconnection keeps the gateway busy too.
    const loading = loadHistory(id);
    app.socket.open(id);
    await loading;
  }

  async function historyPage(id, query) {
    try {
      return await api.get(`/sessions/${encodeURIComponent(id)}/messages`, {limit: HISTORY_PAGE, ...query});
    } catch (error) {
      if (!(error instanceof ApiError && error.status === 404)) app.toast(error.message, {level: "error"});
      return null;
    }
  }

  // A reply is stored as one message per review part: consecutive parts share one bubble.
  function renderStored(items) {
    const fragment = document.createDocumentFragment();
    let previous = null;
    for (const message of items) {
      if (state.shownIds.has(message.id)) continue;
      state.shownIds.add(message.id);
      state.historyIds.add(message.id);
      const reply = message.role === "assistant" || message.role === "action";
      if (reply && previous) {
        previous.querySelector("time.stamp").before(renderPart(message.role === "action" ? "action" : message.msg_type,
          message.content, message.metadata || {}, t));
        texts.set(previous, `${texts.get(previous) || ""}\n\n${message.content}`);
        continue;
      }
      const element = storedBubble(message);
      previous = reply ? element : null;
      if (reply) element.classList.replace("action", "assistant");
      fragment.append(element);
    }
    return {fragment, endsInReply: Boolean(previous)};
  }

  function resetHistory() {
    for (const messageId of state.historyIds) state.shownIds.delete(messageId);
    state.historyIds.clear();
    clear(history);
    state.oldestId = null;
    state.hasOlder = false;
    state.loadingOlder = null;
    older.hidden = true;
    older.removeAttribute("aria-busy");
  }

  function showNewest(answer) {
    const page = answer.messages || [];
    history.append(renderStored(page).fragment);
    updateActions();
    state.oldestId = page.length ? page[0].id : null;
    state.hasOlder = Boolean(answer.has_more && page.length);
    updateEmpty();
    // At once rather than next frame: the newest page is painted already scrolled to its end.
    messages.scrollTop = messages.scrollHeight;
    watchTop();
  }

  // Going back shows the remembered newest page at once; the request still goes out, and what
  // it brings replaces that page when anything differs (an edit, a message from elsewhere).
  async function loadHistory(id) {
    resetHistory();
    const remembered = state.remembered.get(id);
    if (remembered) showNewest(remembered);
    const answer = await historyPage(id, {latest: true, limit: NEWEST_PAGE});
    if (state.current !== id) return;
    if (!answer) {
      if (!remembered) showNewest({messages: []});
      return;
    }
    state.remembered.delete(id);
    state.remembered.set(id, answer);
    if (state.remembered.size > REMEMBERED_SESSIONS) state.remembered.delete(state.remembered.keys().next().value);
    if (remembered && JSON.stringify(remembered.messages) === JSON.stringify(answer.messages)) return;
    if (remembered) resetHistory();
    showNewest(answer);
  }

  // The next older page, prepended with what the person reads kept where it is on the screen.
  function loadOlder() {
    if (!state.hasOlder || state.loadingOlder) return state.loadingOlder;
    const id = state.current;
    const before = state.oldestId;
    older.setAttribute("aria-busy", "true");
    state.loadingOlder = (async () => {
      const answer = await historyPage(id, {before_id: before});
      if (state.current !== id || state.oldestId !== before) return;
      older.removeAttribute("aria-busy");
      state.loadingOlder = null;
      if (!answer) return;   // said in a toast; the button stays to try again
      const page = answer.messages || [];
      const first = history.firstElementChild;
      const anchor = (first && first.firstElementChild) || first;
      const top = anchor ? anchor.getBoundingClientRect().top : 0;
      const {fragment, endsInReply} = renderStored(page);
      const last = fragment.lastElementChild;
      // A reply cut by the page boundary is one bubble again: the newer part's pieces join the older.
      if (endsInReply && last && first && first.matches("article.message.assistant")) {
        const stamp = last.querySelector("time.stamp");
        for (const piece of [...first.children]) if (!piece.matches("time.stamp")) stamp.before(piece);
        first.remove();
      }
      history.prepend(fragment);
      updateActions();
      if (anchor) messages.scrollTop += anchor.getBoundingClientRect().top - top;
      if (page.length) state.oldestId = page[0].id;
      state.hasOlder = Boolean(answer.has_more && page.length);
      updateEmpty();
      watchTop();
    })();
    return state.loadingOlder;
  }

  // The "older" button at the top is the sentinel: near the view, the next page loads. Watching
  // it afresh after each page asks again whether it is still near (a short page leaves it so).
  const topWatcher = "IntersectionObserver" in window
    ? new IntersectionObserver((entries) => { if (entries.some((entry) => entry.isIntersecting)) loadOlder(); },
      {root: messages, rootMargin: `${OLDER_AHEAD_PX}px 0px 0px 0px`})
    : null;
  function watchTop() {
    older.hidden = !state.hasOlder;
    if (!topWatcher) return;
    topWatcher.unobserve(older);
    if (state.hasOlder) topWatcher.observe(older);
  }
  older.addEventListener("click", () => { loadOlder(); });

  function updateEmpty() { empty.hidden = Boolean(history.firstChild || live.firstChild); }

  function touch(sessionId) {
    const session = state.sessions.find((item) => item.id === sessionId);
    if (session) {
      session.updated_at = Date.now();
      state.sessions = [session, ...state.sessions.filter((item) => item !== session)];
    }
    // Unknown here, or not titled yet: the gateway titles a session from its first message.
    if (untitled(session)) loadSessions().catch(() => {});
    renderList();
  }

  // ------------------------------------------------------------------ bubbles
  function scrollDown(force = false) {
    const near = messages.scrollHeight - messages.scrollTop - messages.clientHeight < 160;
    if (force || near) requestAnimationFrame(() => { messages.scrollTop = messages.scrollHeight; });
  }

  // The time goes above the bubble's actions (which show on hover), as in a stored message's bubble.
  function stamp(element, millis, ...extra) {
    const actions = element.querySelector(":scope > .message-actions");
    const parts = [h("time", {class: "stamp"}, formatTime(millis || Date.now(), app.language)), ...extra];
    if (actions) actions.before(...parts); else element.append(...parts);
  }

  function bubble(role, ...children) {
    const label = role === "user" ? t("chat.you") : role === "assistant" || role === "action" ? t("chat.assistant") : "";
    const element = h("article", {class: `message ${role}`, "aria-label": label}, ...children);
    element.append(actionsFor(element, role));
    return element;
  }

  // ------------------------------------------------------------------ a bubble's actions
  // Copy on every bubble; Edit on the person's own stored messages; Regenerate on the last
  // reply. Edit and Regenerate are hidden while a reply streams (the gateway refuses them then).
  function actionsFor(element, role) {
    const button = (key, onclick, extra = "") => h("button", {type: "button", class: `quiet action-${key}${extra}`,
      "data-i18n": `chat.${key}`, onclick: (event) => { event.stopPropagation(); onclick(event.currentTarget); }}, t(`chat.${key}`));
    const row = h("div", {class: "message-actions"});
    row.append(button("copy", (target) => copyText(element, target)));
    if (role === "user") row.append(button("edit", () => startEditing(element)));
    else row.append(button("regenerate", regenerate));
    return row;
  }

  function textOf(element) {
    const turn = [...state.turns.values()].find((item) => item.element === element);
    return (turn ? turn.text : texts.get(element)) || "";
  }

  async function copyText(element, target) {
    try {
      await navigator.clipboard.writeText(textOf(element));
      target.textContent = t("chat.copied");
      setTimeout(() => { target.textContent = t("chat.copy"); }, 1500);
    } catch (error) {
      app.toast(t("chat.copy_failed", {error: error.message || error.name}), {level: "error"});
    }
  }

  function regenerate() {
    if (state.streaming.size) return;
    app.socket.send({type: "regenerate", session_id: state.current});
  }

  function startEditing(element) {
    if (state.streaming.size || !element.dataset.id || element.querySelector(".editor")) return;
    const field = h("textarea", {class: "input", rows: "3", "data-i18n-label": "chat.edit_label", "aria-label": t("chat.edit_label")});
    field.value = texts.get(element) || "";
    const editor = h("form", {class: "editor"}, field, h("div", {class: "editor-actions"},
      h("button", {type: "button", class: "quiet", "data-i18n": "chat.cancel", onclick: () => editor.remove()}, t("chat.cancel")),
      h("button", {type: "submit", class: "primary", "data-i18n": "chat.send"}, t("chat.send"))));
    editor.addEventListener("submit", (event) => {
      event.preventDefault();
      const text = field.value.trim();
      if (!text || state.streaming.size) return;
      const clientMsgId = newMessageId();
      state.awaitingEdit = {text, clientMsgId};
      app.socket.send({type: "edit", session_id: state.current, message_id: Number(element.dataset.id), content: text,
        client_msg_id: clientMsgId});
      editor.remove();
    });
    field.addEventListener("keydown", (event) => {
      if (event.key === "Escape") editor.remove();
      else if (event.key === "Enter" && !event.shiftKey && !event.isComposing) { event.preventDefault(); editor.requestSubmit(); }
    });
    element.classList.add("editing");
    element.append(editor);
    field.focus();
  }

  // The stored history lost its messages from `fromId` on: every bubble after the last one
  // stored before it goes (bubbles of this page learn their ids at stream_end).
  function dropFrom(fromId) {
    const items = [...history.children, ...live.children];
    let keep = -1;
    items.forEach((element, index) => { if (element.dataset.id && Number(element.dataset.id) < fromId) keep = index; });
    for (const element of items.slice(keep + 1)) element.remove();
    for (const [key, turn] of state.turns) if (!turn.element.isConnected) state.turns.delete(key);
    updateEmpty();
  }

  function updateActions() {
    const busy = state.streaming.size > 0;
    const replies = messages.querySelectorAll(".message.assistant");
    replies.forEach((element, index) => {
      const button = element.querySelector(".action-regenerate");
      if (button) button.hidden = busy || index !== replies.length - 1 || element.classList.contains("streaming");
    });
    for (const button of messages.querySelectorAll(".message.user .action-edit")) {
      button.hidden = busy || !button.closest(".message").dataset.id;
    }
  }

  function updateBusy() {
    stop.hidden = state.streaming.size === 0;
    updateActions();
  }

  stop.addEventListener("click", () => {
    for (const key of state.streaming) app.socket.send({type: "stop", session_id: state.current, turn_id: key});
  });

  function newMessageId() {
    return crypto.randomUUID ? crypto.randomUUID() : `m-${Date.now()}-${Math.random().toString(36).slice(2)}`;
  }

  function storedBubble(message) {
    if (message.role === "system") return h("p", {class: "notice info"}, message.content);
    const role = message.role === "user" ? "user" : message.role === "action" ? "action" : "assistant";
    const type = message.role === "action" ? "action" : message.msg_type;
    const body = role === "user" ? userBody(message.content, (message.metadata || {}).attachments)
      : renderPart(type, message.content, message.metadata || {}, t);
    const element = bubble(role, body, h("time", {class: "stamp"}, formatTime(message.created_at, app.language)));
    element.dataset.id = message.id;
    texts.set(element, message.content);
    return element;
  }

  function userBody(text, attachments) {
    const body = h("div", {class: "part chat"}, text || "");
    const pictures = (attachments || []).filter((item) => item && item.type !== "document" && (item.thumbnail_url || item.preview));
    const documents = (attachments || []).filter((item) => item && item.type === "document");
    if (!pictures.length && !documents.length) return body;
    const strip = h("div", {class: "thumbs"});
    for (const item of documents) strip.append(h("span", {class: "doc-chip"}, `📄 ${item.filename || t("chat.document")}`));
    for (const item of pictures) {
      const image = h("img", {class: "thumb", alt: item.filename || "image"});
      if (item.preview) image.src = item.preview;
      else api.blobUrl(item.thumbnail_url).then((url) => { image.src = url; }).catch(() => {});
      strip.append(image);
    }
    return h("div", {}, strip, text ? body : null);
  }

  // A notice's web addresses (the console's Model Config page, say) are links.
  function withLinks(text) {
    return String(text).split(/(https?:\/\/[^\s<>"“”]+)/).map((piece, index) =>
      index % 2 ? h("a", {href: piece, target: "_blank", rel: "noopener noreferrer"}, piece) : piece);
  }

  function notice(level, text, action) {
    const element = h("p", {class: `notice ${level}`, role: level === "error" ? "alert" : "status"}, withLinks(text));
    if (action === "retry" && state.lastSent) {
      element.append(" ", h("button", {type: "button", class: "link", onclick: () => sendText(state.lastSent.content, state.lastSent.attachments)},
        t("chat.retry")));
    }
    if (action === "confirm") {
      // A tool call waits for the person's yes (docs/ai-core.md, "Confirmation"): the next message
      // decides, so the buttons send the words the assistant reads as yes and no.
      const answer = (words) => {
        for (const button of element.querySelectorAll("button")) button.disabled = true;
        sendText(t(words), []);
      };
      element.classList.add("confirm");
      element.append(" ",
        h("button", {type: "button", class: "primary", "data-action": "confirm", onclick: () => answer("chat.confirm_yes")}, t("chat.confirm")),
        " ",
        h("button", {type: "button", class: "quiet", "data-action": "cancel", onclick: () => answer("chat.confirm_no")}, t("chat.confirm_cancel")));
    }
    live.append(element);
    updateEmpty();
    scrollDown();
  }

  // ------------------------------------------------------------------ a reply
  function turnOf(frame) {
    const key = frame.turn_id || frame.message_id || "current";
    let turn = state.turns.get(key);
    if (!turn) {
      const body = h("div", {class: "body"});
      const extras = h("div", {class: "extras"});
      const element = bubble("assistant", extras, body);
      element.classList.add("streaming");
      element.dataset.turn = key;
      turn = {key, element, body, extras, text: "", tools: new Map(), toolBox: null, thinking: null, done: false, frame: 0};
      state.turns.set(key, turn);
      live.append(element);
      updateEmpty();
    }
    return turn;
  }

  function paint(turn) {
    if (turn.frame) return;
    turn.frame = requestAnimationFrame(() => {
      turn.frame = 0;
      if (turn.reviewed) return;
      clear(turn.body).append(renderStreaming(turn.text, t));
      scrollDown();
    });
  }

  function thinkingOf(turn) {
    if (!turn.thinking) {
      const text = h("div", {class: "thinking-text"});
      const summary = h("summary", {}, t("chat.thinking"));
      const details = h("details", {class: "thinking"}, summary, text);
      turn.extras.append(details);
      turn.thinking = {details, summary, text};
    }
    return turn.thinking;
  }

  function toolsOf(turn) {
    if (!turn.toolBox) {
      const summary = h("summary", {});
      const rows = h("div", {class: "tool-rows"});
      const details = h("details", {class: "tools", open: true}, summary, rows);
      turn.extras.append(details);
      turn.toolBox = {details, summary, rows};
    }
    return turn.toolBox;
  }

  // A session was renamed, on another device or by the assistant after its first exchange.
  function retitled(frame) {
    const session = state.sessions.find((item) => item.id === frame.session_id);
    if (!session) { loadSessions().catch(() => {}); return; }
    session.title = frame.title;
    renderList();
  }

  function onFrame(frame) {
    if (frame.type === "session_updated") { retitled(frame); return; }
    if (CHANGING_FRAMES.includes(frame.type)) state.remembered.delete(frame.session_id || state.current);
    if (frame.session_id && frame.session_id !== state.current) {
      if (["stream_end", "response", "multi_message"].includes(frame.type)) {
        state.unread.add(frame.session_id);
        touch(frame.session_id);
      }
      return;
    }
    switch (frame.type) {
      case "response": {
        if (frame.message_id && state.shownIds.has(Number(frame.message_id))) return;
        if (frame.message_id) state.shownIds.add(Number(frame.message_id));
        let element;
        if (frame.role === "user") {
          const device = frame.client_info && frame.client_info.device_name;
          element = bubble("user", userBody(frame.content || frame.text, frame.attachments));
          stamp(element, frame.timestamp, ...(device ? [h("span", {class: "stamp origin"}, t("chat.from_other_device", {device}))] : []));
        } else {
          const type = frame.role === "action" ? "action" : frame.msg_type;
          element = bubble(frame.role === "action" ? "action" : "assistant",
            renderPart(type, frame.content || frame.text, frame.metadata || {}, t));
        }
        if (frame.message_id) element.dataset.id = frame.message_id;
        texts.set(element, frame.content || frame.text || "");
        live.append(element);
        updateActions();
        updateEmpty();
        scrollDown();
        touch(state.current);
        break;
      }
      case "stream_start": {
        const turn = turnOf(frame);
        // The turn that starts is the oldest message still waiting: it is not queued any more.
        const [first] = state.pending.values();
        if (first) {
          first.element.classList.remove("pending");
          if (first.queued) { first.queued.remove(); first.queued = null; }
          state.pending.delete([...state.pending.keys()][0]);
          turn.userElement = first.element;
        }
        state.streaming.add(turn.key);
        updateBusy();
        scrollDown();
        break;
      }
      case "history_changed": {
        dropFrom(Number(frame.from_message_id));
        // This page's edit: its new message waits for its reply like one sent from the composer.
        const edit = state.awaitingEdit;
        if (edit && frame.reason === "edit") {
          state.awaitingEdit = null;
          showPending(edit.text, [], edit.clientMsgId);
        }
        updateActions();
        break;
      }
      case "stream_chunk": {
        const turn = turnOf(frame);
        turn.text += frame.content || "";
        paint(turn);
        break;
      }
      case "thinking":
      case "background_thinking": {
        if (frame.type === "background_thinking" && !frame.turn_id) return;
        const turn = turnOf(frame);
        const thinking = thinkingOf(turn);
        const more = frame.thinking_content ?? frame.content ?? "";
        if (more) thinking.text.textContent += more;
        if (frame.thinking_status === "done" || frame.thinking_status === "completed") thinking.summary.textContent = t("chat.thinking_done");
        break;
      }
      case "tool_progress": {
        // The line says what is being done in the person's words (`message`); the tool's own
        // name is for programs and only keys the row. Once the reply comes, the lines fold away.
        const turn = turnOf(frame);
        const progress = frame.tool_progress || {};
        const status = progress.status || "running";
        const words = progress.message || t(`tool.${status}`);
        const box = toolsOf(turn);
        const key = progress.tool_name || "tool";
        let row = turn.tools.get(key);
        if (!row) {
          const bar = h("progress", {max: "100"});
          const label = h("span", {class: "tool-label"});
          row = {bar, label, element: h("div", {class: "tool"}, label, bar)};
          turn.tools.set(key, row);
          box.rows.append(row.element);
        }
        row.element.dataset.status = status;
        row.bar.setAttribute("aria-label", words);
        const percent = typeof progress.progress === "number" ? (progress.progress <= 1 ? progress.progress * 100 : progress.progress) : null;
        if (status === "completed") row.bar.value = 100;
        else if (percent !== null) row.bar.value = percent;
        else row.bar.removeAttribute("value");
        row.label.textContent = words;
        box.summary.textContent = words;
        box.details.dataset.status = status;
        break;
      }
      case "system_info": {
        const info = frame.system_info || {};
        notice(info.level || "info", info.message || frame.content || "", info.action);
        break;
      }
      case "review": {
        const turn = turnOf(frame);
        turn.reviewed = true;
        const parts = frame.review_messages || [];
        clear(turn.body);
        for (const part of parts) turn.body.append(renderPart(part.type, part.content, part.metadata || {}, t));
        scrollDown();
        break;
      }
      case "stream_segments":
        speaker.add(frame.segments);
        break;
      case "voice_interim":
        if (recorder.recording || frame.text) {
          interim.hidden = false;
          interim.textContent = frame.text || t("chat.listening");
        }
        break;
      case "voice_final":
      case "voice_transcript": {
        interim.hidden = true;
        interim.textContent = "";
        const text = (frame.text || "").trim();
        if (!text) { app.toast(t("chat.no_speech")); break; }
        const element = bubble("user", userBody(text, []));
        stamp(element, frame.timestamp);
        texts.set(element, text);
        element.classList.add("pending", "spoken");
        live.append(element);
        state.pending.set(frame.message_id || frame.client_msg_id || `voice-${Date.now()}`, {element, queued: null});
        updateEmpty();
        scrollDown(true);
        break;
      }
      case "stream_end": {
        const turn = turnOf(frame);
        turn.done = true;
        turn.element.classList.remove("streaming");
        if (turn.thinking) turn.thinking.summary.textContent = t("chat.thinking_done");
        if (turn.toolBox) turn.toolBox.details.open = false;  // the reply says the rest
        if (!turn.reviewed) {
          turn.text = frame.text ?? turn.text;
          if (turn.frame) cancelAnimationFrame(turn.frame);
          turn.frame = 0;
          clear(turn.body).append(turn.text ? renderMarkdown(turn.text, t) : "");
        }
        const ending = {error: "chat.stopped", stopped: "chat.stopped_by_you"}[frame.finish_reason];
        const actions = turn.element.querySelector(":scope > .message-actions");
        if (ending) actions.before(h("p", {class: "stopped"}, t(ending)));
        for (const id of frame.stored_message_ids || []) state.shownIds.add(Number(id));
        // Their stored ids: what Edit names, and where a history_changed cuts.
        if ((frame.stored_message_ids || []).length) turn.element.dataset.id = frame.stored_message_ids[0];
        if (turn.userElement && frame.user_message_id) turn.userElement.dataset.id = frame.user_message_id;
        texts.set(turn.element, turn.text);
        state.streaming.delete(turn.key);
        updateBusy();
        stamp(turn.element, frame.timestamp);
        touch(state.current);
        scrollDown();
        break;
      }
      case "multi_message": {
        for (const item of (frame.multi_message || {}).messages || []) {
          if (item.message_id && state.shownIds.has(Number(item.message_id))) continue;
          if (item.message_id) state.shownIds.add(Number(item.message_id));
          if (item.msg_type === "system_info") { notice("info", item.content); continue; }
          const element = bubble(item.msg_type === "action" ? "action" : "assistant", renderPart(item.msg_type, item.content, {}, t));
          if (item.message_id) element.dataset.id = item.message_id;
          texts.set(element, item.content);
          live.append(element);
        }
        updateActions();
        updateEmpty();
        scrollDown();
        touch(state.current);
        break;
      }
      case "queued": {
        const item = state.pending.get(frame.client_msg_id);
        if (item) {
          item.queued = h("span", {class: "queued"}, t("chat.queued", {position: frame.position ?? "?"}));
          item.element.append(item.queued);
        }
        break;
      }
      case "error":
        if (state.awaitingEdit && frame.client_msg_id === state.awaitingEdit.clientMsgId) state.awaitingEdit = null;
        if (frame.errorType === "admin_only") notice("error", t("chat.not_allowed"));
        else if (frame.errorType === "turn_running") notice("error", t("chat.busy"));
        else notice("error", t("chat.error", {error: frame.error || "?"}), frame.errorType ? "retry" : undefined);
        break;
      default:
        break;
    }
  }

  // ------------------------------------------------------------------ sending
  function showPending(text, attachments, clientMsgId) {
    const element = bubble("user", userBody(text, attachments));
    stamp(element, Date.now());
    texts.set(element, text);
    element.classList.add("pending");
    live.append(element);
    state.pending.set(clientMsgId, {element, queued: null});
    updateActions();
    updateEmpty();
    scrollDown(true);
  }

  function sendText(text, attachments) {
    const clientMsgId = newMessageId();
    showPending(text, attachments, clientMsgId);
    state.lastSent = {content: text, attachments};
    app.socket.send({type: "message", mode: speaker.enabled ? "voice_msg" : "text", content: text, client_msg_id: clientMsgId,
      attachments: attachments.map(({preview, status, document_id, ...rest}) => rest)});
    touch(state.current);
  }

  composer.addEventListener("submit", async (event) => {
    event.preventDefault();
    const text = input.value.trim();
    const ready = state.attachments.filter((item) => item.file_id);
    if (!text && !ready.length) return;
    // Still uploading, or a document not yet in the conversation's knowledge base.
    if (state.attachments.some((item) => !item.file_id || (item.type === "document" && !item.document_id))) return;
    const attachments = ready.map((item) => ({...item}));
    input.value = "";
    state.attachments = [];
    renderTray();
    autosize();
    if (state.creating) await state.creating;
    sendText(text, attachments);
  });

  input.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      composer.requestSubmit();
    }
  });
  const autosize = () => { input.style.height = "auto"; input.style.height = `${Math.min(input.scrollHeight, 200)}px`; };
  input.addEventListener("input", autosize);

  // ------------------------------------------------------------------ attachments
  function renderTray() {
    clear(tray);
    tray.hidden = state.attachments.length === 0;
    for (const item of state.attachments) {
      const removeButton = h("button", {type: "button", class: "icon remove", "aria-label": t("chat.remove_attachment"),
        onclick: () => { state.attachments = state.attachments.filter((other) => other !== item); renderTray(); }}, "×");
      if (item.type === "document") {
        // "report.pdf — reading…", then "report.pdf — ready" once the knowledge base indexed it.
        tray.append(h("figure", {class: `attachment document ${item.status}`, "data-status": item.status},
          h("figcaption", {}, `${item.filename} — ${t(`chat.document_${item.status}`)}`), removeButton));
        continue;
      }
      const image = h("img", {class: "thumb", alt: item.filename, src: item.preview});
      tray.append(h("figure", {class: `attachment${item.file_id ? "" : " uploading"}`}, image, removeButton,
        item.file_id ? null : h("figcaption", {}, t("chat.uploading"))));
    }
  }

  function showAttachNote(text) {
    attachNote.textContent = text || "";
    attachNote.hidden = !text;
    // A .notice.error only while it says something: the page counts those as errors shown.
    attachNote.classList.toggle("notice", Boolean(text));
    attachNote.classList.toggle("error", Boolean(text));
  }

  const failureText = (error) => [error.message, error.hint].filter(Boolean).join(" ");

  async function addFiles(files) {
    showAttachNote("");
    // Anything but an image or a readable document is refused here, before any upload.
    const refused = files.filter((file) => !file.type.startsWith("image/") && !isDocument(file));
    if (refused.length) {
      showAttachNote(t("chat.unsupported_file", {names: refused.map((file) => file.name || "?").join(", ")}));
    }
    for (const file of files) {
      if (isDocument(file)) addDocument(file);
      if (!file.type.startsWith("image/")) continue;
      const item = {type: "image", filename: file.name || "image.png", size: file.size, preview: URL.createObjectURL(file)};
      state.attachments.push(item);
      renderTray();
      try {
        const stored = await api.upload(file);
        Object.assign(item, {file_id: stored.id, filename: stored.filename, thumbnail_url: stored.thumbnail_url});
        if (stored.thumbnail_url) {
          try { item.preview = await api.blobUrl(stored.thumbnail_url); } catch (error) { /* keep the local one */ }
        }
      } catch (error) {
        state.attachments = state.attachments.filter((other) => other !== item);
        app.toast(t("chat.upload_failed", {error: error.message}), {level: "error"});
      }
      renderTray();
    }
  }

  // The conversation's own knowledge base, created on first use (one per session: the
  // knowledge plugin answers the existing one to a second POST naming the session).
  async function sessionBase(sessionId) {
    if (state.sessionBases.has(sessionId)) return state.sessionBases.get(sessionId);
    const session = state.sessions.find((item) => item.id === sessionId);
    const base = await api.send("POST", "/knowledge/bases", {
      name: sessionTitle(session).slice(0, KB_NAME_MAX), session_id: sessionId,
      description: t("chat.session_base_description")});
    state.sessionBases.set(sessionId, base.id);
    return base.id;
  }

  // Upload, add to the conversation's base, then follow its indexing: the chip says
  // "uploading…", "reading…", "ready". The knowledge plugin's refusals (too large, too complex,
  // unreadable) are shown as it words them.
  async function addDocument(file) {
    const sessionId = state.current;
    const item = {type: "document", filename: file.name || "document", size: file.size, status: "uploading"};
    state.attachments.push(item);
    renderTray();
    try {
      const stored = await api.upload(file);
      Object.assign(item, {file_id: stored.id, filename: stored.filename || item.filename, status: "reading"});
      renderTray();
      item.kb_id = await sessionBase(sessionId);
      const document = await api.send("POST", `/knowledge/bases/${encodeURIComponent(item.kb_id)}/documents`, {
        title: item.filename, source_type: "file", file_id: item.file_id});
      item.document_id = document.id;
      await followIndexing(item, document);
    } catch (error) {
      state.attachments = state.attachments.filter((other) => other !== item);
      showAttachNote(t("chat.document_failed", {name: item.filename, error: failureText(error)}));
    }
    renderTray();
  }

  async function followIndexing(item, document) {
    let current = document;
    while (current.index_status === "pending" || current.index_status === "indexing") {
      item.status = "reading";
      renderTray();
      await new Promise((resolve) => setTimeout(resolve, DOCUMENT_POLL_MS));
      if (!state.attachments.includes(item)) return;   // sent, or taken out of the tray
      current = (await api.get(`/knowledge/documents/${encodeURIComponent(item.document_id)}`)).document;
    }
    if (current.index_status === "failed") throw new Error(current.index_error || t("chat.document_index_failed"));
    item.status = "ready";
  }

  attach.addEventListener("click", () => fileInput.click());
  fileInput.addEventListener("change", () => { addFiles([...fileInput.files]); fileInput.value = ""; });
  input.addEventListener("paste", (event) => {
    const files = [...(event.clipboardData?.files || [])].filter((file) => file.type.startsWith("image/"));
    if (files.length) { event.preventDefault(); addFiles(files); }
  });

  // ------------------------------------------------------------------ voice
  async function startTalking() {
    if (recorder.recording) return;
    talk.setAttribute("aria-pressed", "true");
    interim.hidden = false;
    interim.textContent = t("chat.listening");
    try {
      await recorder.start();
    } catch (error) {
      talk.setAttribute("aria-pressed", "false");
      interim.hidden = true;
      app.toast(t("chat.mic_denied", {error: error.message || error.name}), {level: "error"});
    }
  }
  function stopTalking() {
    if (!recorder.recording) return;
    talk.setAttribute("aria-pressed", "false");
    recorder.stop();
  }
  talk.addEventListener("pointerdown", (event) => { event.preventDefault(); talk.setPointerCapture?.(event.pointerId); startTalking(); });
  for (const name of ["pointerup", "pointercancel", "lostpointercapture"]) talk.addEventListener(name, stopTalking);
  talk.addEventListener("keydown", (event) => {
    if ((event.key === " " || event.key === "Enter") && !event.repeat) { event.preventDefault(); startTalking(); }
  });
  talk.addEventListener("keyup", (event) => { if (event.key === " " || event.key === "Enter") stopTalking(); });
  talk.addEventListener("contextmenu", (event) => event.preventDefault());
  speak.addEventListener("click", () => speak.setAttribute("aria-pressed", String(speaker.toggle())));

  // ------------------------------------------------------------------ session actions
  newButton.addEventListener("click", () => createSession().catch((error) => app.toast(error.message, {level: "error"})));
  rename.addEventListener("click", async () => {
    const session = state.sessions.find((item) => item.id === state.current);
    const next = prompt(t("chat.rename_prompt"), sessionTitle(session));
    if (!next || !next.trim()) return;
    try {
      const updated = await api.send("PATCH", `/sessions/${encodeURIComponent(state.current)}`, {title: next.trim()});
      Object.assign(session, updated);
      renderList();
    } catch (error) { app.toast(error.message, {level: "error"}); }
  });
  remove.addEventListener("click", async () => {
    if (!confirm(t("chat.delete_confirm"))) return;
    try {
      await api.request("DELETE", `/sessions/${encodeURIComponent(state.current)}`);
      state.sessions = state.sessions.filter((item) => item.id !== state.current);
      if (state.sessions.length) await select(state.sessions[0].id); else await createSession();
    } catch (error) { app.toast(error.message, {level: "error"}); }
  });
  exportSelect.addEventListener("change", async () => {
    const format = exportSelect.value;
    exportSelect.value = "";
    if (!format) return;
    try {
      const response = await api.request("GET", `/sessions/${encodeURIComponent(state.current)}/export`, {query: {format}, raw: true});
      const disposition = response.headers.get("Content-Disposition") || "";
      const name = decodeURIComponent((disposition.match(/filename\*=UTF-8''([^;]+)/) || [])[1] || "")
        || `${state.current}.${format === "markdown" ? "md" : format}`;
      const url = URL.createObjectURL(await response.blob());
      const link = h("a", {href: url, download: name, hidden: true});
      document.body.append(link);
      link.click();
      link.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10000);
    } catch (error) { app.toast(error.message, {level: "error"}); }
  });

  let searchTimer = 0;
  search.addEventListener("input", () => {
    clearTimeout(searchTimer);
    searchTimer = setTimeout(runSearch, 250);
  });
  search.form.addEventListener("submit", (event) => { event.preventDefault(); runSearch(); });

  async function runSearch() {
    const query = search.value.trim();
    clear(results);
    results.hidden = !query;
    list.hidden = Boolean(query);
    if (!query) return;
    try {
      const answer = await api.get("/messages/search", {q: query, limit: 50});
      if (search.value.trim() !== query) return;
      results.append(h("p", {class: "muted"}, answer.total ? t("sessions.results", {count: answer.total}) : t("sessions.no_results")));
      const items = h("ul", {class: "session-list"});
      for (const hit of answer.results || []) {
        const snippet = hit.content.length > 140 ? `${hit.content.slice(0, 140)}…` : hit.content;
        items.append(h("li", {}, h("button", {type: "button", class: "session hit", onclick: () => {
          search.value = ""; results.hidden = true; list.hidden = false; select(hit.session_id); closeDrawer();
        }}, h("span", {class: "session-name"}, hit.session_title || t("sessions.untitled")),
        h("span", {class: "snippet"}, snippet))));
      }
      results.append(items);
    } catch (error) { app.toast(error.message, {level: "error"}); }
  }

  // ------------------------------------------------------------------ start
  const unsubscribe = app.socket.on("*", onFrame);
  const unlanguage = app.onLanguage(() => renderList());
  (async () => {
    try {
      await loadSessions();
      const saved = localStorage.getItem("assistant.session");
      const start = state.sessions.find((item) => item.id === saved) || state.sessions[0];
      if (start) await select(start.id); else await createSession();
    } catch (error) {
      app.toast(error.message, {level: "error"});
    }
  })();

  return {
    show() {
      speak.setAttribute("aria-pressed", String(speaker.enabled));  // Settings may have switched it
      input.focus();
    },
    unmount() { unsubscribe(); unlanguage(); recorder.stop(); speaker.stopAll(); topWatcher?.disconnect(); },
    speaker, recorder,
    translatesItself: true,
    // For tests and other panes: the open session.
    get sessionId() { return state.current; },
  };
}

export {codeBlock};
