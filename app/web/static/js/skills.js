// The skills page: every skill with where it comes from (origin: added here, imported from a
// file, or an MCP server's prompt, read-only), its risk and activation; an admin turns one on or
// off. Everything is shown as text.

import { api } from "./api.js";
import { h } from "./dom.js";

const ORIGINS = { manual: "written here", mcp: "from MCP" };

export function bindSkillsPanel(els, { onError }) {
  let filter = "";

  async function refresh() {
    let skills;
    try {
      skills = await api.skills();
    } catch (err) {
      els.list.replaceChildren(h("li", { class: "memory-none" }, `Cannot load skills: ${err.message}`));
      return onError(err);
    }
    const shown = skills.filter((s) => !filter || `${s.name} ${s.description} ${s.tags.join(" ")}`.toLowerCase().includes(filter));
    const rows = shown.map(row);
    if (!rows.length) rows.push(h("li", { class: "memory-none" }, filter ? "No skill matches." : "No skills yet."));
    els.list.replaceChildren(...rows);
  }

  function row(s) {
    const origin = s.mcp_server ? `MCP ${s.mcp_server}` : ORIGINS[s.origin] || s.origin;
    const toggle = s.readonly
      ? h("span", { class: "memory-tag skill-readonly", title: "An MCP server's prompt: change it there" }, "read-only")
      : h("button", { class: "btn btn-ghost btn-small skill-toggle", type: "button" }, s.enabled ? "Disable" : "Enable");
    if (!s.readonly) {
      toggle.addEventListener("click", async () => {
        try {
          await api.setSkillEnabled(s.name, !s.enabled);
        } catch (err) {
          onError(err);
        }
        refresh();
      });
    }
    return h(
      "li",
      { class: "memory skill", "data-skill": s.name, "data-enabled": String(s.enabled) },
      h(
        "div",
        { class: "memory-head" },
        h("span", { class: "memory-name" }, s.name),
        h("span", { class: "memory-tag skill-origin" }, origin),
        h("span", { class: "memory-tag" }, `${s.risk_level} risk`),
        s.activation === "default" ? h("span", { class: "memory-tag" }, "default") : null,
        s.enabled ? null : h("span", { class: "memory-tag" }, "disabled"),
        h("span", { class: "spacer" }),
        toggle,
      ),
      s.description ? h("div", { class: "memory-desc" }, s.description) : null,
      s.tags.length ? h("div", { class: "memory-when" }, s.tags.join(" · ")) : null,
    );
  }

  els.openButton.addEventListener("click", () => {
    els.dialog.hidden = false;
    els.search.focus();
    refresh();
  });
  els.close.addEventListener("click", () => (els.dialog.hidden = true));
  els.search.addEventListener("input", () => {
    filter = els.search.value.trim().toLowerCase();
    refresh();
  });
  return { refresh };
}
