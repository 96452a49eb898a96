// Keyboard shortcuts (the help dialog lists them): decisions act on the focused card, or on
// the first pending one when no card has focus.

const TYPING = new Set(["INPUT", "TEXTAREA", "SELECT"]);
// Pages that are the whole page, not a dialog over it: Escape leaves them open.
const STAYS = new Set(["login", "decide"]);

export function bindKeys({ view, messageBox, dialogs, showHelp }) {
  document.addEventListener("keydown", (e) => {
    const open = dialogs.find((d) => !d.hidden);
    if (e.key === "Escape") {
      if (open && !STAYS.has(open.id)) open.hidden = true;
      else if (TYPING.has(document.activeElement?.tagName)) document.activeElement.blur();
      return;
    }
    if (open || e.ctrlKey || e.metaKey || e.altKey || e.isComposing) return;
    if (TYPING.has(e.target.tagName) && !decidesFromBox(e, messageBox, view)) return;
    const action = ACTIONS[e.key];
    if (!action || ((e.key === "Y" || e.key === "N") && !e.shiftKey)) return;  // not Caps Lock
    e.preventDefault();
    action({ view, messageBox, showHelp });
  });
}

// Right after sending, the focus is still in the message box: while it is empty, y / n / a
// decide a pending call there too (with text in it they are letters, as they should be).
const FROM_BOX = new Set(["y", "n", "a"]);
function decidesFromBox(e, messageBox, view) {
  return e.target === messageBox && !messageBox.value && FROM_BOX.has(e.key) && view.transcript.pendingCards().length > 0;
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
  e: ({ view }) => target(view)?.startEdit(),
  f: ({ view }) => target(view)?.feedback.focus(),
  j: ({ view }) => move(view, 1),
  k: ({ view }) => move(view, -1),
  Y: ({ view }) => view.decideAll(true),
  N: ({ view }) => view.decideAll(false),
  "/": ({ messageBox }) => messageBox.focus(),
  "?": ({ showHelp }) => showHelp(),
};
