// A small Markdown renderer that builds DOM nodes; text only ever reaches the page through
// textContent / createTextNode, so model output can never become markup.

import { copyButton } from "./dom.js";

const SAFE_URL = /^(https?:|mailto:)/i;

export function renderMarkdown(source) {
  const root = document.createDocumentFragment();
  const lines = source.replace(/\r\n?/g, "\n").split("\n");
  let i = 0;
  while (i < lines.length) i = block(lines, i, root);
  return root;
}

function block(lines, i, parent) {
  const line = lines[i];
  if (/^\s*$/.test(line)) return i + 1;
  let m;
  if ((m = /^\s*(```+|~~~+)\s*([\w+-]*)/.exec(line))) return fence(lines, i, m[1], m[2], parent);
  if ((m = /^(#{1,6})\s+(.*?)\s*#*\s*$/.exec(line))) {
    parent.append(el(`h${Math.min(m[1].length + 1, 6)}`, inline(m[2]), "md-h"));
    return i + 1;
  }
  if (/^\s*([-*_])(\s*\1){2,}\s*$/.test(line)) {
    parent.append(document.createElement("hr"));
    return i + 1;
  }
  if (/^\s*>/.test(line)) return quote(lines, i, parent);
  if (/^\s*([-*+]|\d{1,9}[.)])\s+/.test(line)) return list(lines, i, parent);
  if (isTableStart(lines, i)) return table(lines, i, parent);
  return paragraph(lines, i, parent);
}

function fence(lines, i, marker, lang, parent) {
  const body = [];
  let j = i + 1;
  while (j < lines.length && !lines[j].trimStart().startsWith(marker)) body.push(lines[j++]);
  const pre = el("pre", null, "md-code");
  const code = document.createElement("code");
  if (lang) pre.dataset.lang = lang;
  code.textContent = body.join("\n");
  pre.append(copyButton(() => code.textContent, { title: "Copy this code", cls: "md-copy" }), code);
  parent.append(pre);
  return j + 1;
}

function quote(lines, i, parent) {
  const body = [];
  while (i < lines.length && /^\s*>/.test(lines[i])) body.push(lines[i++].replace(/^\s*> ?/, ""));
  const bq = document.createElement("blockquote");
  let j = 0;
  while (j < body.length) j = block(body, j, bq);
  parent.append(bq);
  return i;
}

function list(lines, i, parent) {
  const ordered = /^\s*\d/.test(lines[i]);
  const indent = lines[i].match(/^\s*/)[0].length;
  const node = document.createElement(ordered ? "ol" : "ul");
  if (ordered) node.start = parseInt(lines[i].trim(), 10) || 1;
  let item = null;
  while (i < lines.length) {
    const line = lines[i];
    const m = /^(\s*)([-*+]|\d{1,9}[.)])\s+(.*)$/.exec(line);
    if (m && m[1].length < indent) break;  // belongs to an outer list
    if (m && m[1].length <= indent + 1) {
      if (/^\d/.test(m[2]) !== ordered) break;
      item = el("li", inline(m[3]));
      node.append(item);
      i += 1;
    } else if (m && item) {
      i = list(lines, i, item);  // a nested list
    } else if (item && /^\s+\S/.test(line)) {
      item.append(" ", inline(line.trim()));
      i += 1;
    } else {
      break;
    }
  }
  parent.append(node);
  return i;
}

function isTableStart(lines, i) {
  return (
    i + 1 < lines.length &&
    lines[i].includes("|") &&
    /^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$/.test(lines[i + 1])
  );
}

function cells(line) {
  return line.trim().replace(/^\|/, "").replace(/\|$/, "").split("|").map((c) => c.trim());
}

function table(lines, i, parent) {
  const wrap = el("div", null, "md-table");
  const t = document.createElement("table");
  const head = document.createElement("tr");
  for (const c of cells(lines[i])) head.append(el("th", inline(c)));
  t.append(el("thead", head));
  const body = document.createElement("tbody");
  i += 2;
  while (i < lines.length && lines[i].includes("|") && lines[i].trim()) {
    const row = document.createElement("tr");
    for (const c of cells(lines[i++])) row.append(el("td", inline(c)));
    body.append(row);
  }
  t.append(body);
  wrap.append(t);
  parent.append(wrap);
  return i;
}

function paragraph(lines, i, parent) {
  const text = [];
  while (i < lines.length && lines[i].trim() && !startsBlock(lines, i)) text.push(lines[i++]);
  if (!text.length) text.push(lines[i++]);
  const p = document.createElement("p");
  text.forEach((t, n) => {
    if (n) p.append(document.createElement("br"));
    p.append(inline(t));
  });
  parent.append(p);
  return i;
}

function startsBlock(lines, i) {
  const line = lines[i];
  return (
    /^\s*(```|~~~)/.test(line) ||
    /^#{1,6}\s/.test(line) ||
    /^\s*>/.test(line) ||
    /^\s*([-*+]|\d{1,9}[.)])\s+/.test(line) ||
    isTableStart(lines, i)
  );
}

// Inline: `code`, **strong**, *em* / _em_, ~~del~~, [text](url), bare http(s) links.
// Underscores only count outside words (snake_case and __dunder__ inside text stay as typed).
const INLINE = /(`+)([\s\S]*?[^`])\1(?!`)|\*\*([^*]+?)\*\*|(?<!\w)__([^_]+?)__(?!\w)|\*([^*\s][^*]*?)\*|(?<!\w)_([^_\s][^_]*?)_(?!\w)|~~([^~]+?)~~|\[([^\]]+)\]\(([^)\s]+)\)|(https?:\/\/[^\s<>()]+[^\s<>().,;:!?'"])/;

export function inline(text) {
  const frag = document.createDocumentFragment();
  let rest = text;
  let m;
  while (rest && (m = INLINE.exec(rest))) {
    if (m.index) frag.append(document.createTextNode(rest.slice(0, m.index)));
    frag.append(inlineNode(m));
    rest = rest.slice(m.index + m[0].length);
  }
  if (rest) frag.append(document.createTextNode(rest));
  return frag;
}

function inlineNode(m) {
  if (m[1]) return el("code", document.createTextNode(m[2].trim() || m[2]), "md-inline");
  if (m[3] || m[4]) return el("strong", inline(m[3] || m[4]));
  if (m[5] || m[6]) return el("em", inline(m[5] || m[6]));
  if (m[7]) return el("del", inline(m[7]));
  if (m[8]) return link(m[8], m[9]);
  return link(m[10], m[10]);
}

function link(label, href) {
  if (!SAFE_URL.test(href)) return document.createTextNode(`[${label}](${href})`);
  const a = document.createElement("a");
  a.href = href;  // a property, not markup: only http(s)/mailto pass the test above
  a.target = "_blank";
  a.rel = "noopener noreferrer nofollow";
  a.append(inline(label));
  return a;
}

function el(tag, child, cls) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (child) node.append(child);
  return node;
}
