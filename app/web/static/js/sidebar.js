// The workstream list: each one's state at a glance (polled), switching, and the create dialog;
// a search box (names, at once), pinned ones first, then by last activity: Today, Yesterday,
// Earlier; pin, archive (hidden unless shown) and rename, kept on the server (PATCH).

import { api } from "./api.js";
import { h } from "./dom.js";
import { askName } from "./header.js";
import { fillModelSelect } from "./models.js";

export const POLL_MS = 3000;
const DAY_MS = 24 * 3600 * 1000;

export class Sidebar {
  constructor(els, { onSelect, onError, onChanged }) {
    Object.assign(this, { els, onSelect, onError, onChanged: onChanged || (() => {}) });
    this.items = [];
    this.activeId = null;
    this.liveStates = new Map();  // the open workstream's state as its socket reports it
    this.timer = null;
    this.query = "";
    this.showArchived = false;
    this.editing = false;  // a rename in the list: the poll's re-render waits until it is done
    els.search?.addEventListener("input", () => {
      this.query = els.search.value.trim().toLowerCase();
      this.render();
    });
    els.showArchived?.addEventListener("change", () => {
      this.showArchived = els.showArchived.checked;
      this.render();
    });
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

  // A change made here or elsewhere (a rename, a title, the model), shown before the next poll.
  update(ws) {
    const i = this.items.findIndex((w) => w.ws_id === ws.ws_id);
    if (i >= 0) this.items[i] = { ...this.items[i], ...ws };
    this.render();
  }

  visible() {
    return this.items.filter(
      (ws) => (this.showArchived || !ws.archived || ws.ws_id === this.activeId) && (!this.query || ws.name.toLowerCase().includes(this.query)),
    );
  }

  render() {
    if (this.editing) return;
    const groups = new Map();
    const byActivity = [...this.visible()].sort((a, b) => activity(b) - activity(a));
    for (const ws of byActivity) {
      const group = ws.pinned ? "Pinned" : dayGroup(activity(ws));
      if (!groups.has(group)) groups.set(group, []);
      groups.get(group).push(ws);
    }
    const rows = [];
    for (const group of ["Pinned", "Today", "Yesterday", "Earlier"]) {
      if (!groups.has(group)) continue;
      rows.push(h("li", { class: "ws-group", role: "presentation" }, group));
      rows.push(...groups.get(group).map((ws) => this.row(ws)));
    }
    if (!rows.length) rows.push(h("li", { class: "ws-none" }, this.items.length ? "No workstream matches." : "No workstreams yet."));
    const archived = this.items.filter((ws) => ws.archived).length;
    if (this.els.archivedCount) this.els.archivedCount.textContent = archived ? `Show archived (${archived})` : "Show archived";
    this.els.list.replaceChildren(...rows);
  }

  row(ws) {
    const state = (ws.ws_id === this.activeId && this.liveStates.get(ws.ws_id)) || ws.state;
    const when = new Date(activity(ws));
    const li = h(
      "li",
      {
        class: `ws-item${ws.ws_id === this.activeId ? " is-active" : ""}${ws.archived ? " is-archived" : ""}`,
        role: "option",
        tabindex: "0",
        "aria-selected": String(ws.ws_id === this.activeId),
        "data-ws-id": ws.ws_id,
        "data-state": state,
      },
      h("span", { class: "dot", "data-state": state, "aria-hidden": "true" }),
      h(
        "span",
        { class: "ws-item-text" },
        h("span", { class: "ws-name" }, ws.name),
        h(
          "span",
          { class: "ws-sub" },
          `${ws.model || "default model"} · `,
          h("time", { class: "ws-when", datetime: when.toISOString(), title: `Last activity ${when.toLocaleString()}` }, shortTime(when)),
        ),
      ),
      h("span", { class: "badge badge-small", "data-state": state }, state),
      h(
        "span",
        { class: "ws-actions" },
        this.action("ws-pin", ws.pinned ? "Unpin" : "Pin", ws.pinned ? "★" : "☆", () => this.patch(ws, { pinned: !ws.pinned })),
        this.action("ws-rename", "Rename", "✎", async () => {
          this.editing = true;
          let name;
          try {
            name = await askName(li.querySelector(".ws-name"), ws.name);
          } finally {
            this.editing = false;
          }
          if (name && name !== ws.name) await this.patch(ws, { name });
          else this.render();
        }),
        this.action("ws-archive", ws.archived ? "Unarchive" : "Archive", ws.archived ? "⤴" : "⤓", () => this.patch(ws, { archived: !ws.archived })),
      ),
    );
    li.addEventListener("click", () => this.onSelect(ws.ws_id));
    li.addEventListener("keydown", (e) => {
      if (e.target === li && (e.key === "Enter" || e.key === " ")) {
        e.preventDefault();
        this.onSelect(ws.ws_id);
      }
    });
    return li;
  }

  action(cls, label, icon, act) {
    const button = h("button", { class: `btn btn-ghost btn-icon ws-action ${cls}`, type: "button", "aria-label": label, title: label }, icon);
    button.addEventListener("click", (e) => {
      e.stopPropagation();
      act(button);
    });
    button.addEventListener("keydown", (e) => e.stopPropagation());
    return button;
  }

  async patch(ws, body) {
    try {
      const changed = await api.patch(ws.ws_id, body);
      this.update(changed);
      this.onChanged(changed);
    } catch (err) {
      this.onError(err);
    }
  }
}

function activity(ws) {
  return Date.parse(ws.last_activity_at || ws.created_at) || 0;
}

function dayGroup(ms) {
  const today = new Date();
  today.setHours(0, 0, 0, 0);
  if (ms >= today.getTime()) return "Today";
  if (ms >= today.getTime() - DAY_MS) return "Yesterday";
  return "Earlier";
}

// "just now", "5 min ago", "14:02" (today), "Mon 09:10" (this week), else the date.
export function shortTime(when, now = new Date()) {
  const ago = now - when;
  if (ago < 60_000) return "just now";
  if (ago < 3600_000) return `${Math.floor(ago / 60_000)} min ago`;
  const time = when.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
  if (dayGroup(when.getTime()) === "Today") return time;
  if (ago < 6 * DAY_MS) return `${when.toLocaleDateString([], { weekday: "short" })} ${time}`;
  return when.toLocaleDateString();
}

export function bindCreateDialog(els, { onCreated }) {
  const open = () => {
    els.error.textContent = "";
    els.dialog.hidden = false;
    els.name.focus();
    fillModelSelect(els.model, null).catch((err) => (els.error.textContent = `Models not listed: ${err.message}`));
  };
  const close = () => (els.dialog.hidden = true);
  els.openButton.addEventListener("click", open);
  els.cancel.addEventListener("click", close);
  els.form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const body = { auto_approve: els.auto.checked };
    if (els.smart?.checked) body.smart_approve = true;
    if (els.coordinator?.checked) body.kind = "coordinator";
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
