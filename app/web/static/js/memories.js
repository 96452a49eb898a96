// The memories panel: what the agent has saved (the memory tool), searchable, each deletable.

import { api } from "./api.js";
import { h, removeButton } from "./dom.js";

export function bindMemoriesPanel(els, { onError }) {
  let query = "";

  async function refresh() {
    let memories;
    try {
      memories = await api.memories(query);
    } catch (err) {
      els.list.replaceChildren(h("li", { class: "memory-none" }, `Cannot load memories: ${err.message}`));
      return onError(err);
    }
    const rows = memories.map((m) => row(m));
    if (!rows.length) rows.push(h("li", { class: "memory-none" }, query ? "No memory matches." : "No memories saved yet."));
    els.list.replaceChildren(...rows);
  }

  function row(m) {
    const label = { class: "btn btn-ghost btn-small memory-delete", "aria-label": `Delete memory ${m.name}` };
    const remove = removeButton("Delete", label, () => api.deleteMemory(m.id), refresh, onError);
    return h(
      "li",
      { class: "memory", "data-memory-id": m.id, "data-name": m.name },
      h(
        "div",
        { class: "memory-head" },
        h("span", { class: "memory-name" }, m.name),
        h("span", { class: "memory-tag" }, m.type),
        h("span", { class: "memory-tag" }, m.scope === "workstream" ? `workstream ${m.ws_id.slice(0, 6)}` : m.scope),
        h("span", { class: "spacer" }),
        remove,
      ),
      m.description ? h("div", { class: "memory-desc" }, m.description) : null,
      h("div", { class: "memory-content" }, m.content),
      h("div", { class: "memory-when" }, `updated ${new Date(m.updated_at).toLocaleString()}`),
    );
  }

  els.openButton.addEventListener("click", () => {
    els.dialog.hidden = false;
    els.search.focus();
    refresh();
  });
  els.close.addEventListener("click", () => (els.dialog.hidden = true));
  let timer = null;
  els.search.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(() => {
      query = els.search.value.trim();
      refresh();
    }, 200);
  });
  return { refresh };
}
