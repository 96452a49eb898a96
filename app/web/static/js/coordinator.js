// A coordinator's panel above its conversation: its child workstreams (state, an Open link, each
// child's calls awaiting a decision with Approve / Deny, decided here through the coordinator's
// approve API), its task list, and a Close button that closes it with its children. Kept current
// by the coordinator's stream: its children's `subagent` echoes and `tasks_changed`.
// Everything a model or a tool wrote is shown as text (textContent through h()), never HTML.

import { api } from "./api.js";
import { h } from "./dom.js";

export class CoordinatorPanel {
  constructor(els, { onOpen, onError, onPending }) {
    Object.assign(this, { els, onOpen, onError, onPending: onPending || (() => {}) });
    this.wsId = null;
    this.refreshing = null;
    els.close.addEventListener("click", () => this.closeAll());
  }

  async open(ws) {
    this.wsId = ws.kind === "coordinator" ? ws.ws_id : null;
    this.els.root.hidden = !this.wsId;
    this.tasks = [];
    this.children = [];
    this.pending = [];
    this.render();
    this.onPending();
    if (this.wsId) await this.refresh();
  }

  close() {
    this.wsId = null;
    this.pending = [];
    this.els.root.hidden = true;
  }

  // Children's calls awaiting a decision: the header and the approve-all bar count them too.
  pendingCount() {
    return this.wsId ? (this.pending || []).length : 0;
  }

  // A child's echoed event, or a task list change: read again (one read at a time).
  event(e) {
    if (!this.wsId) return;
    if (e.type === "tasks_changed") {
      this.tasks = e.tasks || [];
      return this.render();
    }
    if (e.type === "subagent" && !e.call_id) this.refresh();
    if (e.type === "workstream_closed") this.refresh();
  }

  // A read asked for while one is under way runs once more after it: the one under way may have
  // read the children before the change that asked.
  async refresh() {
    if (this.refreshing) {
      this.again = true;
      return this.refreshing;
    }
    this.again = false;
    const wsId = this.wsId;
    this.refreshing = (async () => {
      try {
        const [all, tasks, described] = await Promise.all([api.list(), api.tasks(wsId), api.describe(wsId)]);
        if (wsId !== this.wsId) return;
        this.children = all.filter((w) => w.parent_id === wsId && w.kind === "interactive");
        this.tasks = tasks;
        this.closed = described.closed;
        this.pending = (described.pending_approvals || []).filter((p) => p.child_ws_id && !p.parent_call_id);
        this.render();
        this.onPending();
      } catch (err) {
        this.onError(err);
      } finally {
        this.refreshing = null;
        if (this.again && this.wsId) this.refresh();
      }
    })();
    return this.refreshing;
  }

  render() {
    const open = this.children.filter((c) => !c.closed).length;
    this.els.count.textContent = `Coordinator · ${open} open of ${this.children.length} workstreams · ${this.tasks.length} tasks`;
    this.els.close.hidden = !this.wsId || this.closed;
    this.els.children.replaceChildren(...this.children.map((c) => this.childRow(c)));
    this.els.tasks.replaceChildren(
      ...this.tasks.map((t) =>
        h(
          "li",
          { class: "coord-task", "data-status": t.status, "data-task-id": t.task_id },
          h("span", { class: "coord-task-status" }, t.status.replace("_", " ")),
          h("span", { class: "coord-task-title" }, t.title),
        ),
      ),
    );
  }

  childRow(child) {
    const openLink = h("button", { class: "btn btn-ghost btn-small", type: "button" }, "Open");
    openLink.addEventListener("click", () => this.onOpen(child.ws_id));
    const waiting = this.pending.filter((p) => p.child_ws_id === child.ws_id).map((p) => this.pendingRow(p));
    const state = child.closed ? "closed" : child.state;
    return h(
      "li",
      { class: "coord-child", "data-ws-id": child.ws_id, "data-state": state },
      h("span", { class: "badge", "data-state": child.state }, state),
      h("span", { class: "coord-child-name" }, child.name),
      openLink,
      waiting.length ? h("ul", { class: "coord-pending" }, ...waiting) : null,
    );
  }

  pendingRow(item) {
    const decide = async (approved, button) => {
      button.disabled = true;
      try {
        await api.approve(this.wsId, { approved, call_id: item.call_id, child_ws_id: item.child_ws_id });
      } catch (err) {
        this.onError(err);
      }
      this.refresh();
    };
    const approve = h("button", { class: "btn btn-approve btn-small", type: "button" }, "Approve");
    const deny = h("button", { class: "btn btn-deny btn-small", type: "button" }, "Deny");
    approve.addEventListener("click", () => decide(true, approve));
    deny.addEventListener("click", () => decide(false, deny));
    return h(
      "li",
      { class: "coord-call", "data-call-id": item.call_id },
      h("code", {}, item.header || item.func_name || "call"),
      approve,
      deny,
    );
  }

  async closeAll() {
    if (!this.wsId || !confirm("Close this coordinator and every workstream it started?")) return;
    try {
      await api.close(this.wsId);
    } catch (err) {
      this.onError(err);
    }
    this.refresh();
  }
}
