// Start-up: ask for the token once per tab, then wire the list, the open workstream,
// the message box and the shortcuts together. The open workstream is kept in the URL hash.

import { api, token, UnauthorizedError } from "./api.js";
import { bindKeys } from "./keys.js";
import { bindMemoriesPanel } from "./memories.js";
import { bindCreateDialog, Sidebar } from "./sidebar.js";
import { WorkstreamView } from "./view.js";

const $ = (id) => document.getElementById(id);

const view = new WorkstreamView(
  {
    transcript: $("transcript"),
    title: $("ws-title"),
    meta: $("ws-meta"),
    state: $("ws-state"),
    conn: $("conn"),
    cancel: $("cancel-turn"),
    send: $("send"),
    hint: $("composer-hint"),
    pendingBar: $("pending-bar"),
    pendingCount: $("pending-count"),
    skill: $("ws-skill"),
  },
  {
    onState: (wsId, state) => sidebar.setLiveState(wsId, state),
    onUnauthorized: () => signOut("That token was refused."),
  },
);

const sidebar = new Sidebar({ list: $("ws-list") }, { onSelect: (id) => select(id), onError: handleError });

function handleError(err) {
  if (err instanceof UnauthorizedError || err?.name === "UnauthorizedError") signOut("That token was refused.");
  else console.warn(err);
}

async function select(wsId) {
  setDrawer(false);
  if (!wsId) return;
  if (location.hash !== `#ws=${wsId}`) history.replaceState(null, "", `#ws=${wsId}`);
  let ws = sidebar.find(wsId);
  if (!ws) ws = await api.describe(wsId).catch(() => null);
  if (!ws) return;
  sidebar.setActive(wsId);
  $("composer").hidden = false;
  await view.open(ws).catch(handleError);
  // Waiting calls first: `y` / `n` then act on the first of them.
  const pending = view.transcript.pendingCards()[0];
  if (pending) pending.el.focus();
  else $("message").focus();
}

function hashWorkstream() {
  const m = /^#ws=([\w-]+)$/.exec(location.hash);
  return m ? m[1] : null;
}

// -- token --------------------------------------------------------------------------------

function signOut(message = "") {
  token.clear();
  sidebar.stop();
  view.close();
  $("composer").hidden = true;
  $("app").hidden = true;
  $("login").hidden = false;
  $("login-error").textContent = message;
  $("token").focus();
}

async function signIn() {
  try {
    await api.list();
  } catch (err) {
    return signOut(err instanceof UnauthorizedError ? "That token was refused." : `Cannot reach the service: ${err.message}`);
  }
  $("login").hidden = true;
  $("app").hidden = false;
  await sidebar.refresh();
  sidebar.start();
  const wanted = hashWorkstream() || sidebar.items.at(-1)?.ws_id;
  if (wanted) await select(wanted);
  else $("composer").hidden = true;
}

$("login-form").addEventListener("submit", (e) => {
  e.preventDefault();
  token.set($("token").value.trim());
  $("token").value = "";
  signIn();
});
$("sign-out").addEventListener("click", () => signOut());

// -- composer -----------------------------------------------------------------------------

const box = $("message");
function autosize() {
  box.style.height = "auto";
  box.style.height = `${Math.min(box.scrollHeight, 240)}px`;
}
box.addEventListener("input", autosize);
box.addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
    e.preventDefault();
    $("composer").requestSubmit();
  }
});
$("composer").addEventListener("submit", async (e) => {
  e.preventDefault();
  const text = box.value;
  if (!text.trim() || !view.wsId) return;
  box.value = "";
  autosize();
  try {
    await view.send(text);
  } catch (err) {
    box.value = text;
    $("composer-hint").textContent = `Not sent: ${err.message}`;
    handleError(err);
  }
});
$("cancel-turn").addEventListener("click", () => view.cancel().catch(handleError));
$("approve-all").addEventListener("click", () => view.decideAll(true).catch(handleError));
$("deny-all").addEventListener("click", () => view.decideAll(false).catch(handleError));

// -- drawer, dialogs, keys ----------------------------------------------------------------

function setDrawer(open) {
  document.body.classList.toggle("drawer-open", open);
  $("scrim").hidden = !open;
}
$("open-drawer").addEventListener("click", () => setDrawer(!document.body.classList.contains("drawer-open")));
$("scrim").addEventListener("click", () => setDrawer(false));

bindCreateDialog(
  {
    dialog: $("create"),
    form: $("create-form"),
    openButton: $("new-ws"),
    cancel: $("create-cancel"),
    name: $("c-name"),
    model: $("c-model"),
    dir: $("c-dir"),
    auto: $("c-auto"),
    error: $("create-error"),
  },
  {
    onCreated: async (ws) => {
      await sidebar.refresh();
      select(ws.ws_id);
    },
  },
);

const showHelp = () => ($("help").hidden = false);
$("show-help").addEventListener("click", showHelp);
$("help-close").addEventListener("click", () => ($("help").hidden = true));
bindMemoriesPanel(
  {
    dialog: $("memories"),
    openButton: $("show-memories"),
    close: $("memories-close"),
    search: $("memories-search"),
    list: $("memories-list"),
  },
  { onError: handleError },
);
bindKeys({ view, messageBox: box, dialogs: [$("login"), $("create"), $("help"), $("memories")], showHelp });

window.addEventListener("hashchange", () => {
  const id = hashWorkstream();
  if (id && id !== view.wsId) select(id);
});

if (token.get()) signIn();
else signOut();
