// A minimal syntax highlighter: comments, strings, numbers and keywords for the common languages,
// built as DOM nodes (text nodes and spans), never as HTML text.

const KEYWORDS = {
  js: "async await break case catch class const continue default delete do else export extends false finally for from function if import in instanceof let new null of return static super switch this throw true try typeof undefined var void while yield",
  python: "and as assert async await break class continue def del elif else except False finally for from global if import in is lambda None nonlocal not or pass raise return self True try while with yield",
  go: "break case chan const continue default defer else fallthrough false for func go goto if import interface map nil package range return select struct switch true type var",
  rust: "as async await break const continue crate else enum extern false fn for if impl in let loop match mod move mut pub ref return self Self static struct super trait true type unsafe use where while",
  c: "auto bool break case char class const continue default delete do double else enum extern false float for goto if include int long namespace new nullptr private protected public return short signed sizeof static struct switch template this true typedef union unsigned using virtual void volatile while",
  java: "abstract boolean break byte case catch char class continue default do double else enum extends false final finally float for if implements import instanceof int interface long new null package private protected public return short static super switch this throw throws true try void while",
  shell: "case do done echo elif else esac exit export fi for function if in local read return set then until while",
  sql: "add all alter and as asc between by create delete desc distinct drop exists from group having in index insert into is join key left like limit not null on or order outer primary right select set table union update values where",
};
const ALIASES = {javascript: "js", ts: "js", typescript: "js", jsx: "js", tsx: "js", json: "js", mjs: "js",
  py: "python", python3: "python", golang: "go", rs: "rust", cpp: "c", "c++": "c", h: "c", cs: "java",
  csharp: "java", kotlin: "java", kt: "java", swift: "java", sh: "shell", bash: "shell", zsh: "shell",
  console: "shell", yaml: "shell", yml: "shell", toml: "shell", ruby: "shell", rb: "shell", postgres: "sql",
  postgresql: "sql", mysql: "sql", sqlite: "sql"};
const HASH_COMMENTS = new Set(["python", "shell"]);
const CACHE = new Map();

function patternFor(family) {
  if (CACHE.has(family)) return CACHE.get(family);
  const comment = HASH_COMMENTS.has(family) ? String.raw`#[^\n]*` : family === "sql"
    ? String.raw`--[^\n]*|\/\*[\s\S]*?\*\/` : String.raw`\/\/[^\n]*|\/\*[\s\S]*?\*\/`;
  const strings = family === "python" ? String.raw`"""[\s\S]*?"""|'''[\s\S]*?'''|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'`
    : String.raw`"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'|\x60(?:\\.|[^\x60\\])*\x60`;
  const pattern = new RegExp(`(${comment})|(${strings})|\\b(\\d[\\d_]*(?:\\.\\d+)?(?:e[+-]?\\d+)?|0x[\\da-f]+)\\b|([A-Za-z_$][\\w$]*)`,
    family === "sql" ? "gi" : "g");
  const keywords = new Set((KEYWORDS[family] || "").split(" "));
  const entry = {pattern, keywords, sql: family === "sql"};
  CACHE.set(family, entry);
  return entry;
}

export function familyOf(language) {
  const name = (language || "").toLowerCase();
  return KEYWORDS[name] ? name : ALIASES[name] || null;
}

// Fills `target` (a <code>) with the highlighted `source`.
export function highlightInto(target, source, language) {
  const family = familyOf(language);
  if (!family) { target.textContent = source; return; }
  const {pattern, keywords, sql} = patternFor(family);
  pattern.lastIndex = 0;
  let position = 0;
  const fragment = document.createDocumentFragment();
  const span = (kind, text) => {
    const element = document.createElement("span");
    element.className = `tok-${kind}`;
    element.textContent = text;
    fragment.append(element);
  };
  for (const match of source.matchAll(pattern)) {
    const [text, comment, string, number, word] = match;
    if (word && !keywords.has(sql ? word.toLowerCase() : word)) continue;
    if (match.index > position) fragment.append(source.slice(position, match.index));
    if (comment) span("comment", text);
    else if (string) span("string", text);
    else if (number) span("number", text);
    else span("keyword", text);
    position = match.index + text.length;
  }
  if (position < source.length) fragment.append(source.slice(position));
  target.textContent = "";
  target.append(fragment);
}
