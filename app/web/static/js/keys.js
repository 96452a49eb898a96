// Keyboard shortcuts (the help dialog lists them): decisions act on the focused card, or on
// the first pending one when no card has focus.

const TYPING = new Set(["INPUT", "TEXTAREA", "SELECT"]);

export function bindKeys({ view, messageBox, dialogs, showHelp }) {
  document.addEventListener("keydown", (e) => {
    const open = dialogs.find((d) => !d.hidden);
    if (e.key === "Escape") {
      if (open && open.id !== "login") open.hidden = true;
      else if (TYPING.has(document.activeElement?.tagName)) document.activeElement.blur();
      return;
    }
    if (open || e.ctrlKey || e.metaKey || e.altKey || TYPING.has(e.target.tagName)) return;
    const action = ACTIONS[e.key];
    if (!action || ((e.key === "Y" || e.key === "N") && !e.shiftKey)) return;  // not Caps Lock
    e.preventDefault();
    action({ view, messageBox, showHelp });
  });
}

function target(view) {
  const pending = view.transcript.pendingCards();
  const focused = document.activeElement && document.activeElement.closest(".card");
  return pending.find((c) => c.el === focused) || pending[0];
}

function move(view, by) {
  const pending = view.transcript.pendingCards();
  if (!pending.length) return;
  const at = pending.indexOf(target(view));
  const next = pending[(at + by + pending.length) % pending.length];
  next.el.focus();
  next.el.scrollIntoView({ block: "nearest" });
}

const ACTIONS = {
  y: ({ view }) => target(view)?.decide(true),
  n: ({ view }) => target(view)?.decide(false),
  a: ({ view }) => target(view)?.decide(true, true),
  f: ({ view }) => target(view)?.feedback.focus(),
  j: ({ view }) => move(view, 1),
  k: ({ view }) => move(view, -1),
  Y: ({ view }) => view.decideAll(true),
  N: ({ view }) => view.decideAll(false),
  "/": ({ messageBox }) => messageBox.focus(),
  "?": ({ showHelp }) => showHelp(),
};
