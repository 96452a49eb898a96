// The channels panel: where the notify tool reaches the signed-in user (Discord, a JSON webhook,
// ntfy). Everything the server sends is put in as text; targets come back redacted.

import { api, ApiError } from "./api.js";
import { h, removeButton } from "./dom.js";

// What the form's one target field is, per choice: the body field and a hint.
const KINDS = {
  "discord-webhook": { type: "discord", field: "webhook_url", hint: "https://discord.com/api/webhooks/…" },
  "discord-bot": { type: "discord", field: "channel_id", hint: "a Discord channel id, e.g. 123456789012345678" },
  webhook: { type: "webhook", field: "url", hint: "https://example.com/hooks/…" },
  ntfy: { type: "ntfy", field: "topic", hint: "an ntfy topic" },
};

export function bindChannelsPanel(els, { onError }) {
  async function refresh() {
    let channels;
    try {
      channels = await api.channels();
    } catch (err) {
      els.list.replaceChildren(h("li", { class: "memory-none" }, `Cannot load channels: ${err.message}`));
      return onError(err);
    }
    const rows = channels.map((c) => row(c));
    if (!rows.length) rows.push(h("li", { class: "memory-none" }, "No channels linked yet."));
    els.list.replaceChildren(...rows);
  }

  function row(c) {
    const name = c.label || c.channel_type;
    const label = { "aria-label": `Remove channel ${name}` };
    const remove = removeButton("Remove", label, () => api.unlinkChannel(c.id), refresh, onError);
    return h(
      "li",
      { class: "memory channel", "data-channel-id": c.id },
      h(
        "div",
        { class: "memory-head" },
        h("span", { class: "memory-name" }, name),
        h("span", { class: "memory-tag" }, c.channel_type),
        h("span", { class: "spacer" }),
        remove,
      ),
      h("div", { class: "channel-target" }, c.target),
    );
  }

  function hint() {
    els.target.placeholder = KINDS[els.kind.value].hint;
  }

  els.kind.addEventListener("change", hint);
  els.form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const kind = KINDS[els.kind.value];
    const body = { channel_type: kind.type, [kind.field]: els.target.value.trim() };
    if (els.label.value.trim()) body.label = els.label.value.trim();
    els.error.textContent = "";
    try {
      await api.linkChannel(body);
    } catch (err) {
      if (err instanceof ApiError && err.status === 400) {
        els.error.textContent = err.message;
        return;
      }
      return onError(err);
    }
    els.target.value = "";
    els.label.value = "";
    refresh();
  });
  els.openButton.addEventListener("click", () => {
    els.dialog.hidden = false;
    els.error.textContent = "";
    hint();
    els.target.focus();
    refresh();
  });
  els.close.addEventListener("click", () => (els.dialog.hidden = true));
  return { refresh };
}
