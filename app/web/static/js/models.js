// The model picker: the configured chat models (GET /v1/api/models, read once per page) in a
// <select>, each with what it can do; "" is the service's default model.

import { api } from "./api.js";
import { h } from "./dom.js";

let listing = null;

export function loadModels() {
  listing ??= api.models().catch((err) => {
    listing = null;  // asked again next time
    throw err;
  });
  return listing;
}

// "vision · reasoning · 128k context": what a person choosing needs to know.
export function abilities(model) {
  return [
    model.health?.state === "degraded" && "degraded",
    model.vision && "vision",
    model.pdf && "PDFs",
    model.reasoning && "reasoning",
    model.web_search && "web search",
    model.context_window && `${Math.round(model.context_window / 1000)}k context`,
    model.tools ? null : "no tools",
  ]
    .filter(Boolean)
    .join(" · ");
}

// Fill `select` with the chat models, `chosen` (a name, or null for the default) selected.
export async function fillModelSelect(select, chosen) {
  const { models, default: fallback } = await loadModels();
  const options = [h("option", { value: "" }, `Default (${fallback})`)];
  for (const model of models.filter((m) => m.chat)) {
    const said = abilities(model);
    const down = model.health?.state === "degraded" ? ` (degraded: ${model.health.reason || "its server failed a check"})` : "";
    const title = `${model.provider_family || model.provider}: ${model.model}${down}`;
    options.push(h("option", { value: model.name, title }, said ? `${model.name} — ${said}` : model.name));
  }
  select.replaceChildren(...options);
  select.value = chosen || "";
  if (select.value !== (chosen || "")) {
    // a model no longer configured: shown as it is rather than silently replaced
    select.append(h("option", { value: chosen }, `${chosen} (not configured)`));
    select.value = chosen;
  }
}
