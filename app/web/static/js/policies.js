// The tool policies page (admins): the rules that allow, deny or make a person decide tool calls,
// by tool and command glob, for everyone, one user or one group's members (docs/policies.md);
// add one, delete one.
// Patterns and reasons are put in as text.

import { api, ApiError } from "./api.js";
import { h, removeButton } from "./dom.js";

export function bindPoliciesPanel(els, { onError }) {
  async function refresh() {
    let rules;
    try {
      rules = await api.policies();
    } catch (err) {
      els.list.replaceChildren(h("li", { class: "memory-none" }, `Cannot load the rules: ${err.message}`));
      return onError(err);
    }
    const rows = rules.map(row);
    if (!rows.length) rows.push(h("li", { class: "memory-none" }, "No rules: calls go as each workstream says."));
    els.list.replaceChildren(...rows);
  }

  function row(r) {
    const label = { "aria-label": `Delete rule ${r.effect} ${r.tool}` };
    const remove = removeButton("Delete", label, () => api.deletePolicy(r.id), refresh, onError);
    return h(
      "li",
      { class: "memory policy", "data-policy-id": r.id, "data-effect": r.effect },
      h(
        "div",
        { class: "memory-head" },
        h("span", { class: "memory-tag policy-effect" }, r.effect),
        h("span", { class: "memory-name policy-tool" }, r.tool),
        r.command ? h("code", { class: "policy-command" }, r.command) : null,
        h("span", { class: "memory-tag policy-user" }, r.user ? `user ${r.user}` : r.group ? `group ${r.group}` : "everyone"),
        h("span", { class: "spacer" }),
        remove,
      ),
      r.reason ? h("div", { class: "memory-desc policy-reason" }, r.reason) : null,
    );
  }

  els.form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const body = { effect: els.effect.value, tool: els.tool.value.trim() };
    for (const [key, input] of [["command", els.command], ["user", els.user], ["group", els.group], ["reason", els.reason]]) {
      if (input.value.trim()) body[key] = input.value.trim();
    }
    els.error.textContent = "";
    try {
      await api.addPolicy(body);
    } catch (err) {
      if (err instanceof ApiError && [400, 409, 422].includes(err.status)) {
        els.error.textContent = err.message;
        return;
      }
      return onError(err);
    }
    for (const input of [els.tool, els.command, els.user, els.group, els.reason]) input.value = "";
    refresh();
  });
  els.openButton.addEventListener("click", () => {
    els.dialog.hidden = false;
    els.error.textContent = "";
    els.tool.focus();
    refresh();
  });
  els.close.addEventListener("click", () => (els.dialog.hidden = true));
  return { refresh };
}
