// The Account page: who is signed in, changing one's password, the tokens that reach the account
// (an admin's: everyone's), and for admins the users (create, disable, enable). Everything the
// server sends is put in as text.

import { api, ApiError } from "./api.js";
import { h } from "./dom.js";

const when = (iso) => (iso ? new Date(iso).toLocaleString() : "never");

export function bindAccountPanel(els, { onError, me }) {
  async function refresh() {
    const who = me();
    if (!who) return;
    els.who.textContent = `Signed in as ${who.name}${who.admin ? " (administrator)" : ""} · may ${who.scopes.join(", ")}`;
    // The operator's token has no password; only a user's does.
    els.passwordForm.hidden = !who.user_id;
    els.users.hidden = !who.admin;
    els.tokensTitle.textContent = who.admin ? "Everyone's tokens" : "Your tokens";
    await Promise.all([refreshTokens(who), who.admin ? refreshUsers(who) : null]);
  }

  async function refreshTokens(who) {
    let tokens;
    try {
      tokens = await api.tokens(who.admin ? "*" : null);
    } catch (err) {
      els.tokens.replaceChildren(h("li", { class: "memory-none" }, `Cannot load tokens: ${err.message}`));
      return onError(err);
    }
    const active = tokens.filter((t) => t.active);
    const rows = active.map((t) => tokenRow(t, who));
    const gone = tokens.length - active.length;
    if (!rows.length) rows.push(h("li", { class: "memory-none" }, "No tokens that work."));
    if (gone) rows.push(h("li", { class: "memory-none" }, `${gone} revoked or expired, not shown.`));
    els.tokens.replaceChildren(...rows);
  }

  function tokenRow(t, who) {
    const mine = t.token_id === who.token_id;
    const revoke = h("button", { class: "btn btn-ghost btn-small", type: "button", "aria-label": `Revoke token ${t.name} of ${t.user}` }, "Revoke");
    revoke.addEventListener("click", async () => {
      revoke.disabled = true;
      try {
        await api.revokeToken(t.token_id);
      } catch (err) {
        revoke.disabled = false;
        return onError(err);
      }
      refreshTokens(who);
    });
    const kind = t.kind === "login" ? "sign-in" : "API token";
    return h(
      "li",
      { class: "memory token-row", "data-token-id": String(t.token_id) },
      h(
        "div",
        { class: "memory-head" },
        h("span", { class: "memory-name" }, t.name),
        who.admin ? h("span", { class: "memory-tag" }, t.user) : null,
        h("span", { class: "memory-tag" }, mine ? "this sign-in" : kind),
        h("span", { class: "spacer" }),
        mine ? null : revoke,
      ),
      h("div", { class: "memory-when" }, `${t.scopes.join(", ")} · made ${when(t.created_at)} · expires ${when(t.expires_at)}`),
    );
  }

  async function refreshUsers(who) {
    let users;
    try {
      users = await api.users();
    } catch (err) {
      els.userList.replaceChildren(h("li", { class: "memory-none" }, `Cannot load users: ${err.message}`));
      return onError(err);
    }
    els.userList.replaceChildren(...users.map((u) => userRow(u, who)));
  }

  function userRow(u, who) {
    const self = u.name === who.name;
    const toggle = h(
      "button",
      { class: "btn btn-ghost btn-small", type: "button", "aria-label": `${u.disabled ? "Enable" : "Disable"} ${u.name}` },
      u.disabled ? "Enable" : "Disable",
    );
    toggle.addEventListener("click", async () => {
      toggle.disabled = true;
      try {
        await api.setUserDisabled(u.name, !u.disabled);
      } catch (err) {
        toggle.disabled = false;
        if (err instanceof ApiError) els.userError.textContent = err.message;
        return onError(err);
      }
      refresh();
    });
    return h(
      "li",
      { class: `memory user-row${u.disabled ? " is-disabled" : ""}`, "data-user": u.name },
      h(
        "div",
        { class: "memory-head" },
        h("span", { class: "memory-name" }, u.name),
        u.admin ? h("span", { class: "memory-tag" }, "admin") : null,
        u.disabled ? h("span", { class: "memory-tag tag-warn" }, "disabled") : null,
        self ? h("span", { class: "memory-tag" }, "you") : null,
        h("span", { class: "spacer" }),
        self ? null : toggle,  // an admin cannot disable themself (the API says so too)
      ),
    );
  }

  els.passwordForm.addEventListener("submit", async (e) => {
    e.preventDefault();
    els.passwordError.textContent = "";
    els.passwordDone.textContent = "";
    if (els.newPassword.value !== els.again.value) {
      els.passwordError.textContent = "The two new passwords differ.";
      return els.again.focus();
    }
    try {
      const done = await api.changePassword(els.current.value, els.newPassword.value);
      const ended = done.sign_ins_ended;
      const kept = done.api_tokens_kept;
      els.passwordDone.textContent =
        `Password changed. ${ended === 1 ? "1 other sign-in was" : `${ended} other sign-ins were`} signed out.` +
        (kept ? ` ${kept} API token${kept === 1 ? " still works" : "s still work"}: revoke ${kept === 1 ? "it" : "them"} below if someone else knew the password.` : "");
      for (const input of [els.current, els.newPassword, els.again]) input.value = "";
      refresh();
    } catch (err) {
      if (!(err instanceof ApiError)) return onError(err);
      els.passwordError.textContent = err.status === 403 ? "That is not your current password." : err.message;
    }
  });

  els.userForm.addEventListener("submit", async (e) => {
    e.preventDefault();
    els.userError.textContent = "";
    try {
      await api.createUser({ name: els.userName.value.trim(), password: els.userPassword.value, admin: els.userAdmin.checked });
    } catch (err) {
      if (!(err instanceof ApiError)) return onError(err);
      els.userError.textContent = err.message;
      return;
    }
    els.userName.value = "";
    els.userPassword.value = "";
    els.userAdmin.checked = false;
    refresh();
  });

  els.openButton.addEventListener("click", () => {
    els.dialog.hidden = false;
    els.passwordError.textContent = "";
    els.passwordDone.textContent = "";
    els.userError.textContent = "";
    refresh().catch(onError);
  });
  els.close.addEventListener("click", () => (els.dialog.hidden = true));
  return { refresh };
}
