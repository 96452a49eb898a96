// Start-up: ask for the token once per tab, then wire the list, the open workstream,
// the message box and the shortcuts together. The open workstream is kept in the URL hash.

import { api, token, UnauthorizedError } from "./api.js";
import { bindKeys } from "./keys.js";
import { isDecideLink, showDecide } from "./decide.js";
import { PreviewPane } from "./preview.js";
import { McpPanel } from "./mcp.js";
import { bindMemoriesPanel } from "./memories.js";
import { bindSkillsPanel } from "./skills.js";
import { bindPoliciesPanel } from "./policies.js";
import { bindChannelsPanel } from "./channels.js";
import { bindCreateDialog, Sidebar } from "./sidebar.js";
import { WorkstreamView } from "./view.js";
import { attachmentChip } from "./transcript.js";
import { WatchesPanel } from "./watches.js";
import { CoordinatorPanel } from "./coordinator.js";
import { ShellsPanel } from "./shells.js";
import { bindAccountPanel } from "./account.js";
import { bindRunsPanel } from "./runs.js";
import { WorkstreamHeader } from "./header.js";
import { fillModelSelect } from "./models.js";

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
    onEvent: (e) => {
      coordinator.event(e);
      shells.event(e);
      if (e.type === "workstream_changed") changedElsewhere(e);
    },
    elsewherePending: () => coordinator.pendingCount(),
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

const coordinator = new CoordinatorPanel(
  { root: $("coordinator"), count: $("coord-count"), children: $("coord-children"), tasks: $("coord-tasks"), close: $("coord-close") },
  { onOpen: (id) => select(id), onError: (err) => handleError(err), onPending: () => view.updatePending() },
);

const shells = new ShellsPanel(
  { root: $("shells"), count: $("shell-count"), list: $("shell-list") },
  { onError: (err) => handleError(err) },
);

const sidebar = new Sidebar(
  { list: $("ws-list"), search: $("ws-search"), showArchived: $("ws-show-archived"), archivedCount: $("ws-archived-count") },
  { onSelect: (id) => select(id), onError: handleError, onChanged: (ws) => ws.ws_id === view.wsId && header.changed(ws) },
);

// -- start, rename, model picker (docs/web-client.md) -----------------------------------------

const header = new WorkstreamHeader(
  { title: $("ws-title"), rename: $("rename-ws"), model: $("ws-model"), hint: $("composer-hint") },
  { onChanged: (ws) => sidebar.update(ws), onError: handleError },
);

// A rename, a generated title or a model change, as the open workstream's socket reports it.
function changedElsewhere(e) {
  const fields = Object.fromEntries(["name", "model", "auto_approve", "smart_approve", "pinned", "archived"].filter((k) => k in e).map((k) => [k, e[k]]));
  header.changed(fields);
  sidebar.update({ ws_id: view.wsId, ...fields });
}

// Files attached wait above the box as chips (a thumbnail for an image) and go with the next
// message (docs/attachments.md); a chip's × takes one back.
const outgoing = {
  items: [],
  ids() {
    return this.items.map((a) => a.attachment_id);
  },
  add(attached) {
    this.items.push(attached);
    this.paint();
  },
  clear() {
    this.items = [];
    this.paint();
  },
  paint() {
    const tray = $("composer-attachments");
    const wsId = view.wsId;
    tray.replaceChildren(
      ...this.items.map((a) =>
        attachmentChip(a, (id) => api.attachmentImage(wsId, id), () => {
          this.items = this.items.filter((x) => x !== a);
          this.paint();
        }),
      ),
    );
    tray.hidden = this.items.length === 0;
  },
};

// No workstream open: the composer starts one with the first message.
function showStart() {
  view.close();
  header.close();
  $("transcript").hidden = true;
  $("start").hidden = false;
  $("composer").hidden = false;
  $("delete-ws").hidden = true;
  $("attach").style.visibility = "hidden";  // files go into a workstream's folder: there is none yet
  $("ws-title").textContent = "No workstream";
  $("ws-meta").textContent = "";
  $("ws-state").dataset.state = "idle";
  $("ws-state").textContent = "idle";
  $("composer-hint").textContent = "Enter starts a new workstream · Shift+Enter for a new line";
  fillModelSelect($("start-model"), $("start-model").value || null).catch(handleError);
  sidebar.setActive(null);
  if (matchMedia("(hover: hover)").matches) box.focus();  // a phone's keyboard waits for a tap
}

async function startWith(text) {
  const body = $("start-model").value ? { model: $("start-model").value } : {};
  const ws = await api.create(body);
  await sidebar.refresh();
  await select(ws.ws_id);
  await view.send(text);
}
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
  $("start").hidden = true;
  $("transcript").hidden = false;
  header.open(ws).catch(handleError);
  $("attach").style.visibility = "";
  outgoing.clear(); // files attached for another workstream's next message are not this one's
  $("composer").hidden = false;
  $("delete-ws").hidden = false;
  previews.setWorkstream(wsId).catch(handleError);
  watches.open(wsId);
  coordinator.open(ws).catch(handleError);
  shells.open(wsId).catch(handleError);
  await view.open(ws).catch(handleError);
  // Waiting calls first: `y` / `n` then act on the first of them. Not while the person types
  // already (the history may arrive after they started): the focus stays theirs.
  const active = document.activeElement;
  if (active && ["INPUT", "TEXTAREA", "SELECT"].includes(active.tagName)) return;
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
  coordinator.close();
  shells.close();
  $("composer").hidden = true;
  $("app").hidden = true;
  $("login").hidden = false;
  $("login-error").textContent = message;
  $("whoami").textContent = "";
  signedIn = null;
  $("account").hidden = $("runs").hidden = true;
  ($("username").value ? $("password") : $("username")).focus();
}

let signedIn = null; // GET /me's answer: the Account page shows it

async function signIn() {
  let me;
  try {
    me = await api.me();
  } catch (err) {
    return signOut(err instanceof UnauthorizedError ? "That token was refused." : `Cannot reach the service: ${err.message}`);
  }
  signedIn = me;
  $("whoami").textContent = me.name;
  $("whoami").title = `Signed in as ${me.name} (${me.scopes.join(", ")})`;
  // Only an administrator names a workstream's folder; everyone else's gets one of its own.
  for (const el of [$("c-dir"), document.querySelector('label[for="c-dir"]')]) el.hidden = !me.admin;
  $("show-policies").hidden = !me.admin; // the rules are an administrator's
  $("login").hidden = true;
  $("app").hidden = false;
  await sidebar.refresh();
  sidebar.start();
  mcp.start();
  const wanted = hashWorkstream();
  if (wanted) await select(wanted);
  else showStart();
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
  if (!text.trim()) return;
  box.value = "";
  autosize();
  const sending = outgoing.ids();
  try {
    if (view.wsId) await view.send(text, sending);
    else await startWith(text);
    outgoing.clear();
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
      outgoing.add(attached);
      const read = attached.text_note ? ` (the model will not get its text: ${attached.text_note})` : "";
      $("composer-hint").textContent = `Attached ${attached.filename}: it goes with your next message${read}.`;
    } catch (err) {
      $("composer-hint").textContent = `Not attached: ${file.name}: ${err.message}`;
      handleError(err);
    }
  }
  box.focus();
});

async function forget(wsId) {
  if (wsId !== view.wsId) return;
  previews.setWorkstream(null);
  showStart();
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
    smart: $("c-smart"),
    coordinator: $("c-coordinator"),
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
bindSkillsPanel(
  {
    dialog: $("skills"),
    openButton: $("show-skills"),
    close: $("skills-close"),
    search: $("skills-search"),
    list: $("skills-list"),
  },
  { onError: handleError },
);
bindPoliciesPanel(
  {
    dialog: $("policies"),
    openButton: $("show-policies"),
    close: $("policies-close"),
    list: $("policies-list"),
    form: $("policy-form"),
    effect: $("policy-effect"),
    tool: $("policy-tool"),
    command: $("policy-command"),
    user: $("policy-user"),
    group: $("policy-group"),
    reason: $("policy-reason"),
    error: $("policy-error"),
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
// -- account, runs and schedules ------------------------------------------------------------

bindAccountPanel(
  {
    dialog: $("account"),
    openButton: $("show-account"),
    close: $("account-close"),
    who: $("account-who"),
    passwordForm: $("password-form"),
    current: $("pw-current"),
    newPassword: $("pw-new"),
    again: $("pw-again"),
    passwordError: $("password-error"),
    passwordDone: $("password-done"),
    users: $("admin-users"),
    userList: $("users-list"),
    userForm: $("user-form"),
    userName: $("user-name"),
    userPassword: $("user-password"),
    userAdmin: $("user-admin"),
    userError: $("user-error"),
    tokens: $("tokens-list"),
    tokensTitle: $("tokens-title"),
  },
  { onError: handleError, me: () => signedIn },
);
bindRunsPanel(
  {
    dialog: $("runs"),
    openButton: $("show-runs"),
    close: $("runs-close"),
    refresh: $("runs-refresh"),
    runs: $("runs-list"),
    schedules: $("schedules-list"),
    form: $("schedule-form"),
    kind: $("schedule-kind"),
    when: $("schedule-when"),
    timezone: $("schedule-tz"),
    prompt: $("schedule-prompt"),
    error: $("schedule-error"),
  },
  { onError: handleError, onOpen: (wsId) => sidebar.refresh().catch(handleError).then(() => select(wsId)) },
);
// At phone width these pages open from the drawer: it closes behind them.
for (const id of ["show-account", "show-runs"]) $(id).addEventListener("click", () => setDrawer(false));

bindKeys({
  view,
  messageBox: box,
  dialogs: [
    $("login"), $("decide"), $("create"), $("help"), $("mcp"), $("memories"), $("skills"), $("policies"),
    $("channels"), $("account"), $("runs"),
  ],
  showHelp,
});

window.addEventListener("hashchange", () => {
  if (isDecideLink()) return showDecide(); // a link opened in a tab that was already here
  const id = hashWorkstream();
  if (id && id !== view.wsId) select(id);
});

if (isDecideLink()) showDecide(); // a pushed approval link: no sign-in, nothing else
else if (token.get()) signIn();
else signOut();
