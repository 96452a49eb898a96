// The open workstream's background shells (bash run_in_background): a panel above the
// conversation, one entry each with its command, status and the tail of its output, polled every
// few seconds while one runs (their output is stored, not streamed). Output is shown as text.

import { api } from "./api.js";
import { h } from "./dom.js";

const POLL_MS = 2000;
const SHELL_TOOLS = new Set(["bash", "bash_output", "kill_shell"]);

export class ShellsPanel {
  constructor(els, { onError }) {
    Object.assign(this, { els, onError });
    this.wsId = null;
    this.shells = [];
    this.timer = setInterval(() => this.shells.some((s) => s.status === "running") && this.refresh(), POLL_MS);
  }

  async open(wsId) {
    this.wsId = wsId;
    this.shells = [];
    this.render();
    await this.refresh();
  }

  close() {
    this.wsId = null;
    this.shells = [];
    this.render();
  }

  event(e) {
    if (e.type === "tool_result" && SHELL_TOOLS.has(e.name)) this.refresh();
    if (e.type === "workstream_closed") this.refresh();
  }

  async refresh() {
    const wsId = this.wsId;
    if (!wsId) return;
    try {
      const shells = await api.shells(wsId);
      if (wsId !== this.wsId) return;
      this.shells = shells;
    } catch (err) {
      this.onError(err);
    }
    this.render();
  }

  render() {
    const running = this.shells.filter((s) => s.status === "running").length;
    this.els.root.hidden = !this.shells.length;
    this.els.count.textContent = `Background shells · ${running} running of ${this.shells.length}`;
    this.els.list.replaceChildren(
      ...this.shells.map((s) =>
        h(
          "li",
          { class: "shell", "data-shell-id": s.shell_id, "data-status": s.status },
          h(
            "div",
            { class: "shell-head" },
            h("span", { class: "badge", "data-state": s.status === "running" ? "running" : "idle" }, s.status),
            h("code", { class: "shell-command" }, s.command.split("\n")[0]),
            s.note ? h("span", { class: "shell-note" }, s.note) : null,
          ),
          h("pre", { class: "shell-tail" }, s.tail.split("\n").slice(-12).join("\n")),
        ),
      ),
    );
  }
}
