// How each kind of message content becomes DOM: Markdown through marked, then DOMPurify (no
// script, no inline style, no event handlers), code blocks highlighted with their language and a
// copy button, action narration as plain styled text, chat as plain text.
import {marked} from "../vendor/marked.esm.js";
import DOMPurify from "../vendor/purify.es.mjs";
import {h} from "./dom.js";
import {highlightInto} from "./highlight.js";

marked.setOptions({gfm: true, breaks: true});

// Raw HTML in a reply is shown as the text it is, never parsed: a model has no business writing
// markup, and a tag that never becomes an element cannot run (DOMPurify below is the second wall).
const escapeHtml = (text) => text.replace(/[&<>"']/g, (character) => `&#${character.charCodeAt(0)};`);
marked.use({renderer: {html(token) { return escapeHtml(token.text ?? token.raw ?? ""); }}});

const PURIFY = {
  RETURN_DOM_FRAGMENT: true,
  FORBID_TAGS: ["style", "form", "input", "button", "textarea", "select", "iframe", "object", "embed", "svg", "math"],
  FORBID_ATTR: ["style", "srcset"],
};

// Links open in a new tab without handing over this page; images from elsewhere (which the CSP
// would block) become links to them.
DOMPurify.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A") {
    node.setAttribute("target", "_blank");
    node.setAttribute("rel", "noopener noreferrer");
  }
});

export function renderMarkdown(text, t) {
  const fragment = DOMPurify.sanitize(marked.parse(text || ""), PURIFY);
  for (const image of fragment.querySelectorAll("img")) {
    const source = image.getAttribute("src") || "";
    const sameOrigin = source.startsWith("/") && !source.startsWith("//");
    if (!sameOrigin) {
      const link = h("a", {href: source, target: "_blank", rel: "noopener noreferrer"},
        image.getAttribute("alt") || source);
      image.replaceWith(link);
    }
  }
  for (const code of fragment.querySelectorAll("pre > code")) {
    const language = ((code.className || "").match(/language-([\w+#-]+)/) || [])[1] || "";
    code.parentElement.replaceWith(codeBlock(code.textContent.replace(/\n$/, ""), language, t));
  }
  return h("div", {class: "markdown"}, fragment);
}

export function codeBlock(source, language, t) {
  const code = h("code");
  highlightInto(code, source, language);
  const label = language && language !== "text" ? language : t("code.plain");
  const copy = h("button", {type: "button", class: "copy", "aria-label": t("code.copy_label", {language: label})},
    t("code.copy"));
  copy.addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(source);
      copy.textContent = t("code.copied");
    } catch (error) {
      // No clipboard (an insecure origin): select the code so the person can copy it.
      const range = document.createRange();
      range.selectNodeContents(code);
      getSelection().removeAllRanges();
      getSelection().addRange(range);
      copy.textContent = t("code.selected");
    }
    setTimeout(() => { copy.textContent = t("code.copy"); }, 1500);
  });
  return h("figure", {class: "code-block"},
    h("figcaption", {}, h("span", {class: "language"}, label), copy),
    h("pre", {}, code));
}

function plain(text, className) {
  return h("div", {class: className}, text || "");
}

// One review message, or one stored message, by its type.
export function renderPart(type, content, metadata, t) {
  switch (type) {
    case "action":
      return plain(content, "part action");
    case "code":
      return h("div", {class: "part"}, codeBlock(content || "", (metadata && metadata.language) || "", t));
    case "markdown":
      return h("div", {class: "part"}, renderMarkdown(content, t));
    case "search_result": {
      const part = h("div", {class: "part search-result"}, renderMarkdown(content, t));
      if (metadata && /^https?:\/\//.test(metadata.url || "")) {
        part.append(h("a", {class: "source", href: metadata.url, target: "_blank", rel: "noopener noreferrer"},
          metadata.url));
      }
      return part;
    }
    case "system_info":
      return plain(content, "part system-info");
    default:
      return plain(content, "part chat");
  }
}

// While a reply streams its type is not known yet: Markdown is the kindest guess, and the
// review that ends the reply replaces it with the parts the gateway classified.
export function renderStreaming(text, t) {
  return h("div", {class: "part streaming"}, renderMarkdown(text, t));
}
