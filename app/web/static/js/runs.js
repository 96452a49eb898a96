// The Runs and Schedules page: the caller's runs (status, how the prompt starts, times; open the
// run's workstream, cancel one still going) and schedules (when they fire next; pause, resume,
// delete; a form for a new one that shows the API's own message when it is refused).

import { api, ApiError } from "./api.js";
import { h } from "./dom.js";

const GOING = new Set(["queued", "running", "awaiting_approval"]);
const STATUS_WORDS = {
  queued: "queued",
  running: "running",
  awaiting_approval: "waiting for approval",
  succeeded: "succeeded",
  failed: "failed",
  cancelled: "cancelled",
  timed_out: "timed out",
};
const PROMPT_CHARS = 120;

const when = (iso) => (iso ? new Date(iso).toLocaleString() : "");
const clip = (text) => (text.length > PROMPT_CHARS ? `${text.slice(0, PROMPT_CHARS)}…` : text);

function button(text, label, onClick) {
  const b = h("button", { class: "btn btn-ghost btn-small", type: "button", "aria-label": label }, text);
  b.addEventListener("click", async () => {
    b.disabled = true;
    try {
      await onClick();
    } finally {
      b.disabled = false;
    }
  });
  return b;
}

export function bindRunsPanel(els, { onError, onOpen }) {
  async function refresh() {
    await Promise.all([refreshRuns(), refreshSchedules()]);
  }

  async function refreshRuns() {
    let runs;
    try {
      runs = await api.runs();
    } catch (err) {
      els.runs.replaceChildren(h("li", { class: "memory-none" }, `Cannot load runs: ${err.message}`));
      return onError(err);
    }
    const rows = runs.map(runRow);
    if (!rows.length) rows.push(h("li", { class: "memory-none" }, "No runs yet. A run is one job started by the API, a schedule or a trigger."));
    els.runs.replaceChildren(...rows);
  }

  function runRow(run) {
    const t = run.timings || { created_at: run.created_at };
    const times = [`started ${when(t.created_at)}`, t.ended_at ? `ended ${when(t.ended_at)}` : null].filter(Boolean).join(" · ");
    const open = button("Open", `Open the workstream of run ${run.run_id}`, async () => {
      els.dialog.hidden = true;
      await onOpen(run.ws_id);
    });
    const cancel = GOING.has(run.status)
      ? button("Cancel", `Cancel run ${run.run_id}`, () => act(() => api.cancelRun(run.run_id)))
      : null;
    return h(
      "li",
      { class: "memory run-row", "data-run-id": run.run_id, "data-status": run.status },
      h(
        "div",
        { class: "memory-head" },
        h("span", { class: "run-status", "data-status": run.status }, STATUS_WORDS[run.status] || run.status),
        h("span", { class: "run-prompt" }, clip(run.prompt || "")),
        h("span", { class: "spacer" }),
        open,
        cancel,
      ),
      h("div", { class: "memory-when" }, times),
      run.error ? h("div", { class: "memory-desc run-error" }, run.error) : null,
    );
  }

  async function refreshSchedules() {
    let schedules;
    try {
      schedules = await api.schedules();
    } catch (err) {
      els.schedules.replaceChildren(h("li", { class: "memory-none" }, `Cannot load schedules: ${err.message}`));
      return onError(err);
    }
    const rows = schedules.map(scheduleRow);
    if (!rows.length) rows.push(h("li", { class: "memory-none" }, "No schedules."));
    els.schedules.replaceChildren(...rows);
  }

  function scheduleRow(s) {
    const rule = s.cron ? `cron ${s.cron}` : `every ${describeSeconds(s.every)}`;
    const next = s.paused
      ? "paused: fires no more until resumed"
      : `next: ${s.next_fire_times.slice(0, 3).map(when).join(", ") || "none"}`;
    const id = s.schedule_id;
    const toggle = button(s.paused ? "Resume" : "Pause", `${s.paused ? "Resume" : "Pause"} schedule ${id}`, () =>
      act(() => api.pauseSchedule(id, !s.paused)),
    );
    const remove = button("Delete", `Delete schedule ${id}`, () => {
      if (!confirm("Delete this schedule? The runs it started stay.")) return null;
      return act(() => api.deleteSchedule(id));
    });
    return h(
      "li",
      { class: `memory schedule-row${s.paused ? " is-paused" : ""}`, "data-schedule-id": id },
      h(
        "div",
        { class: "memory-head" },
        h("span", { class: "memory-name" }, rule),
        h("span", { class: "memory-tag" }, s.timezone),
        h("span", { class: "spacer" }),
        toggle,
        remove,
      ),
      h("div", { class: "memory-desc" }, clip(s.prompt || "")),
      h("div", { class: "memory-when schedule-next" }, next),
    );
  }

  async function act(change) {
    try {
      await change();
    } catch (err) {
      if (!(err instanceof ApiError) || err.status === 401) return onError(err);
      els.error.textContent = err.message; // a run that ended meanwhile (409), say
    }
    await refresh();
  }

  els.kind.addEventListener("change", () => {
    const cron = els.kind.value === "cron";
    els.when.placeholder = cron ? "30 9 * * 1-5" : "seconds, e.g. 3600";
    els.when.inputMode = cron ? "text" : "numeric";
  });
  els.form.addEventListener("submit", async (e) => {
    e.preventDefault();
    els.error.textContent = "";
    const value = els.when.value.trim();
    const body = { prompt: els.prompt.value, timezone: els.timezone.value.trim() || "UTC" };
    // `every` is a number of seconds; what is not one goes as typed, for the API to name.
    if (els.kind.value === "cron") body.cron = value;
    else body.every = /^[0-9]+$/.test(value) ? Number(value) : value;
    try {
      await api.createSchedule(body);
    } catch (err) {
      if (!(err instanceof ApiError) || err.status === 401) return onError(err);
      els.error.textContent = err.message;
      return;
    }
    els.when.value = "";
    els.prompt.value = "";
    refreshSchedules();
  });
  els.openButton.addEventListener("click", () => {
    els.dialog.hidden = false;
    els.error.textContent = "";
    if (!els.timezone.value) els.timezone.value = Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
    refresh().catch(onError);
  });
  els.refresh.addEventListener("click", () => refresh().catch(onError));
  els.close.addEventListener("click", () => (els.dialog.hidden = true));
  return { refresh };
}

// 3600 -> "1 h", 90 -> "90 s": an interval as a person reads it.
export function describeSeconds(s) {
  if (s % 86400 === 0) return `${s / 86400} d`;
  if (s % 3600 === 0) return `${s / 3600} h`;
  if (s % 60 === 0) return `${s / 60} min`;
  return `${s} s`;
}
