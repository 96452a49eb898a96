// One workstream's websocket: connects after a cursor, hands events on in order, and
// reconnects by itself (with backoff) from the last event id it handed on.

const BACKOFF_MS = [250, 500, 1000, 2000, 4000];
const BACKOFF_MAX_MS = 5000;
// Closed at a cap on open sockets (code 1013, after an `error` with status 429): wait longer.
const TRY_LATER = 1013;
const BUSY = 429;
const BUSY_MS = [1000, 2000, 4000, 8000, 15000];

export class EventStream {
  // onEvent(event) is called for every frame but `reply`; it returns nothing.
  // cursor() gives the id to reconnect after; onStatus(s): "connecting" | "live" | "offline".
  constructor(wsId, { token, cursor, onEvent, onStatus, onFatal }) {
    Object.assign(this, { wsId, token, cursor, onEvent, onStatus, onFatal });
    this.attempt = 0;
    this.closed = false;
    this.timer = null;
    this.sock = null;
  }

  open() {
    if (this.closed) return;
    this.onStatus(this.attempt ? "reconnecting" : "connecting");
    const proto = location.protocol === "https:" ? "wss:" : "ws:";
    const query = new URLSearchParams({ token: this.token(), after: String(this.cursor()) });
    const url = `${proto}//${location.host}/v1/ws/workstreams/${encodeURIComponent(this.wsId)}?${query}`;
    const sock = new WebSocket(url);
    this.sock = sock;
    sock.onopen = () => {
      if (sock !== this.sock) return;
      this.onStatus("live");
    };
    sock.onmessage = (msg) => this.frame(sock, msg.data);
    sock.onclose = (closing) => this.dropped(sock, closing.code);
  }

  frame(sock, data) {
    if (sock !== this.sock) return;
    let event;
    try {
      event = JSON.parse(data);
    } catch {
      return;
    }
    if (event.type === "reply") return;
    if (event.type === "error" && event.status === BUSY) return; // the close follows: try later
    if (event.type === "error" && event.status) {
      // Refused at connect (401 bad token, 404 no such workstream): retrying will not help.
      this.close();
      this.onFatal(event);
      return;
    }
    this.attempt = 0; // a socket that brings events is a good one: the next drop retries soon
    this.onEvent(event);
  }

  dropped(sock, code) {
    if (sock !== this.sock || this.closed) return;
    this.sock = null;
    this.onStatus("offline");
    const steps = code === TRY_LATER ? BUSY_MS : BACKOFF_MS;
    const base = steps[Math.min(this.attempt, steps.length - 1)];
    const delay = Math.min(code === TRY_LATER ? BUSY_MS.at(-1) : BACKOFF_MAX_MS, base * (0.8 + Math.random() * 0.4));
    this.attempt += 1;
    this.timer = setTimeout(() => this.open(), delay);
  }

  // A fresh connection from the current cursor (e.g. after re-reading the history).
  restart() {
    if (this.closed) return;
    const old = this.sock;
    this.sock = null;
    if (old) old.close();
    clearTimeout(this.timer);
    this.open();
  }

  close() {
    this.closed = true;
    clearTimeout(this.timer);
    if (this.sock) this.sock.close();
    this.sock = null;
  }
}
