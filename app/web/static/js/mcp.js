// The MCP badge (connected servers; resources and prompts in its tooltip) and the MCP panel:
// each server's state, counts and last error, with Refresh and Reconnect buttons. Reads GET /v1/api/mcp,
// which the workers keep current; polled while signed in.

import { api } from "./api.js";
import { h } from "./dom.js";

const POLL_MS = 5000;
const REPORT_MS = 60000; // how long a refresh's report of added and removed tools stays

export class McpPanel {
  constructor(els, { onError }) {
    this.els = els; // badge, dialog, list, refreshAll, close
    this.onError = onError;
    this.timer = null;
    this.servers = [];
    // server -> {before: its tool names when Refresh was pressed, at, seenAt: its workers' report}
    this.refreshed = new Map();
    this.reports = {};
    els.badge.addEventListener("click", () => this.open());
    els.close.addEventListener("click", () => (els.dialog.hidden = true));
    els.refreshAll.addEventListener("click", () => this.refresh(null));
  }

  start() {
    this.stop();
    this.poll();
    this.timer = setInterval(() => this.poll(), POLL_MS);
  }

  stop() {
    clearInterval(this.timer);
    this.timer = null;
  }

  async poll() {
    try {
      this.show(await api.mcp());
    } catch (err) {
      this.onError(err);
    }
  }

  show(data) {
    this.servers = data.servers;
    this.reports = data.workers || {}; // worker -> {catalog_version, ts}: its last report
    const { servers, resources, prompts } = data.totals;
    const badge = this.els.badge;
    badge.hidden = data.servers.length === 0;
    badge.textContent = `MCP ${servers}`;
    badge.dataset.state = servers === data.servers.length ? "ok" : "partial";
    badge.title = `${servers} of ${data.servers.length} MCP servers connected · ${resources} resources · ${prompts} prompts`;
    if (!this.els.dialog.hidden) this.render();
  }

  open() {
    this.els.dialog.hidden = false;
    this.render();
    this.poll();
  }

  render() {
    this.els.list.replaceChildren(...this.servers.map((s) => this.row(s)));
  }

  row(s) {
    const c = s.counts;
    const counts = `${c.tools} tools · ${c.resources} resources · ${c.templates} templates · ${c.prompts} prompts`;
    const button = h("button", { class: "btn btn-ghost btn-small", type: "button" }, "Refresh");
    button.addEventListener("click", () => this.refresh(s.name));
    // Reconnect: the connection closed and opened again, even where it is up (a server that
    // answers but misbehaves); Refresh only lists a connected server's tools again.
    const reconnect = h("button", { class: "btn btn-ghost btn-small", type: "button" }, "Reconnect");
    reconnect.addEventListener("click", () => this.refresh(s.name, true));
    return h(
      "div",
      { class: "mcp-row", "data-server": s.name },
      h(
        "div",
        { class: "mcp-head" },
        h("strong", {}, s.name),
        h("span", { class: "badge badge-small", "data-state": s.state }, s.state),
        h("span", { class: "mcp-where" }, `${s.transport} · ${s.origin}`),
        button,
        reconnect,
      ),
      h("div", { class: "mcp-counts" }, counts),
      this.report(s),
      s.last_error ? h("div", { class: "mcp-error" }, s.last_error) : null,
      ...(s.warnings || []).map((w) => h("div", { class: "mcp-warning" }, w)),
    );
  }

  // What a refresh changed, once the workers have listed the server again: the tools it added
  // and removed (names as the model sees them), or that nothing changed.
  report(s) {
    const asked = this.refreshed.get(s.name);
    if (!asked || Date.now() - asked.at > REPORT_MS) return null;
    const now = new Set(s.tools || []);
    const added = [...now].filter((t) => !asked.before.has(t));
    const removed = [...asked.before].filter((t) => !now.has(t));
    const heard = this.lastReport(s) > asked.seenAt;
    if (!added.length && !removed.length) {
      return heard ? h("div", { class: "mcp-report" }, "Refreshed: no tools added or removed") : null;
    }
    const parts = [];
    if (added.length) parts.push(`added ${added.join(", ")}`);
    if (removed.length) parts.push(`removed ${removed.join(", ")}`);
    return h("div", { class: "mcp-report" }, `Refreshed: ${parts.join("; ")}`);
  }

  // When a worker that serves `s` last reported (0: none has).
  lastReport(s) {
    const times = Object.keys(s.workers || {}).map((w) => Number((this.reports[w] || {}).ts) || 0);
    return Math.max(0, ...times);
  }

  async refresh(server, reconnect = false) {
    for (const s of this.servers) {
      if (server === null || s.name === server) {
        this.refreshed.set(s.name, { before: new Set(s.tools || []), at: Date.now(), seenAt: this.lastReport(s) });
      }
    }
    try {
      await api.mcpRefresh(server, reconnect);
      setTimeout(() => this.poll(), 500);
    } catch (err) {
      this.onError(err);
    }
  }
}
