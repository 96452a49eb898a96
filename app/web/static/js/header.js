// The open workstream's header controls: rename it, and change its model between turns
// (PATCH /v1/api/workstreams/{id}; a 409 while a turn runs puts the picker back).

import { api } from "./api.js";
import { fillModelSelect } from "./models.js";

export class WorkstreamHeader {
  constructor(els, { onChanged, onError }) {
    Object.assign(this, { els, onChanged, onError });
    this.ws = null;
    els.rename.addEventListener("click", () => this.rename());
    els.model.addEventListener("change", () => this.changeModel());
  }

  async open(ws) {
    this.ws = ws;
    this.els.rename.hidden = false;
    this.els.model.hidden = false;
    await fillModelSelect(this.els.model, ws.model).catch((err) => this.onError(err));
  }

  close() {
    this.ws = null;
    this.els.rename.hidden = true;
    this.els.model.hidden = true;
  }

  // Changes made elsewhere (another tab, the titler) as the socket reports them.
  changed(e) {
    if (!this.ws) return;
    if ("name" in e && e.name) this.els.title.textContent = this.ws.name = e.name;
    if ("model" in e) this.els.model.value = this.ws.model = e.model || "";
  }

  async rename() {
    if (!this.ws) return;
    const name = await askName(this.els.title, this.ws.name);
    if (!name || name === this.ws.name) return;
    await this.patch({ name });
  }

  async changeModel() {
    if (!this.ws) return;
    const before = this.ws.model || "";
    const ok = await this.patch({ model: this.els.model.value });
    if (!ok) this.els.model.value = before;
  }

  async patch(body) {
    const wsId = this.ws.ws_id;
    try {
      const ws = await api.patch(wsId, body);
      if (this.ws?.ws_id !== wsId) return true;
      this.ws = ws;
      this.els.title.textContent = ws.name;
      this.els.hint.textContent = "model" in body ? `The next turn uses ${ws.model || "the default model"}.` : "";
      this.onChanged(ws);
      return true;
    } catch (err) {
      this.els.hint.textContent =
        err.status === 409 ? "The model can change once the running turn has ended." : `Not changed: ${err.message}`;
      this.onError(err);
      return false;
    }
  }
}

// An inline text box over `el` holding `current`; resolves to the new text (Enter or leaving
// it), or null (Escape). Used by the header and the sidebar alike.
export function askName(el, current) {
  return new Promise((resolve) => {
    const input = document.createElement("input");
    input.className = "name-edit";
    input.value = current;
    input.maxLength = 200;
    input.setAttribute("aria-label", "New name");
    const shown = el.style.display;
    el.style.display = "none";
    el.after(input);
    input.focus();
    input.select();
    let done = false;
    const finish = (value) => {
      if (done) return;
      done = true;
      input.remove();
      el.style.display = shown;
      resolve(value === null ? null : value.trim() || null);
    };
    input.addEventListener("keydown", (e) => {
      e.stopPropagation();  // y/n/a are letters here, not decisions
      if (e.key === "Enter") {
        e.preventDefault();
        finish(input.value);
      } else if (e.key === "Escape") {
        e.preventDefault();
        finish(null);
      }
    });
    input.addEventListener("click", (e) => e.stopPropagation());
    input.addEventListener("blur", () => finish(input.value));
  });
}
