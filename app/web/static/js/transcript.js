// The conversation of one workstream, built from the history API and from events.
//
// Every event handler is either idempotent or guarded by what the page already shows, so a
// replay that overlaps the history (or repeats itself) never doubles anything:
//   - events with an id at or below `lastId` are dropped (ids increase per workstream);
//   - `message` / `turn_queued` of a turn that already shows its user message are dropped;
//   - `content` / `reasoning` / `stream_end` of a step whose assistant message came from the
//     history are dropped (the n-th assistant message of a turn is its step n);
//   - cards are keyed by call_id; `tool_result` replaces the output, chunks after it are dropped.

import { ToolCard, cardOf, describeStoredCall } from "./cards.js";
import { copyButton, h, throttled } from "./dom.js";
import { renderMarkdown } from "./markdown.js";
import { SubagentPanel } from "./subagent.js";

export class Transcript {
  constructor(root, { onDecide, onState, onTruncated, onWithdraw, onEdit, onRetry, onFork, onRestore, onSummary, onThumb }) {
    Object.assign(this, { root, onDecide, onState, onTruncated, onWithdraw, onEdit, onRetry, onFork, onRestore, onSummary, onThumb });
    this.reset();
  }

  reset() {
    this.lastId = 0;
    this.heldShown = new Set();
    this.stateEvents = 0;
    this.turns = new Map();
    this.cards = new Map();
    this.found = new Set();
    this.panels = new Map();
    this.root.replaceChildren();
  }

  // -- history ---------------------------------------------------------------------------

  loadHistory(messages) {
    for (const m of messages) {
      if (m.role === "user" && m.origin === "watch" && !m.turn_id) {
        this.heldWatch(m.content || "");
        continue;
      }
      if (m.role === "summary") {
        this.summaryMarker(m.id, m.covers_count, m.turn_id);
        continue;
      }
      const turn = this.turn(m.turn_id);
      if (m.role === "user") this.storedUser(turn, m.content || "", m.origin, m.attachments);
      else if (m.role === "assistant") this.storedAssistant(turn, m);
      else if (m.role === "tool") this.storedResult(turn, m);
    }
  }

  storedResult(turn, m) {
    const card = this.card(turn, turn.lastStep, m.tool_call_id);
    card.result(m.content, m.is_error);
    if (m.decision) card.resolve({ ...m.decision, always: m.decision.how === "always" });
  }

  storedUser(turn, text, origin, attachments) {
    if (!turn.hasUser) return this.setUser(turn, text, false, origin, attachments);
    // A later user message in the same turn is approval feedback, stored after the results.
    turn.el.append(h("div", { class: "msg msg-user msg-feedback" }, h("div", { class: "bubble" }, text)));
  }

  storedAssistant(turn, m) {
    const step = this.step(turn, turn.storedSteps);
    turn.storedSteps += 1;
    step.stored = true;
    step.text = m.content || "";
    step.thinking = m.reasoning || "";
    step.usage = m.usage || null;
    step.streaming = false;
    this.paintStep(step);
    for (const call of m.tool_calls || []) {
      const card = this.card(turn, step.n, call.id);
      card.describe(describeStoredCall(call));
      if (call.child_ws_id) this.panel(card, call.child_ws_id, true);
    }
  }

  // Pending approvals from the workstream API: the approve_request may be older than the replay.
  loadPending(describe) {
    if (!describe.turn) return;
    const turn = this.turn(describe.turn.turn_id);
    for (const item of describe.pending_approvals || []) {
      if (item.child_ws_id && !item.parent_call_id) continue; // a coordinator's child: its panel
      if (item.child_ws_id) {
        const parent = this.card(turn, describe.turn.step, item.parent_call_id);
        const panel = this.panel(parent, item.child_ws_id);
        panel.card(panel.lastStep(), item.call_id).merge(item);
      } else this.card(turn, describe.turn.step, item.call_id).merge(item);
    }
  }

  // -- events ----------------------------------------------------------------------------

  apply(e) {
    if (e.type === "replay_truncated") return this.onTruncated(e);
    if (typeof e.id === "number") {
      if (e.id <= this.lastId) return;
      this.lastId = e.id;
    }
    const handler = HANDLERS[e.type];
    if (handler) handler.call(this, e);
  }

  // -- the model -------------------------------------------------------------------------

  turn(turnId) {
    const key = turnId || "-";
    let turn = this.turns.get(key);
    if (!turn) {
      const el = h("article", { class: "turn", "data-turn-id": key });
      turn = { id: key, el, hasUser: false, steps: new Map(), storedSteps: 0, lastStep: 0, userEl: null };
      this.turns.set(key, turn);
      this.root.append(el);
    }
    return turn;
  }

  setUser(turn, text, queued = false, origin = null, attachments = null) {
    turn.hasUser = !queued;
    turn.userText = text;
    const bubble = h("div", { class: "bubble" }, text);
    const watch = origin === "watch" ? " msg-watch" : "";
    const el = h("div", { class: `msg msg-user${watch}${queued ? " is-queued" : ""}` }, bubble);
    if (attachments?.length) el.append(h("div", { class: "attachments" }, ...attachments.map((a) => attachmentChip(a, this.onThumb))));
    if (watch) el.append(h("span", { class: "origin-tag" }, "from a watch"));
    if (queued) {
      const withdraw = h("button", { type: "button", class: "withdraw", title: "Cancel this message before it runs" }, "Cancel");
      withdraw.addEventListener("click", () => this.onWithdraw(turn.id));
      el.append(h("span", { class: "queued-tag" }, "queued ", withdraw));
    } else if (!watch && turn.id !== "-" && this.onEdit) el.append(this.actions(turn, bubble, text));
    if (turn.userEl) turn.userEl.replaceWith(el);
    else turn.el.prepend(el);
    turn.userEl = el;
  }

  // Edit, retry and fork from here (docs/branching.md): shown on hover; retry on the last turn only.
  actions(turn, bubble, text) {
    const button = (cls, label, title, onClick) => {
      const b = h("button", { type: "button", class: `msg-action ${cls}`, title }, label);
      b.addEventListener("click", onClick);
      return b;
    };
    const edit = button("action-edit", "Edit", "Send a new version of this message (this one is kept)", () => {
      const box = h("textarea", { class: "edit-box", rows: "3" });
      box.value = text;
      const save = button("edit-send", "Send", "Send this version", () => this.onEdit(turn.id, box.value));
      const cancel = button("edit-cancel", "Cancel", "Keep the message as it is", () => form.replaceWith(bubble));
      const note = h("span", { class: "edit-note" }, "The old version is kept; files the tools changed stay as they are.");
      const form = h("div", { class: "edit-form" }, box, h("div", { class: "edit-buttons" }, note, save, cancel));
      bubble.replaceWith(form);
      box.focus();
    });
    const retry = button("action-retry", "Retry", "Ask again (this answer is kept)", () => this.onRetry(turn.id));
    const fork = button("action-fork", "Fork", "A new workstream with the conversation up to the end of this turn", () =>
      this.onFork(turn.id),
    );
    const copy = copyButton(() => text, { title: "Copy this message", cls: "msg-action action-copy" });
    return h("span", { class: "msg-actions" }, copy, edit, retry, fork);
  }

  // Where a rewind, edit or retry left another version: after the turn holding `afterTurnId`
  // (at the top for none), a line saying so with a button that brings it back.
  branchMarker(branch, afterTurnId) {
    const restore = h("button", { type: "button", class: "branch-restore", title: "Bring that version back (this one is kept)" }, "Restore");
    restore.addEventListener("click", () => this.onRestore(branch.id));
    const count = `${branch.message_count} message${branch.message_count === 1 ? "" : "s"}`;
    const el = h(
      "div",
      { class: "branch-marker", "data-branch-id": branch.id },
      h("span", { class: "branch-text" }, `Another version continues here (${branch.reason}, ${count}): "${branch.preview}"`),
      restore,
    );
    const after = afterTurnId ? this.turns.get(afterTurnId) : null;
    if (after) after.el.after(el);
    else this.root.prepend(el);
  }

  // A compaction (docs/compaction.md): "N earlier messages summarised", which opens on the
  // summary and the messages it stands for (read when opened: `onSummary`); all of it text.
  summaryMarker(messageId, count, turnId) {
    if (this.root.querySelector(`.compaction-marker[data-message-id="${Number(messageId)}"]`)) return;
    const body = h("div", { class: "compaction-body" });
    const el = h(
      "details",
      { class: "compaction-marker", "data-message-id": String(Number(messageId)) },
      h("summary", {}, `${count} earlier message${count === 1 ? "" : "s"} summarised`),
      body,
    );
    el.addEventListener("toggle", () => {
      if (!el.open || el.dataset.loaded) return;
      el.dataset.loaded = "1";
      this.onSummary(messageId).then(({ summary, covered }) => {
        const lines = covered.map((m) => h("div", { class: `compaction-original role-${m.role}` }, `${m.role}: ${typeof m.content === "string" ? m.content : JSON.stringify(m.content)}`));
        body.replaceChildren(h("div", { class: "compaction-summary" }, summary), h("div", { class: "compaction-originals" }, ...lines));
      }).catch(() => { delete el.dataset.loaded; });
    });
    const turn = turnId ? this.turns.get(turnId) : null;
    if (turn) turn.el.append(el);
    else this.root.append(el);
  }

  // A watch's result the depth guard kept from starting a turn: shown where it arrived, once.
  heldWatch(text) {
    if (this.heldShown.has(text)) return;
    this.heldShown.add(text);
    const el = h(
      "div",
      { class: "msg msg-user msg-watch is-held" },
      h("div", { class: "bubble" }, text),
      h("span", { class: "origin-tag" }, "from a watch · started no turn (too many in a row)"),
    );
    this.root.append(h("article", { class: "turn" }, el));
    this.keepBottom();
  }

  step(turn, n) {
    let step = turn.steps.get(n);
    if (!step) {
      const reasoningText = h("div", { class: "reasoning-text" });
      const reasoning = h("details", { class: "reasoning", hidden: true }, h("summary", {}, "Reasoning"), reasoningText);
      const md = h("div", { class: "md" });
      const copy = copyButton(() => step.text, { title: "Copy this answer (as Markdown)", cls: "msg-copy" });
      const answer = h("div", { class: "msg msg-assistant", hidden: true }, md, copy);
      const cards = h("div", { class: "cards" });
      const usageEl = h("div", { class: "usage", hidden: true });
      // The usage line closes its step: under the answer and the calls it paid for, never
      // right under the question when the step's first output is a tool call.
      const el = h("section", { class: "step", "data-step": String(n) }, reasoning, answer, cards, usageEl);
      step = { n, el, reasoning, reasoningText, answer, md, cards, usageEl, usage: null, text: "", thinking: "", stored: false, streaming: true };
      step.paint = throttled(() => this.renderStep(step));
      turn.steps.set(n, step);
      turn.lastStep = Math.max(turn.lastStep, n);
      turn.el.append(el);
    }
    return step;
  }

  paintStep(step) {
    step.paint();
  }

  renderStep(step) {
    const stick = this.isNearBottom();
    step.answer.hidden = !step.text;
    step.answer.classList.toggle("is-streaming", step.streaming && Boolean(step.text));
    step.md.replaceChildren(renderMarkdown(step.text));
    step.reasoning.hidden = !step.thinking;
    step.reasoningText.textContent = step.thinking;
    step.usageEl.hidden = !step.usage;
    step.usageEl.textContent = step.usage ? describeUsage(step.usage) : "";
    if (stick) this.scrollToBottom();
  }

  // The tools tool search has found for this workstream: their cards say so.
  setFound(names) {
    this.found = new Set(names || []);
    for (const card of this.cards.values()) card.setFound(this.found.has(card.name.textContent));
  }

  card(turn, stepN, callId) {
    let card = this.cards.get(callId);
    if (!card) {
      card = new ToolCard(callId, { onDecide: this.onDecide });
      this.cards.set(callId, card);
      this.step(turn, stepN).cards.append(card.el);
      this.keepBottom();
    }
    return card;
  }

  // The sub-agent panel under a task_agent card; `load`: fill it from the child's history.
  panel(card, childWsId, load = false) {
    let panel = this.panels.get(childWsId);
    if (!panel) {
      panel = new SubagentPanel(childWsId, { onDecide: this.onDecide });
      this.panels.set(childWsId, panel);
      card.preview.after(panel.el);
      if (load) panel.load().catch((err) => console.warn(err));
    }
    return panel;
  }

  note(turnId, cls, text) {
    this.turn(turnId).el.append(h("div", { class: `note ${cls}` }, text));
    this.keepBottom();
  }

  pendingCards() {
    return [...this.root.querySelectorAll(".card.is-pending")].map(cardOf);
  }

  isNearBottom() {
    const s = this.root;
    return s.scrollHeight - s.scrollTop - s.clientHeight < 120;
  }

  scrollToBottom() {
    this.root.scrollTop = this.root.scrollHeight;
  }

  // Opening a workstream: stay at its newest message while what was just loaded finishes
  // painting (answers render a frame later, sub-agent panels and previews load after), until
  // the person scrolls or `ms` pass.
  settleAtBottom(ms = 1500) {
    const until = performance.now() + ms;
    const inputs = ["wheel", "touchstart", "pointerdown", "keydown"];
    let stopped = false;
    const stop = () => {
      stopped = true;
      for (const type of inputs) this.root.removeEventListener(type, stop);
    };
    for (const type of inputs) this.root.addEventListener(type, stop, { passive: true });
    const again = () => {
      if (stopped) return;
      this.scrollToBottom();
      if (performance.now() < until) requestAnimationFrame(again);
      else stop();
    };
    again();
  }

  keepBottom() {
    if (this.isNearBottom()) requestAnimationFrame(() => this.scrollToBottom());
  }
}

function streamed(field) {
  return function (e) {
    const turn = this.turn(e.turn_id);
    const step = this.step(turn, e.step ?? turn.lastStep);
    if (step.stored) return;
    step[field] += e.text || "";
    step.streaming = true;
    this.paintStep(step);
  };
}

const HANDLERS = {
  compaction_done(e) {
    if (!e.error && e.message_id) this.summaryMarker(e.message_id, e.count, e.turn_id);
  },
  state_change(e) {
    this.stateEvents += 1;
    this.onState(e.state);
    if (e.state === "idle" || e.state === "error") {
      const turn = this.turns.get(e.turn_id || "-");
      for (const step of turn ? turn.steps.values() : []) {
        step.streaming = false;
        this.paintStep(step);
      }
    }
  },
  message(e) {
    if (e.origin === "watch" && !e.turn_id) return this.heldWatch(e.content || "");
    const turn = this.turn(e.turn_id);
    if (!turn.hasUser) this.setUser(turn, e.content || "", false, e.origin, e.attachments);
    this.keepBottom();
  },
  turn_queued(e) {
    const turn = this.turn(e.turn_id);
    if (!turn.hasUser) this.setUser(turn, e.message || "", true, e.origin, e.attachments);
    this.keepBottom();
  },
  content: streamed("text"),
  reasoning: streamed("thinking"),
  stream_end(e) {
    const step = this.step(this.turn(e.turn_id), e.step);
    if (step.stored) return;
    if (e.discard) {
      step.text = "";
      step.thinking = "";
      step.el.append(h("div", { class: "note note-warn" }, e.reason || "The answer is being generated again."));
    } else {
      step.streaming = false;
      if (e.usage) step.usage = e.usage;
    }
    this.paintStep(step);
  },
  tool_info(e) {
    const turn = this.turn(e.turn_id);
    for (const item of e.items || []) this.card(turn, e.step, item.call_id).merge(item);
  },
  approve_request(e) {
    HANDLERS.tool_info.call(this, e);
  },
  verdict(e) {
    const turn = this.turn(e.turn_id);
    this.card(turn, turn.lastStep, e.call_id).setVerdict(e.verdict || {});
  },
  output_warning(e) {
    if (!e.call_id) return; // a watch's report: its message says so
    const turn = this.turn(e.turn_id);
    this.card(turn, turn.lastStep, e.call_id).setGuard(e);
  },
  approval_resolved(e) {
    const turn = this.turn(e.turn_id);
    for (const id of e.call_ids || []) this.card(turn, turn.lastStep, id).resolve(e);
  },
  tool_output_chunk(e) {
    const turn = this.turn(e.turn_id);
    this.card(turn, turn.lastStep, e.call_id).chunk(e.text || "");
  },
  tool_result(e) {
    const turn = this.turn(e.turn_id);
    const card = this.card(turn, turn.lastStep, e.call_id);
    if (card.name.textContent === "tool") card.describe({ name: e.name, header: e.name });
    card.result(e.output, e.is_error);
  },
  subagent(e) {
    if (!e.call_id) return; // a coordinator's child: its panel shows it (coordinator.js)
    const turn = this.turn(e.turn_id);
    const card = this.card(turn, turn.lastStep, e.call_id);
    this.panel(card, e.child_ws_id).apply(e.event || {});
  },
  cancelled(e) {
    const turn = this.turn(e.turn_id);
    if (e.queued && turn.userEl) {
      // Withdrawn before it started: it never reached the model, and no other event follows.
      turn.userEl.classList.replace("is-queued", "is-withdrawn");
      turn.userEl.querySelector(".queued-tag")?.replaceChildren("cancelled before it ran");
      return;
    }
    this.note(e.turn_id, "note-warn", "Turn cancelled.");
  },
  error(e) {
    this.note(e.turn_id, "note-error", e.message || "The turn failed.");
  },
};

// "1,234 in · 56 out tokens (1,000 from cache)": what one model step cost, as the provider
// reported it; the prompt cache's reads and writes when it reported any.
export function describeUsage(usage) {
  const count = (n) => Number(n || 0).toLocaleString("en-US");
  const cache = [];
  if (usage.cache_read_input_tokens) cache.push(`${count(usage.cache_read_input_tokens)} from cache`);
  if (usage.cache_creation_input_tokens) cache.push(`${count(usage.cache_creation_input_tokens)} written to cache`);
  const cached = cache.length ? ` (${cache.join(", ")})` : "";
  return `${count(usage.input_tokens)} in · ${count(usage.output_tokens)} out tokens${cached}`;
}

// A file sent with a message: its name and size as text, and a thumbnail when the service serves
// it as an image (`thumb` resolves to a blob: URL, or null). `remove`: a button that takes it back.
export function attachmentChip(a, thumb, remove = null) {
  const chip = h(
    "span",
    { class: "attachment-chip", title: `${a.filename} (${a.media_type}, ${a.size} bytes)` },
    h("span", { class: "attachment-name" }, a.filename),
    h("span", { class: "attachment-size" }, sizeWords(a.size)),
  );
  if (remove) {
    const button = h("button", { type: "button", class: "attachment-remove", title: `Do not send ${a.filename}`, "aria-label": `Remove ${a.filename}` }, "×");
    button.addEventListener("click", remove);
    chip.append(button);
  }
  if (thumb && /^image\//.test(a.media_type || "")) {
    thumb(a.attachment_id)
      .then((url) => {
        if (!url) return;
        const img = h("img", { class: "attachment-thumb", alt: a.filename, src: url });
        img.addEventListener("load", () => URL.revokeObjectURL(url), { once: true });
        chip.prepend(img);
      })
      .catch(() => {});
  }
  return chip;
}

function sizeWords(bytes) {
  if (bytes >= 1 << 20) return `${(bytes / (1 << 20)).toFixed(1)} MB`;
  if (bytes >= 1 << 10) return `${Math.round(bytes / (1 << 10))} KB`;
  return `${bytes} B`;
}
