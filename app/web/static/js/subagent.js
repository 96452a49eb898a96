// A sub-agent under its task_agent card: a collapsible panel with the child's state, its live
// answer and its own tool cards, decided from the parent's page. Built from the child's history
// and from its events as the parent's stream echoes them (`subagent` events), deduplicated by
// the child's own event ids and, like the transcript, by what its history already shows.

import { api } from "./api.js";
import { ToolCard, describeStoredCall } from "./cards.js";
import { h, throttled } from "./dom.js";
import { renderMarkdown } from "./markdown.js";

export class SubagentPanel {
  constructor(childWsId, { onDecide }) {
    this.childWsId = childWsId;
    this.onDecide = (body) => onDecide({ ...body, child_ws_id: childWsId });
    this.lastId = 0;
    this.steps = new Map();
    this.cards = new Map();
    this.state = h("span", { class: "badge", "data-state": "thinking" }, "starting");
    this.body = h("div", { class: "subagent-body" });
    this.el = h(
      "details",
      { class: "subagent", open: true, "data-child-ws-id": childWsId },
      h("summary", {}, h("span", { class: "subagent-title" }, "Sub-agent"), this.state),
      this.body,
    );
  }

  // The child's stored conversation and pending calls: what a reload must show.
  async load() {
    const [history, describe] = await Promise.all([api.history(this.childWsId), api.describe(this.childWsId)]);
    let n = 0;
    for (const m of history.messages) {
      if (m.role === "assistant") {
        const step = this.step(n++);
        step.stored = true;
        step.text = m.content || "";
        step.paint();
        for (const call of m.tool_calls || []) this.card(step.n, call.id).describe(describeStoredCall(call));
      } else if (m.role === "tool") {
        this.card(Math.max(0, n - 1), m.tool_call_id).result(m.content, m.is_error);
      }
    }
    for (const item of describe.pending_approvals || []) this.card(describe.turn ? describe.turn.step : 0, item.call_id).merge(item);
    this.setState(describe.state);
  }

  apply(e) {
    if (typeof e.id === "number") {
      if (e.id <= this.lastId) return;
      this.lastId = e.id;
    }
    const handler = HANDLERS[e.type];
    if (handler) handler.call(this, e);
  }

  setState(state) {
    this.state.dataset.state = state;
    this.state.textContent = state;
  }

  step(n) {
    let step = this.steps.get(n);
    if (!step) {
      const md = h("div", { class: "md" });
      const answer = h("div", { class: "msg msg-assistant", hidden: true }, md);
      const cards = h("div", { class: "cards" });
      const el = h("section", { class: "step", "data-step": String(n) }, answer, cards);
      step = { n, el, md, answer, cards, text: "", stored: false };
      step.paint = throttled(() => {
        step.answer.hidden = !step.text;
        step.md.replaceChildren(renderMarkdown(step.text));
      });
      this.steps.set(n, step);
      const later = [...this.steps.values()].filter((s) => s.n > n).sort((a, b) => a.n - b.n)[0];
      if (later) later.el.before(el);
      else this.body.append(el);
    }
    return step;
  }

  card(stepN, callId) {
    let card = this.cards.get(callId);
    if (!card) {
      card = new ToolCard(callId, { onDecide: this.onDecide });
      card.el.dataset.childWsId = this.childWsId;
      this.cards.set(callId, card);
      this.step(stepN).cards.append(card.el);
    }
    return card;
  }

  lastStep() {
    return Math.max(0, ...this.steps.keys());
  }

  note(cls, text) {
    this.body.append(h("div", { class: `note ${cls}` }, text));
  }
}

const HANDLERS = {
  state_change(e) {
    this.setState(e.state);
  },
  content(e) {
    const step = this.step(e.step ?? this.lastStep());
    if (step.stored) return;
    step.text += e.text || "";
    step.paint();
  },
  stream_end(e) {
    const step = this.step(e.step ?? this.lastStep());
    if (!step.stored && e.discard) {
      step.text = "";
      step.paint();
    }
  },
  tool_info(e) {
    for (const item of e.items || []) this.card(e.step ?? this.lastStep(), item.call_id).merge(item);
  },
  approve_request(e) {
    HANDLERS.tool_info.call(this, e);
  },
  approval_resolved(e) {
    for (const id of e.call_ids || []) this.card(this.lastStep(), id).resolve(e);
  },
  tool_output_chunk(e) {
    this.card(this.lastStep(), e.call_id).chunk(e.text || "");
  },
  tool_result(e) {
    const card = this.card(this.lastStep(), e.call_id);
    if (card.name.textContent === "tool") card.describe({ name: e.name, header: e.name });
    card.result(e.output, e.is_error);
  },
  cancelled() {
    this.note("note-warn", "Sub-agent cancelled.");
  },
  error(e) {
    this.note("note-error", e.message || "The sub-agent failed.");
  },
};
