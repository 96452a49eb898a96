// The workstream list: each one's state at a glance (polled), switching, and the create dialog.

import { api } from "./api.js";
import { h } from "./dom.js";

export const POLL_MS = 3000;

export class Sidebar {
  constructor(els, { onSelect, onError }) {
    Object.assign(this, { els, onSelect, onError });
    this.items = [];
    this.activeId = null;
    this.liveStates = new Map();  // the open workstream's state as its socket reports it
    this.timer = null;
  }

  start() {
    this.refresh();
    this.timer = setInterval(() => this.refresh(), POLL_MS);
  }

  stop() {
    clearInterval(this.timer);
  }

  async refresh() {
    try {
      this.items = (await api.list()).filter((ws) => ws.kind !== "task");  // sub-agents show under their parent
    } catch (err) {
      return this.onError(err);
    }
    this.render();
  }

  setLiveState(wsId, state) {
    this.liveStates.set(wsId, state);
    this.render();
  }

  setActive(wsId) {
    this.activeId = wsId;
    this.liveStates.clear();
    this.render();
  }

  find(wsId) {
    return this.items.find((w) => w.ws_id === wsId);
  }

  render() {
    const rows = [...this.items].reverse().map((ws) => {
      const state = (ws.ws_id === this.activeId && this.liveStates.get(ws.ws_id)) || ws.state;
      const li = h(
        "li",
        {
          class: `ws-item${ws.ws_id === this.activeId ? " is-active" : ""}`,
          role: "option",
          tabindex: "0",
          "aria-selected": String(ws.ws_id === this.activeId),
          "data-ws-id": ws.ws_id,
          "data-state": state,
        },
        h("span", { class: "dot", "data-state": state, "aria-hidden": "true" }),
        h("span", { class: "ws-item-text" }, h("span", { class: "ws-name" }, ws.name), h("span", { class: "ws-sub" }, ws.model || "default model")),
        h("span", { class: "badge badge-small", "data-state": state }, state),
      );
      li.addEventListener("click", () => this.onSelect(ws.ws_id));
      li.addEventListener("keydown", (e) => {
        if (e.key === "Enter" || e.key === " ") {
          e.preventDefault();
          this.onSelect(ws.ws_id);
        }
      });
      return li;
    });
    if (!rows.length) rows.push(h("li", { class: "ws-none" }, "No workstreams yet."));
    this.els.list.replaceChildren(...rows);
  }
}

export function bindCreateDialog(els, { onCreated }) {
  const open = () => {
    els.error.textContent = "";
    els.dialog.hidden = false;
    els.name.focus();
  };
  const close = () => (els.dialog.hidden = true);
  els.openButton.addEventListener("click", open);
  els.cancel.addEventListener("click", close);
  els.form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const body = { auto_approve: els.auto.checked };
    for (const [key, input] of [["name", els.name], ["model", els.model], ["working_dir", els.dir], ["network", els.network]]) {
      if (input.value.trim()) body[key] = input.value.trim();
    }
    try {
      const ws = await api.create(body);
      close();
      els.form.reset();
      onCreated(ws);
    } catch (err) {
      els.error.textContent = err.message;
    }
  });
  return { open, close };
}
