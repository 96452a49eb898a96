// The HTTP job API with the session's Bearer token; the token lives in sessionStorage only.

const TOKEN_KEY = "turnstone.token";

export class UnauthorizedError extends Error {}

export class ApiError extends Error {
  constructor(status, body) {
    super((body && body.error) || `HTTP ${status}`);
    this.status = status;
    this.body = body;
  }
}

export const token = {
  get: () => sessionStorage.getItem(TOKEN_KEY),
  set: (value) => sessionStorage.setItem(TOKEN_KEY, value),
  clear: () => sessionStorage.removeItem(TOKEN_KEY),
};

async function call(method, path, body, { signedIn = true } = {}) {
  const headers = signedIn ? { Authorization: `Bearer ${token.get() || ""}` } : {};
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(`/v1/api${path}`, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const data = await response.json().catch(() => null);
  if (response.status === 401 && signedIn) throw new UnauthorizedError("unauthorized");
  if (!response.ok) throw new ApiError(response.status, data);
  return data;
}

const ws = (id) => `/workstreams/${encodeURIComponent(id)}`;

export const api = {
  // Sign-in: a short-lived token for this tab; 401 wrong name or password, 429 slowed down.
  login: (username, password) => call("POST", "/login", { username, password }, { signedIn: false }),
  logout: () => call("POST", "/logout"),
  me: () => call("GET", "/me"),
  list: () => call("GET", "/workstreams").then((d) => d.workstreams),
  create: (body) => call("POST", "/workstreams", body),
  describe: (id) => call("GET", ws(id)),
  history: (id) => call("GET", `${ws(id)}/history`),
  send: (id, message, attachments = []) =>
    call("POST", `${ws(id)}/send`, attachments.length ? { message, attachments } : { message }),
  approve: (id, body) => call("POST", `${ws(id)}/approve`, body),
  cancel: (id, turnId) => call("POST", `${ws(id)}/cancel`, turnId ? { turn_id: turnId } : {}),
  remove: (id) => call("DELETE", ws(id)),
  // Name, model, pinned, archived (docs/web-client.md); the configured models and what they do
  patch: (id, body) => call("PATCH", ws(id), body),
  models: () => call("GET", "/models"),
  // Branching (docs/branching.md)
  rewind: (id, to) => call("POST", `${ws(id)}/rewind`, { to }),
  branches: (id) => call("GET", `${ws(id)}/branches`).then((d) => d.branches),
  restore: (id, branchId) => call("POST", `${ws(id)}/branches/${encodeURIComponent(branchId)}/restore`),
  edit: (id, messageId, message) => call("POST", `${ws(id)}/messages/${Number(messageId)}/edit`, { message }),
  retry: (id) => call("POST", `${ws(id)}/retry`, {}),
  fork: (id, at) => call("POST", `${ws(id)}/fork`, at ? { at } : {}),
  previews: (id) => call("GET", `${ws(id)}/previews`).then((d) => d.previews),
  preview: (previewId) => call("GET", `/previews/${encodeURIComponent(previewId)}`),
  attach: (id, file) => upload(`${ws(id)}/attachments`, file),
  // An attachment the service serves as an image (by its bytes): a blob: URL for a thumbnail, else null.
  attachmentImage: async (id, attachmentId) => {
    const response = await fetch(`/v1/api${ws(id)}/attachments/${encodeURIComponent(attachmentId)}/content`, {
      headers: { Authorization: `Bearer ${token.get() || ""}` },
    });
    if (!response.ok || !(response.headers.get("Content-Type") || "").startsWith("image/")) return null;
    return URL.createObjectURL(await response.blob());
  },
  // Coordinators (docs/coordinators.md)
  close: (id) => call("POST", `${ws(id)}/close`, {}),
  tasks: (id) => call("GET", `${ws(id)}/tasks`).then((d) => d.tasks),
  shells: (id) => call("GET", `${ws(id)}/shells`).then((d) => d.shells),
  watches: (id) => call("GET", `${ws(id)}/watches`),
  cancelWatch: (id, watchId) => call("DELETE", `${ws(id)}/watches/${encodeURIComponent(watchId)}`),
  mcp: () => call("GET", "/mcp"),
  mcpRefresh: (server, reconnect = false) =>
    call("POST", "/mcp/refresh", { ...(server ? { server } : {}), ...(reconnect ? { reconnect: true } : {}) }),
  memories: (q) => call("GET", `/memories${q ? `?q=${encodeURIComponent(q)}` : ""}`).then((d) => d.memories),
  deleteMemory: (id) => call("DELETE", `/memories/${encodeURIComponent(id)}`),
  skills: () => call("GET", "/skills").then((d) => d.skills),
  policies: () => call("GET", "/policies").then((d) => d.policies),
  addPolicy: (body) => call("POST", "/policies", body),
  deletePolicy: (id) => call("DELETE", `/policies/${encodeURIComponent(id)}`),
  setSkillEnabled: (name, enabled) => call("PUT", `/skills/${encodeURIComponent(name)}`, { enabled }),
  channels: () => call("GET", "/channels").then((d) => d.channels),
  linkChannel: (body) => call("POST", "/channels", body),
  unlinkChannel: (id) => call("DELETE", `/channels/${encodeURIComponent(id)}`),
  // Account, users and tokens (docs/users.md)
  changePassword: (current, next) => call("POST", "/me/password", { current, new: next }),
  tokens: (user) => call("GET", `/tokens${user ? `?user=${encodeURIComponent(user)}` : ""}`).then((d) => d.tokens),
  revokeToken: (id) => call("DELETE", `/tokens/${Number(id)}`),
  users: () => call("GET", "/users").then((d) => d.users),
  createUser: (body) => call("POST", "/users", body),
  setUserDisabled: (name, disabled) => call("PATCH", `/users/${encodeURIComponent(name)}`, { disabled }),
  // Runs and schedules (docs/runs.md, docs/schedules.md)
  // The listing has no prompt nor end time: each listed run is read whole (a page of 25).
  runs: () =>
    call("GET", "/runs?limit=25").then((d) =>
      Promise.all(d.runs.map((r) => call("GET", `/runs/${encodeURIComponent(r.run_id)}`).catch(() => r))),
    ),
  cancelRun: (id) => call("POST", `/runs/${encodeURIComponent(id)}/cancel`, {}),
  schedules: () => call("GET", "/schedules").then((d) => d.schedules),
  createSchedule: (body) => call("POST", "/schedules", body),
  pauseSchedule: (id, paused) => call("POST", `/schedules/${encodeURIComponent(id)}/${paused ? "pause" : "resume"}`, {}),
  deleteSchedule: (id) => call("DELETE", `/schedules/${encodeURIComponent(id)}`),
};

// A file as multipart/form-data (the browser writes the boundary).
async function upload(path, file) {
  const form = new FormData();
  form.append("file", file, file.name);
  const response = await fetch(`/v1/api${path}`, {
    method: "POST",
    headers: { Authorization: `Bearer ${token.get() || ""}` },
    body: form,
  });
  const data = await response.json().catch(() => null);
  if (response.status === 401) throw new UnauthorizedError("unauthorized");
  if (!response.ok) throw new ApiError(response.status, data);
  return data;
}
