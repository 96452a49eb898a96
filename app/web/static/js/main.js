// Start-up: ask for the token once per tab, then wire the list, the open workstream,
// the message box and the shortcuts together. The open workstream is kept in the URL hash.

import { api, token, UnauthorizedError } from "./api.js";
import { bindKeys } from "./keys.js";
import { PreviewPane } from "./preview.js";
import { McpPanel } from "./mcp.js";
import { bindMemoriesPanel } from "./memories.js";
import { bindChannelsPanel } from "./channels.js";
import { bindCreateDialog, Sidebar } from "./sidebar.js";
import { WorkstreamView } from "./view.js";
import { WatchesPanel } from "./watches.js";

const $ = (id) => document.getElementById(id);

const view = new WorkstreamView(
  {
    transcript: $("transcript"),
    title: $("ws-title"),
    meta: $("ws-meta"),
    tools: $("ws-tools"),
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
    onPreview: (e) => previews.opened(e).catch(handleError),
    onDeleted: (wsId) => forget(wsId),
    onWatch: (watch) => watches.apply(watch),
    onForked: async (ws) => {
      await sidebar.refresh().catch(handleError);
      await select(ws.ws_id);
    },
  },
);

const previews = new PreviewPane({
  pane: $("preview-pane"),
  title: $("preview-title"),
  kind: $("preview-kind"),
  remote: $("preview-remote"),
  remoteBox: $("preview-remote-box"),
  body: $("preview-body"),
  close: $("preview-close"),
  list: $("preview-list"),
  open: $("previews-open"),
});

const watches = new WatchesPanel(
  { root: $("watches"), count: $("watch-count"), list: $("watch-list") },
  { onError: (err) => handleError(err) },
);

const sidebar = new Sidebar({ list: $("ws-list") }, { onSelect: (id) => select(id), onError: handleError });
const mcp = new McpPanel(
  { badge: $("mcp-badge"), dialog: $("mcp"), list: $("mcp-list"), refreshAll: $("mcp-refresh-all"), close: $("mcp-close") },
  { onError: handleError },
);

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
  $("delete-ws").hidden = false;
  previews.setWorkstream(wsId).catch(handleError);
  watches.open(wsId);
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

// -- signing in ---------------------------------------------------------------------------

function signOut(message = "") {
  token.clear();
  sidebar.stop();
  mcp.stop();
  view.close();
  watches.close();
  $("composer").hidden = true;
  $("app").hidden = true;
  $("login").hidden = false;
  $("login-error").textContent = message;
  $("whoami").textContent = "";
  ($("username").value ? $("password") : $("username")).focus();
}

async function signIn() {
  let me;
  try {
    me = await api.me();
  } catch (err) {
    return signOut(err instanceof UnauthorizedError ? "That token was refused." : `Cannot reach the service: ${err.message}`);
  }
  $("whoami").textContent = me.name;
  $("whoami").title = `Signed in as ${me.name} (${me.scopes.join(", ")})`;
  // Only an administrator names a workstream's folder; everyone else's gets one of its own.
  for (const el of [$("c-dir"), document.querySelector('label[for="c-dir"]')]) el.hidden = !me.admin;
  $("login").hidden = true;
  $("app").hidden = false;
  await sidebar.refresh();
  sidebar.start();
  mcp.start();
  const wanted = hashWorkstream() || sidebar.items.at(-1)?.ws_id;
  if (wanted) await select(wanted);
  else $("composer").hidden = true;
}

$("login-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  const pasted = $("token").value.trim();
  $("token").value = "";
  if (pasted) {
    token.set(pasted);
    return signIn();
  }
  const name = $("username").value.trim();
  const password = $("password").value;
  $("password").value = "";
  if (!name || !password) {
    $("login-error").textContent = "Give your user name and password, or paste a token.";
    return;
  }
  try {
    const session = await api.login(name, password);
    token.set(session.token);
  } catch (err) {
    $("login-error").textContent =
      err.status === 401 ? "Wrong user name or password." : err.status === 429 ? err.message : `Cannot sign in: ${err.message}`;
    $("password").focus();
    return;
  }
  signIn();
});
$("sign-out").addEventListener("click", async () => {
  // A sign-in's token is revoked on the server; a pasted API token is only forgotten here.
  await api.logout().catch(() => null);
  signOut();
});

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

// -- attachments and deletion ---------------------------------------------------------------

$("attach").addEventListener("click", () => $("attach-file").click());
$("attach-file").addEventListener("change", async (e) => {
  const files = [...e.target.files];
  e.target.value = "";
  for (const file of files) {
    try {
      const attached = await api.attach(view.wsId, file);
      // The model learns of it from the message: name it where the person can see it too.
      box.value += `${box.value && !box.value.endsWith("\n") ? "\n" : ""}[attached ${attached.filename}: ${attached.target}]\n`;
      autosize();
      $("composer-hint").textContent = `Attached ${attached.filename}.`;
    } catch (err) {
      $("composer-hint").textContent = `Not attached: ${file.name}: ${err.message}`;
      handleError(err);
    }
  }
  box.focus();
});

async function forget(wsId) {
  if (wsId !== view.wsId) return;
  view.close();
  previews.setWorkstream(null);
  $("composer").hidden = true;
  $("delete-ws").hidden = true;
  $("ws-title").textContent = "No workstream";
  history.replaceState(null, "", location.pathname);
  await sidebar.refresh().catch(handleError);
}

$("delete-ws").addEventListener("click", async () => {
  const wsId = view.wsId;
  if (!wsId || !confirm("Delete this workstream, its conversation, previews and attachments?")) return;
  try {
    await api.remove(wsId);
    await forget(wsId);
  } catch (err) {
    $("composer-hint").textContent = `Not deleted: ${err.message}`;
    handleError(err);
  }
});
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
    network: $("c-network"),
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
bindChannelsPanel(
  {
    dialog: $("channels"),
    openButton: $("show-channels"),
    close: $("channels-close"),
    list: $("channels-list"),
    form: $("channel-form"),
    kind: $("channel-kind"),
    target: $("channel-target"),
    label: $("channel-label"),
    error: $("channel-error"),
  },
  { onError: handleError },
);
bindKeys({
  view,
  messageBox: box,
  dialogs: [$("login"), $("create"), $("help"), $("mcp"), $("memories"), $("channels")],
  showHelp,
});

window.addEventListener("hashchange", () => {
  const id = hashWorkstream();
  if (id && id !== view.wsId) select(id);
});

if (token.get()) signIn();
else signOut();
