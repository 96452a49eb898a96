// A tool card: one call, keyed by call_id. Header and preview from tool_info / approve_request
// (or the stored call), output streamed from tool_output_chunk, then the final tool_result.

import { h, throttled } from "./dom.js";

// Only the tail of a call's output stays in the page, so a chatty command never freezes it.
export const OUTPUT_CAP_CHARS = 64 * 1024;

// Every card by its element, wherever it sits (a sub-agent's cards live inside its panel).
const CARDS = new WeakMap();
export const cardOf = (el) => CARDS.get(el);

export class ToolCard {
  constructor(callId, { onDecide }) {
    this.callId = callId;
    this.onDecide = onDecide;
    this.output = "";
    this.hiddenChars = 0;
    this.final = false;
    this.pending = false;
    this.resolved = false;
    this.busy = false;
    this.build();
    this.paintOutput = throttled(() => this.renderOutput());
  }

  build() {
    this.name = h("span", { class: "tool-name" }, "tool");
    this.header = h("code", { class: "card-header" });
    this.chip = h("span", { class: "chip" });
    this.foundBadge = h("span", { class: "found-badge", hidden: true }, "found by tool search");
    this.preview = h("pre", { class: "card-preview", hidden: true });
    this.problem = h("div", { class: "card-problem", hidden: true });
    this.clipped = h("div", { class: "card-clipped", hidden: true });
    this.out = h("pre", { class: "card-output", hidden: true });
    this.feedback = h("input", {
      class: "feedback",
      type: "text",
      placeholder: "Feedback for the model (optional)",
      "aria-label": "Feedback",
    });
    const button = (cls, label, key, approved, always) => {
      const b = h("button", { type: "button", class: `btn btn-small ${cls}` }, label, " ", h("kbd", {}, key));
      b.addEventListener("click", () => this.decide(approved, always));
      return b;
    };
    this.buttons = [
      button("btn-approve", "Approve", "y", true, false),
      button("btn-deny", "Deny", "n", false, false),
      button("btn-ghost", "Always", "a", true, true),
    ];
    this.approval = h("div", { class: "card-approval", hidden: true }, this.feedback, h("div", { class: "card-buttons" }, ...this.buttons));
    this.decision = h("div", { class: "card-decision", hidden: true });
    this.el = h(
      "div",
      { class: "card", tabindex: "0", "data-call-id": this.callId, "data-status": "unknown" },
      h("div", { class: "card-head" }, this.name, this.header, this.foundBadge, this.chip),
      this.preview,
      this.problem,
      this.clipped,
      this.out,
      this.approval,
      this.decision,
    );
    this.setStatus("unknown");
    CARDS.set(this.el, this);
  }

  // A tool the model could call only once tool search had found it (the workstream's expanded tools).
  setFound(found) {
    this.foundBadge.hidden = !found;
    this.el.classList.toggle("is-found", found);
  }

  setStatus(status) {
    this.status = status;
    this.el.dataset.status = status;
    this.chip.textContent = status === "unknown" ? "" : status;
    this.chip.hidden = status === "unknown";
  }

  describe({ name, header, preview }) {
    this.name.textContent = name;
    this.header.textContent = header || name;
    const showPreview = preview && preview.trim() !== (header || "").replace(/^\$ /, "").trim();
    this.preview.textContent = showPreview ? preview : "";
    this.preview.hidden = !showPreview;
  }

  // An item from tool_info, approve_request or the workstream's pending_approvals.
  merge(item) {
    this.describe({ name: item.func_name, header: item.header, preview: item.preview });
    if (item.error) {
      this.problem.textContent = item.error;
      this.problem.hidden = false;
    }
    if (this.final || this.resolved) return;
    this.setStatus(item.status || "pending");
    this.setPending(Boolean(item.needs_approval) && item.status === "pending");
  }

  setPending(pending) {
    this.pending = pending;
    this.approval.hidden = !pending;
    this.el.classList.toggle("is-pending", pending);
  }

  resolve({ approved, feedback, always, by, how, via }) {
    this.resolved = true;
    this.setPending(false);
    if (!this.final) this.setStatus(approved ? "approved" : "denied");
    const verdict = approved ? (always ? "Always approved" : "Approved") : "Denied";
    const who = h("span", { class: "decision-by" }, ` by ${by || "someone"}`);
    const parts = [h("strong", {}, verdict), who, h("span", { class: "decision-how" }, ` · ${how || "user"}`)];
    if (via) parts.push(h("span", { class: "decision-via" }, ` · via ${via}`));
    if (feedback) parts.push(h("span", { class: "decision-feedback" }, ` — “${feedback}”`));
    this.decision.replaceChildren(...parts);
    this.decision.dataset.approved = String(Boolean(approved));
    this.decision.hidden = false;
  }

  chunk(text) {
    if (this.final) return;
    if (this.status !== "running") this.setStatus("running");
    this.appendOutput(text);
  }

  result(output, isError) {
    this.final = true;
    this.setPending(false);
    this.setStatus(isError ? "error" : "done");
    this.el.classList.toggle("is-error", Boolean(isError));
    this.output = "";
    this.hiddenChars = 0;
    this.appendOutput(output || "(no output)");
  }

  appendOutput(text) {
    this.output += text;
    if (this.output.length > OUTPUT_CAP_CHARS * 1.25) {
      const cut = this.output.length - OUTPUT_CAP_CHARS;
      this.hiddenChars += cut;
      this.output = this.output.slice(cut);
    }
    this.paintOutput();
  }

  renderOutput() {
    const stick = this.out.scrollHeight - this.out.scrollTop - this.out.clientHeight < 24;
    this.out.hidden = false;
    this.out.textContent = this.output;
    this.clipped.hidden = !this.hiddenChars;
    this.clipped.textContent = `… ${Math.round(this.hiddenChars / 1024)} KB of earlier output not shown`;
    if (stick) this.out.scrollTop = this.out.scrollHeight;
  }

  async decide(approved, always = false) {
    if (!this.pending || this.busy) return;
    this.busy = true;
    this.buttons.forEach((b) => (b.disabled = true));
    this.problem.hidden = true;
    try {
      await this.onDecide({ call_id: this.callId, approved, always, feedback: this.feedback.value.trim() || undefined });
    } catch (err) {
      this.problem.textContent = `Could not send the decision: ${err.message}`;
      this.problem.hidden = false;
    } finally {
      this.busy = false;
      this.buttons.forEach((b) => (b.disabled = false));
    }
  }
}

// What a stored assistant tool call (history) shows before its result: `$ cmd` for bash.
export function describeStoredCall(call) {
  const name = (call.function && call.function.name) || "tool";
  let args = {};
  try {
    args = JSON.parse((call.function && call.function.arguments) || "{}");
  } catch {
    args = { arguments: call.function && call.function.arguments };
  }
  if (name === "bash" && typeof args.command === "string") {
    return { name, header: `$ ${args.command.split("\n")[0]}`, preview: args.command };
  }
  const text = JSON.stringify(args, null, 2);
  return { name, header: name, preview: text === "{}" ? "" : text };
}
