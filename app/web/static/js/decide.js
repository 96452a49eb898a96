// A pushed approval link (docs/notify.md#approvals-pushed-out), opened as #decide?ws=..&sig=..:
// the calls it decides, as text, and Approve / Deny with feedback. No sign-in: the link's
// signature is the permission, and it decides those calls only, as the workstream's owner.

import { verdictLine } from "./cards.js";
import { h } from "./dom.js";

const $ = (id) => document.getElementById(id);

export function isDecideLink() {
  return location.hash.startsWith("#decide?");
}

async function call(method, url, body) {
  const response = await fetch(url, {
    method,
    headers: body ? { "Content-Type": "application/json" } : {},
    body: body ? JSON.stringify(body) : undefined,
  });
  const data = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(data.error || `${response.status} ${response.statusText}`);
  return data;
}

function item(i) {
  const verdict = i.verdict ? verdictLine(i.verdict) : null;
  return h(
    "div",
    { class: "card", "data-call-id": i.call_id },
    h("div", { class: "card-head" }, h("span", { class: "tool-name" }, i.func_name), h("code", { class: "card-header" }, i.header || i.func_name)),
    i.preview ? h("pre", { class: "card-preview" }, i.preview) : null,
    verdict,
  );
}

export async function showDecide() {
  const params = new URLSearchParams(location.hash.slice("#decide?".length));
  const wsId = params.get("ws") || "";
  params.delete("ws");
  const url = `/v1/hooks/approvals/${encodeURIComponent(wsId)}?${params}`;
  const status = $("decide-status");
  const buttons = [$("decide-approve"), $("decide-deny")];
  for (const id of ["login", "app"]) $(id).hidden = true; // the decision alone: no sign-in needed
  $("decide").hidden = false;
  const settle = (text, done = false) => {
    status.textContent = text;
    buttons.forEach((b) => (b.disabled = done));
  };
  try {
    const shown = await call("GET", url);
    $("decide-title").textContent = `${shown.name}: approval needed`;
    $("decide-items").replaceChildren(...shown.items.map(item));
    settle(`This link decides these calls until ${new Date(shown.expires_at * 1000).toLocaleString()}.`);
  } catch (err) {
    settle(`This link cannot decide anything: ${err.message}`, true);
    return;
  }
  const decide = async (approved) => {
    buttons.forEach((b) => (b.disabled = true));
    const feedback = $("decide-feedback").value.trim() || undefined;
    try {
      await call("POST", url, { approved, feedback });
      settle(approved ? "Approved. The agent goes on." : "Denied. The agent is told.", true);
    } catch (err) {
      settle(`Not decided: ${err.message}`, true);
    }
  };
  // Assigned, not added: a second link opened in this tab replaces the first one's handlers.
  $("decide-approve").onclick = () => decide(true);
  $("decide-deny").onclick = () => decide(false);
}
