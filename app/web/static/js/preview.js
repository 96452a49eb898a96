// The preview pane: what open_preview showed, beside the conversation. Content comes from
// short-lived signed links; nothing in it runs. Pages sit in an iframe sandboxed without
// scripts or an origin and load no remote images or styles until the toggle asks for them;
// tables, Markdown and text are parsed here and built as text nodes, never as HTML.

import { api } from "./api.js";
import { h } from "./dom.js";
import { renderMarkdown } from "./markdown.js";

const MAX_TABLE_ROWS = 5000;

export class PreviewPane {
  constructor(els) {
    this.els = els; // pane, title, kind, remote, remoteBox, body, close, list, open
    this.wsId = null;
    this.items = [];
    this.current = null;
    els.close.addEventListener("click", () => this.hide());
    els.remote.addEventListener("change", () => this.current && this.show(this.current.preview_id));
    els.list.addEventListener("change", () => els.list.value && this.show(els.list.value));
    els.open.addEventListener("click", () => (this.els.pane.hidden ? this.reopen() : this.hide()));
  }

  async setWorkstream(wsId) {
    this.wsId = wsId;
    this.hide();
    this.items = [];
    this.renderList();
    if (wsId) await this.refresh();
  }

  async refresh() {
    const wsId = this.wsId;
    const items = await api.previews(wsId);
    if (wsId !== this.wsId) return;
    this.items = items;
    this.renderList();
  }

  renderList() {
    const { list, open } = this.els;
    open.hidden = !this.items.length;
    open.textContent = `Previews (${this.items.length})`;
    list.replaceChildren(
      ...this.items
        .slice()
        .reverse()
        .map((p) => h("option", { value: p.preview_id }, `${p.title} · ${p.kind}`)),
    );
    if (this.current) list.value = this.current.preview_id;
  }

  // A `preview` event: the model just opened something; show it.
  async opened(e) {
    await this.refresh().catch(() => {});
    await this.show(e.preview_id);
  }

  reopen() {
    const last = this.current?.preview_id || this.items.at(-1)?.preview_id;
    if (last) this.show(last);
  }

  hide() {
    this.els.pane.hidden = true;
    this.els.body.replaceChildren();
    document.body.classList.remove("preview-open");
  }

  async show(previewId) {
    const p = await api.preview(previewId);
    if (p.ws_id !== this.wsId) return;
    if (this.current?.preview_id !== p.preview_id) this.els.remote.checked = false;
    this.current = p;
    const { pane, title, kind, remoteBox, body, list } = this.els;
    title.textContent = p.title;
    kind.textContent = p.kind;
    remoteBox.hidden = p.kind !== "web";
    list.value = p.preview_id;
    pane.hidden = false;
    pane.dataset.kind = p.kind;
    document.body.classList.add("preview-open");
    body.replaceChildren(await this.render(p));
  }

  async render(p) {
    if (p.kind === "web") {
      const url = this.els.remote.checked ? p.remote_url : p.url;
      // sandbox with no allowances: no scripts, no forms, no popups, an opaque origin
      return h("iframe", { class: "preview-frame", src: url, sandbox: "", referrerpolicy: "no-referrer", title: p.title });
    }
    if (p.kind === "pdf") return h("iframe", { class: "preview-frame", src: p.url, title: p.title });
    if (p.kind === "image") return h("img", { class: "preview-image", src: p.url, alt: p.title });
    const response = await fetch(p.url);
    const text = await response.text();
    if (p.kind === "markdown") return h("div", { class: "preview-doc md" }, renderMarkdown(text));
    if (p.kind === "table") return tableView(parseTable(text, p.media_type));
    return h("pre", { class: "preview-text" }, text);
  }
}

// -- tables -------------------------------------------------------------------------------

export function parseTable(text, mediaType) {
  if (mediaType.startsWith("application/json")) {
    const rows = JSON.parse(text);
    if (rows.every((r) => Array.isArray(r))) return { header: rows[0].map(String), rows: rows.slice(1) };
    const header = [...new Set(rows.flatMap((r) => Object.keys(r)))];
    return { header, rows: rows.map((r) => header.map((k) => r[k])) };
  }
  const rows = parseDelimited(text, mediaType.startsWith("text/tab-separated-values") ? "\t" : ",");
  return { header: rows[0] || [], rows: rows.slice(1) };
}

// RFC 4180 fields: quotes around a field, "" for a quote inside one, line breaks inside quotes.
function parseDelimited(text, sep) {
  const rows = [];
  let row = [];
  let field = "";
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') (field += '"'), i++;
      else if (c === '"') quoted = false;
      else field += c;
    } else if (c === '"' && field === "") quoted = true;
    else if (c === sep) row.push(field), (field = "");
    else if (c === "\n" || c === "\r") {
      if (c === "\r" && text[i + 1] === "\n") i++;
      row.push(field), rows.push(row), (row = []), (field = "");
    } else field += c;
  }
  if (field !== "" || row.length) row.push(field), rows.push(row);
  return rows;
}

function cellText(value) {
  if (value === null || value === undefined) return "";
  return typeof value === "object" ? JSON.stringify(value) : String(value);
}

function tableView({ header, rows }) {
  const shown = rows.slice(0, MAX_TABLE_ROWS);
  const tbody = h("tbody");
  const fill = (list) => tbody.replaceChildren(...list.map((r) => h("tr", {}, ...header.map((_, i) => h("td", {}, cellText(r[i]))))));
  let sortedBy = null;
  let ascending = true;
  const heads = header.map((name, i) => {
    const th = h("th", { scope: "col", tabindex: "0", "aria-sort": "none" }, cellText(name));
    const sort = () => {
      ascending = sortedBy === i ? !ascending : true;
      sortedBy = i;
      const key = (r) => cellText(r[i]);
      const numeric = shown.every((r) => key(r) === "" || !Number.isNaN(Number(key(r))));
      const cmp = numeric ? (a, b) => Number(key(a)) - Number(key(b)) : (a, b) => key(a).localeCompare(key(b));
      fill(shown.slice().sort((a, b) => (ascending ? cmp(a, b) : cmp(b, a))));
      for (const other of heads) other.setAttribute("aria-sort", "none");
      th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
    };
    th.addEventListener("click", sort);
    th.addEventListener("keydown", (e) => (e.key === "Enter" || e.key === " ") && (e.preventDefault(), sort()));
    return th;
  });
  fill(shown);
  const note = rows.length > shown.length ? h("p", { class: "preview-note" }, `First ${shown.length} of ${rows.length} rows.`) : null;
  return h("div", { class: "preview-table" }, h("table", {}, h("thead", {}, h("tr", {}, ...heads)), tbody), note);
}
