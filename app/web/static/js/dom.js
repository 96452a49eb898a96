// DOM building without markup: h(tag, attrs, ...children) where strings become text nodes.

export function h(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "hidden") node.hidden = Boolean(value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    node.append(typeof child === "string" ? document.createTextNode(child) : child);
  }
  return node;
}

// fn runs at most once per frame however often the returned function is called.
export function throttled(fn) {
  let queued = false;
  const run = () => {
    queued = false;
    fn();
  };
  return () => {
    if (queued) return;
    queued = true;
    if (document.hidden) setTimeout(run, 50);
    else requestAnimationFrame(run);
  };
}

// A button that removes something on the server: disabled while it asks, then `done()`; a 404
// (already gone) counts as removed, any other error re-enables it and goes to `onError`.
export function removeButton(text, attrs, remove, done, onError) {
  const button = h("button", { class: "btn btn-ghost btn-small", type: "button", ...attrs }, text);
  button.addEventListener("click", async () => {
    button.disabled = true;
    try {
      await remove();
    } catch (err) {
      if (err.status !== 404) {
        button.disabled = false;
        return onError(err);
      }
    }
    done();
  });
  return button;
}

// A button that copies `text()` (read at the click) to the clipboard and says so for a moment.
// Its label is drawn by CSS from data-label, so the text of what it sits in stays that text.
// The Clipboard API needs a secure context (https or localhost); elsewhere a hidden textarea's
// selection is copied instead.
export function copyButton(text, { label = "Copy", title = "Copy", cls = "" } = {}) {
  const button = h("button", { type: "button", class: `copy-btn ${cls}`.trim(), title, "aria-label": title, "data-label": label });
  button.addEventListener("click", async (ev) => {
    ev.stopPropagation();
    const value = text();
    let copied = false;
    try {
      await navigator.clipboard.writeText(value);
      copied = true;
    } catch {
      copied = copyBySelection(value);
    }
    button.dataset.label = copied ? "Copied" : "Copy failed";
    setTimeout(() => (button.dataset.label = label), 1500);
  });
  return button;
}

function copyBySelection(value) {
  const area = h("textarea", { class: "copy-scratch", "aria-hidden": "true" });
  area.value = value;
  document.body.append(area);
  area.select();
  try {
    return document.execCommand("copy");
  } catch {
    return false;
  } finally {
    area.remove();
  }
}
