// The open workstream's watches: a panel above the conversation listing each one (name, command,
// interval, polls, next poll) with a Cancel button, kept current by `watch` events.

import { api } from "./api.js";
import { h } from "./dom.js";

const ENDED = new Set(["fired", "exhausted", "cancelled"]);

export class WatchesPanel {
  constructor(els, { onError }) {
    Object.assign(this, { els, onError });
    this.wsId = null;
    this.watches = new Map();
    this.timer = setInterval(() => this.tick(), 1000);
  }

  async open(wsId) {
    this.wsId = wsId;
    this.watches.clear();
    this.render();
    try {
      const data = await api.watches(wsId);
      if (wsId !== this.wsId) return;
      for (const w of data.watches) this.watches.set(w.watch_id, w);
    } catch (err) {
      this.onError(err);
    }
    this.render();
  }

  close() {
    this.wsId = null;
    this.watches.clear();
    this.render();
  }

  // A replayed event may be older than what the list already shows: never go back in time.
  apply(watch) {
    if (!watch || watch.ws_id !== this.wsId) return;
    const known = this.watches.get(watch.watch_id);
    if (known && ENDED.has(known.status) && !ENDED.has(watch.status)) return;
    if (known && known.status === watch.status && watch.polls < known.polls) return;
    this.watches.set(watch.watch_id, watch);
    this.render();
  }

  async cancel(watch, button) {
    button.disabled = true;
    try {
      this.apply(await api.cancelWatch(this.wsId, watch.watch_id));
    } catch (err) {
      button.disabled = false;
      this.onError(err);
    }
  }

  active() {
    return [...this.watches.values()].filter((w) => w.status === "active");
  }

  render() {
    const active = this.active();
    this.els.root.hidden = !active.length;
    this.els.count.textContent = active.length === 1 ? "1 active watch" : `${active.length} active watches`;
    this.els.list.replaceChildren(...active.map((w) => this.row(w)));
  }

  row(w) {
    const button = h("button", { class: "btn btn-ghost btn-small watch-cancel", type: "button" }, "Cancel");
    button.addEventListener("click", () => this.cancel(w, button));
    return h(
      "li",
      { class: "watch", "data-watch-id": w.watch_id },
      h("span", { class: "watch-name" }, w.name),
      h("code", { class: "watch-command", title: w.command }, w.command),
      h("span", { class: "watch-every" }, `every ${w.poll_every}`),
      h("span", { class: "watch-polls" }, `${w.polls}/${w.max_polls} polls`),
      h("span", { class: "watch-next", "data-at": w.next_poll_at || "" }, nextPoll(w.next_poll_at)),
      button,
    );
  }

  tick() {
    for (const el of this.els.list.querySelectorAll(".watch-next")) el.textContent = nextPoll(el.dataset.at);
  }
}

// "next poll in 4m 10s", "next poll due" (beat's next pass takes it).
export function nextPoll(at) {
  if (!at) return "";
  const seconds = Math.round((Date.parse(at) - Date.now()) / 1000);
  if (seconds <= 0) return "next poll due";
  const h = Math.floor(seconds / 3600);
  const m = Math.floor((seconds % 3600) / 60);
  const s = seconds % 60;
  const parts = h ? [`${h}h`, `${m}m`] : m ? [`${m}m`, `${s}s`] : [`${s}s`];
  return `next poll in ${parts.join(" ")}`;
}
