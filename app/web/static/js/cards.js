// A tool card: one call, keyed by call_id. Header and preview from tool_info / approve_request
// (or the stored call), output streamed from tool_output_chunk, then the final tool_result.

import { h, throttled } from "./dom.js";

// Only the tail of a call's output stays in the page, so a chatty command never freezes it.
export const OUTPUT_CAP_CHARS = 64 * 1024;

// Every card by its element, wherever it sits (a sub-agent's cards live inside its panel).
const CARDS = new WeakMap();
export const cardOf = (el) => CARDS.get(el);

// The intent judge's verdict as a line of text: risk, why, from the rules or a judge model, how
// sure (a card's, and a pushed approval link's page: decide.js).
export function verdictLine(verdict) {
  const risk = ["low", "medium", "high"].includes(verdict.risk) ? verdict.risk : "unknown";
  const sure = typeof verdict.confidence === "number" ? ` · ${Math.round(verdict.confidence * 100)}% sure` : "";
  return h(
    "div",
    { class: "card-verdict", "data-risk": risk },
    h("span", { class: "risk", "data-risk": risk }, `${risk} risk`),
    h("span", { class: "verdict-reason" }, ` — ${verdict.reason || ""}`),
    h("span", { class: "verdict-by" }, ` (${verdict.by || "judge"}${sure})`),
  );
}

// Through what a decision came, in words (the stored value is in the tooltip).
const VIA_WORDS = {
  http: "in the web page or API",
  websocket: "in a live client",
  cli: "at the command line",
  link: "by a signed link",
  policy: "by the run's policy",
};

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
    // Why a person is asked, and how risky the call looks: the admin's rule, the intent judge.
    this.ruleLine = h("div", { class: "card-rule", hidden: true });
    this.verdictLine = h("div", { class: "card-verdict", hidden: true });
    // What the output guard did to the result before the model read it.
    this.guardLine = h("div", { class: "card-guard", hidden: true });
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
    this.editButton = h("button", { type: "button", class: "btn btn-small btn-ghost btn-edit", hidden: true }, "Edit", " ", h("kbd", {}, "e"));
    this.editButton.addEventListener("click", () => this.startEdit());
    this.buttons = [
      button("btn-approve", "Approve", "y", true, false),
      button("btn-deny", "Deny", "n", false, false),
      button("btn-ghost", "Always", "a", true, true),
      this.editButton,
    ];
    this.buildEditor();
    this.approval = h(
      "div",
      { class: "card-approval", hidden: true },
      this.editor,
      this.feedback,
      h("div", { class: "card-buttons" }, ...this.buttons),
    );
    this.decision = h("div", { class: "card-decision", hidden: true });
    this.el = h(
      "div",
      { class: "card", tabindex: "0", "data-call-id": this.callId, "data-status": "unknown" },
      h("div", { class: "card-head" }, this.name, this.header, this.foundBadge, this.chip),
      this.preview,
      this.ruleLine,
      this.verdictLine,
      this.problem,
      this.clipped,
      this.guardLine,
      this.out,
      this.approval,
      this.decision,
    );
    this.setStatus("unknown");
    CARDS.set(this.el, this);
  }

  // Edit a pending call before it runs: the command for bash, else the arguments as JSON. The
  // service checks the edit against the tool's schema; its refusal shows here and decides nothing.
  buildEditor() {
    this.editText = h("textarea", { class: "card-edit-text", rows: "4", spellcheck: "false", "aria-label": "Arguments" });
    const save = h("button", { type: "button", class: "btn btn-small btn-edit-approve" }, "Approve as edited");
    const back = h("button", { type: "button", class: "btn btn-small btn-ghost" }, "Cancel edit");
    save.addEventListener("click", () => this.approveEdited());
    back.addEventListener("click", () => this.stopEdit());
    this.editText.addEventListener("keydown", (ev) => {
      if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey)) this.approveEdited();
      if (ev.key === "Escape") this.stopEdit();
      ev.stopPropagation(); // typing here is never a shortcut
    });
    this.editor = h("div", { class: "card-edit", hidden: true }, this.editText, h("div", { class: "card-buttons" }, save, back));
  }

  editsCommand() {
    return this.funcName === "bash" && this.args && typeof this.args.command === "string";
  }

  startEdit() {
    if (!this.pending || !this.args) return;
    this.editText.value = this.editsCommand() ? this.args.command : JSON.stringify(this.args, null, 2);
    this.editor.hidden = false;
    this.editText.focus();
  }

  stopEdit() {
    this.editor.hidden = true;
    this.problem.hidden = true;
    this.el.focus();
  }

  // The arguments the editor holds, or null with the reason shown (nothing is sent).
  editedArguments() {
    if (this.editsCommand()) return { ...this.args, command: this.editText.value };
    let value;
    try {
      value = JSON.parse(this.editText.value);
    } catch (err) {
      return this.refuseEdit(`Not JSON: ${err.message}`);
    }
    if (!value || typeof value !== "object" || Array.isArray(value)) return this.refuseEdit("The arguments must be a JSON object.");
    return value;
  }

  refuseEdit(why) {
    this.problem.textContent = why;
    this.problem.hidden = false;
    return null;
  }

  approveEdited() {
    const args = this.editedArguments();
    if (args) this.decide(true, false, args);
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
    this.funcName = item.func_name;
    if (item.args) this.args = item.args;
    this.editButton.hidden = !item.args;
    if (item.error) {
      this.problem.textContent = item.error;
      this.problem.hidden = false;
    }
    if (item.rule) this.setRule(item.rule);
    if (item.verdict) this.setVerdict(item.verdict);
    if (this.final || this.resolved) return;
    this.setStatus(item.status || "pending");
    this.setPending(Boolean(item.needs_approval) && item.status === "pending");
  }

  // The admin's policy rule that decided or asked for the call (docs/policies.md).
  setRule(rule) {
    const what = rule.command ? `${rule.tool} \`${rule.command}\`` : rule.tool;
    const words = { ask: "asks a person", deny: "denies", allow: "allows" }[rule.effect] || rule.effect;
    this.ruleLine.textContent = `Policy: ${words} for ${what}${rule.reason ? ` — ${rule.reason}` : ""}`;
    this.ruleLine.hidden = false;
  }

  // The intent judge's verdict: risk, why, how sure, from the rules or a judge model.
  setVerdict(verdict) {
    const line = verdictLine(verdict);
    this.verdictLine.replaceChildren(...line.childNodes);
    this.verdictLine.dataset.risk = line.dataset.risk;
    this.verdictLine.hidden = false;
  }

  // The output guard's account: credentials redacted by kind, injection signs seen.
  setGuard({ redacted, signs }) {
    const parts = [];
    const kinds = Object.entries(redacted || {}).map(([kind, n]) => (n > 1 ? `${n} × ${kind}` : kind));
    if (kinds.length) parts.push(`redacted ${kinds.join(", ")}`);
    if ((signs || []).length) parts.push(`text that reads like instructions to the model (${signs.join("; ")}): the model was told it is data`);
    if (!parts.length) return;
    this.guardLine.textContent = `Output guard: ${parts.join("; ")}`;
    this.guardLine.hidden = false;
  }

  setPending(pending) {
    this.pending = pending;
    this.approval.hidden = !pending;
    if (!pending) this.editor.hidden = true;
    this.el.classList.toggle("is-pending", pending);
  }

  resolve({ approved, feedback, always, by, how, via, arguments: edited }) {
    this.resolved = true;
    this.setPending(false);
    if (!this.final) this.setStatus(approved ? "approved" : "denied");
    if (edited) this.describe(describeArguments(this.funcName || this.name.textContent, edited));
    this.el.classList.toggle("is-edited", Boolean(edited));
    const verdict = approved ? (always ? "Always approved" : edited ? "Approved as edited" : "Approved") : "Denied";
    const who = h("span", { class: "decision-by" }, ` by ${by || "someone"}`);
    const parts = [h("strong", {}, verdict), who];
    // A person's decision ("user", "always") says no more; a policy's or a rule's says which.
    if (how && how !== "user" && how !== "always") parts.push(h("span", { class: "decision-how" }, ` · ${how}`));
    if (via) parts.push(h("span", { class: "decision-via", title: `decided through: ${via}` }, ` ${VIA_WORDS[via] || `through ${via}`}`));
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

  async decide(approved, always = false, edited = undefined) {
    if (!this.pending || this.busy) return;
    this.busy = true;
    this.buttons.forEach((b) => (b.disabled = true));
    this.problem.hidden = true;
    try {
      const feedback = this.feedback.value.trim() || undefined;
      await this.onDecide({ call_id: this.callId, approved, always, feedback, arguments: edited });
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
  return describeArguments(name, args);
}

// A call's header and preview from its arguments (a stored call's, or a person's edit).
export function describeArguments(name, args) {
  if (name === "bash" && typeof args.command === "string") {
    return { name, header: `$ ${args.command.split("\n")[0]}`, preview: args.command };
  }
  const text = JSON.stringify(args, null, 2);
  return { name, header: name, preview: text === "{}" ? "" : text };
}
