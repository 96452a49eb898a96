// The open workstream: history, then the replay and live events over one websocket; the
// header's state badge, the cancel button, the approve-all bar and the message box follow it.

import { api, token } from "./api.js";
import { EventStream } from "./socket.js";
import { Transcript } from "./transcript.js";
import { h } from "./dom.js";

// On (re)load the replay starts this many events before the history's cursor: those events
// can only add what the history lacks (an answer still streaming, a pending call's preview,
// who decided), never repeat it — see transcript.js. Older than the log: the server says so.
export const REPLAY_OVERLAP = 2000;
const BUSY = new Set(["thinking", "running", "attention"]);

export class WorkstreamView {
  constructor(els, { onState, onUnauthorized, onPreview, onDeleted, onWatch, onForked, onEvent, elsewherePending }) {
    this.els = els;
    this.onEvent = onEvent || (() => {});
    // Calls awaiting a decision here that have no card in the transcript (a coordinator's children's).
    this.elsewherePending = elsewherePending || (() => 0);
    this.onWatch = onWatch || (() => {});
    this.onStateOut = onState;
    this.onUnauthorized = onUnauthorized;
    this.onPreview = onPreview;
    this.onDeleted = onDeleted;
    this.onForked = onForked;
    this.wsId = null;
    this.stream = null;
    this.historyCursor = 0;
    this.transcript = new Transcript(els.transcript, {
      onDecide: (body) => this.decide(body),
      onState: (state) => this.setState(state),
      onTruncated: (e) => this.truncated(e),
      onWithdraw: (turnId) => this.withdraw(turnId),
      onEdit: (turnId, text) => this.branching(async (id) => api.edit(id, (await this.turnMessages(turnId)).user, text)),
      onRetry: () => this.branching((id) => api.retry(id)),
      onFork: (turnId) =>
        this.branching(async (id) => this.onForked?.(await api.fork(id, (await this.turnMessages(turnId)).last))),
      onRestore: (branchId) => this.branching((id) => api.restore(id, branchId)),
      onSummary: (messageId) => this.summary(messageId),
      onThumb: (attachmentId) => api.attachmentImage(this.wsId, attachmentId),
    });
  }

  async open(ws) {
    this.close();
    this.wsId = ws.ws_id;
    this.els.title.textContent = ws.name;
    this.els.meta.textContent = [
      ws.working_dir,  // the model is the header's picker (header.js)
      networkLabel(ws.network),
      ws.auto_approve ? "auto-approve" : null,
      ws.smart_approve ? "smart approve" : null,
    ]
      .filter(Boolean)
      .join(" · ");
    this.setState(ws.state);
    this.showSkill(ws.skill);
    await this.load({ overlap: true });
  }

  close() {
    if (this.stream) this.stream.close();
    this.stream = null;
    this.wsId = null;
    this.shownState = null;
    this.transcript.reset();
    this.els.tools.hidden = true;
    this.updatePending();
  }

  async load({ overlap }) {
    const wsId = this.wsId;
    if (this.stream) this.stream.close();
    this.stream = null;
    const history = await api.history(wsId);
    if (wsId !== this.wsId) return;
    this.transcript.reset();
    this.transcript.loadHistory(history.messages);
    await this.showBranches(wsId, history.messages);
    if (wsId !== this.wsId) return;
    this.historyCursor = history.last_event_id;
    this.transcript.lastId = overlap ? Math.max(0, history.last_event_id - REPLAY_OVERLAP) : history.last_event_id;
    this.transcript.settleAtBottom();
    this.stream = new EventStream(wsId, {
      token: () => token.get(),
      cursor: () => this.transcript.lastId,
      onEvent: (e) => this.event(e),
      onStatus: (s) => (this.els.conn.dataset.conn = s),
      onFatal: (e) => this.fatal(e),
    });
    this.stream.open();
    const describe = await api.describe(wsId);
    if (wsId !== this.wsId) return;
    this.transcript.loadPending(describe);
    this.showTools(describe);
    this.showSkill(describe.skill);
    this.turnId = describe.active_turn_id;
    if (!this.transcript.stateEvents) this.setState(describe.state);
    this.updatePending();
  }

  // Branching (docs/branching.md): each kept version is marked where it continues.
  async showBranches(wsId, messages) {
    const branches = await api.branches(wsId).catch(() => []);
    const turnOf = new Map(messages.map((m) => [m.id, m.turn_id]));
    for (const branch of branches) this.transcript.branchMarker(branch, turnOf.get(branch.after_message_id));
  }

  // The ids of a turn's user message and of its last message, from the stored history.
  async turnMessages(turnId) {
    const { messages } = await api.history(this.wsId);
    const mine = messages.filter((m) => m.turn_id === turnId);
    return { user: mine.find((m) => m.role === "user")?.id, last: mine.at(-1)?.id };
  }

  // A summary message and the messages it stands for, from the stored history.
  async summary(messageId) {
    const { messages } = await api.history(this.wsId);
    const row = messages.find((m) => m.id === messageId) || {};
    const covered = messages.filter((m) => m.role !== "summary" && m.id >= row.covers_from && m.id <= row.covers_to);
    return { summary: row.content || "", covered };
  }

  // An edit, retry, fork or restore; the server's `branch_changed` event re-reads the history.
  async branching(action) {
    try {
      await action(this.wsId);
    } catch (err) {
      this.failed(err);
    }
  }

  // The header names the active skill; loading one (the skill tool) changes it.
  showSkill(name) {
    if (!this.els.skill) return;
    this.els.skill.hidden = !name;
    this.els.skill.textContent = name ? `skill: ${name}` : "";
  }

  event(e) {
    // Only a preview opened now pops the pane; replayed ones are in the Previews list.
    if (e.type === "preview" && e.id > Math.max(this.historyCursor, this.transcript.lastId)) this.onPreview?.(e);
    if (e.type === "workstream_deleted") return this.onDeleted?.(this.wsId);
    if (e.type === "branch_changed" && e.id > this.transcript.lastId) {
      this.transcript.lastId = e.id;
      return this.load({ overlap: false }).catch((err) => this.failed(err));
    }
    this.onEvent(e);
    this.transcript.apply(e);
    if (e.type === "watch") this.onWatch(e.watch);
    if (e.type === "tool_result" && e.name === "skill" && !e.is_error) {
      const wsId = this.wsId;
      api.describe(wsId).then((d) => wsId === this.wsId && this.showSkill(d.skill)).catch(() => {});
    }
    // Cancel names the turn it means, so a click that lands as that turn ends
    // cannot stop the queued turn that starts next.
    if (e.type === "state_change") this.turnId = BUSY.has(e.state) ? e.turn_id : null;
    if (/^(approve_request|approval_resolved|tool_result|tool_info|state_change|subagent)$/.test(e.type)) this.updatePending();
    if (/^(approve_request|tool_info|tool_result)$/.test(e.type)) this.transcript.setFound(this.transcript.found);
    // A step may have found tools (tool search, or the provider's own): counts and cards follow.
    if (e.type === "state_change") this.refreshTools();
  }

  async refreshTools() {
    const wsId = this.wsId;
    if (!wsId) return;
    const describe = await api.describe(wsId).catch((err) => this.failed(err));
    if (describe && wsId === this.wsId) this.showTools(describe);
  }

  // The header's tool count in words ("9 of 1008 tools") and the cards of tools tool search found.
  showTools(describe) {
    const tools = describe.tools;
    this.els.tools.hidden = !tools;
    if (!tools) return;
    this.els.tools.textContent = toolWords(tools);
    this.els.tools.title = tools.search
      ? `${tools.visible} of ${tools.total} tools are offered to the model; tool search (${tools.search}) finds the rest`
      : `all ${tools.total} tools are offered to the model`;
    this.transcript.setFound(describe.expanded_tools);
  }

  // The server sends `replay_truncated` and then what the log still holds. If that
  // starts right after what the page already shows there is no gap; otherwise re-read.
  truncated(e) {
    const covered = Math.max(this.transcript.lastId, this.historyCursor);
    if (e.oldest !== null && e.oldest !== undefined && e.oldest <= covered + 1) return;
    this.load({ overlap: false }).catch((err) => this.failed(err));
  }

  fatal(e) {
    if (e.status === 401) this.onUnauthorized();
    else this.transcript.note(null, "note-error", e.message || "The connection was refused.");
  }

  failed(err) {
    if (err && err.name === "UnauthorizedError") this.onUnauthorized();
  }

  setState(state) {
    this.state = state;
    this.paintState();
  }

  // What the header shows: a running turn with calls awaiting a decision here (its own, or its
  // sub-agents', which are decided from this page too) needs attention.
  paintState() {
    let state = this.state;
    if (state === "running" || state === "attention") state = this.pendingCount() ? "attention" : "running";
    if (state === this.shownState) return;
    this.shownState = state;
    this.els.state.dataset.state = state;
    this.els.state.textContent = state;
    const busy = BUSY.has(state);
    this.els.cancel.hidden = !busy;
    this.els.send.textContent = busy ? "Queue" : "Send";
    this.els.hint.replaceChildren(...hintFor(state));
    if (this.wsId) this.onStateOut(this.wsId, state);
  }

  pendingCount() {
    return this.transcript.pendingCards().length + this.elsewherePending();
  }

  updatePending() {
    const n = this.pendingCount();
    this.els.pendingBar.hidden = !n;
    this.els.pendingCount.textContent = n === 1 ? "1 call awaits a decision" : `${n} calls await a decision`;
    if (this.state) this.paintState();
  }

  decide(body) {
    return api.approve(this.wsId, body);
  }

  async decideAll(approved) {
    if (!this.pendingCount()) return;
    const feedback = this.transcript.pendingCards().map((c) => c.feedback.value.trim()).find(Boolean);
    await api.approve(this.wsId, { approved, feedback });
  }

  async send(message, attachments = []) {
    await api.send(this.wsId, message, attachments);
  }

  async cancel() {
    await api.cancel(this.wsId, this.turnId);
  }

  // A queued message, cancelled before it runs (its `cancelled` event marks it). A 409 means it
  // started and ended meanwhile: the transcript shows how.
  async withdraw(turnId) {
    await api.cancel(this.wsId, turnId).catch((err) => this.failed(err));
  }
}

// "14 tools", "8 of 14 tools": what the model is offered (the header's title says how).
export function toolWords(tools) {
  return tools.visible === tools.total ? `${tools.total} tools` : `${tools.visible} of ${tools.total} tools`;
}

// The line under the message box. The keyboard part is in a span of its own, which phone
// widths hide (style.css); a call awaiting a decision says how the keys reach it.
function hintFor(state) {
  const keys = (text) => h("span", { class: "keys-hint" }, text);
  if (state === "attention")
    return [keys("A call awaits your decision: y approves · n denies · a always approves (with the message box empty)")];
  if (BUSY.has(state)) return ["A turn is running: a message sent now is queued and runs after it."];
  return [keys("Enter to send · Shift+Enter for a new line · ? for shortcuts")];
}

// "host" is the one that reaches the host's own network (and its loopback services): said so.
export function networkLabel(network) {
  if (network === "host") return "network: host (the host's own network)";
  return network ? `network: ${network}` : null;
}
