// The MCP badge (connected servers; resources and prompts in its tooltip) and the MCP panel:
// each server's state, counts and last error, with a refresh button. Reads GET /v1/api/mcp,
// which the workers keep current; polled while signed in.

import { api } from "./api.js";
import { h } from "./dom.js";

const POLL_MS = 5000;

export class McpPanel {
  constructor(els, { onError }) {
    this.els = els; // badge, dialog, list, refreshAll, close
    this.onError = onError;
    this.timer = null;
    this.servers = [];
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
      ),
      h("div", { class: "mcp-counts" }, counts),
      s.last_error ? h("div", { class: "mcp-error" }, s.last_error) : null,
      ...(s.warnings || []).map((w) => h("div", { class: "mcp-warning" }, w)),
    );
  }

  async refresh(server) {
    try {
      await api.mcpRefresh(server);
      setTimeout(() => this.poll(), 500);
    } catch (err) {
      this.onError(err);
    }
  }
}
