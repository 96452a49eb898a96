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
