/*
 * oauthflow: the oauth-connections widget. Plain script, no build step, no dependencies but
 * oauth-prompt.js, which the page loads first: each connect and reconnect runs through the
 * oauth-prompt widget's flow (OAuthFlow.renderPrompt).
 *
 *   <script src="/oauth/oauth-prompt.js" defer></script>
 *   <script src="/oauth/oauth-connections.js" defer></script>
 *   <oauth-connections api-base="https://api.example"></oauth-connections>
 *
 * It lists the connections of the app's signed-in user and the providers the app offers, from
 * GET {apiBase}/api/v1/oauth/connections (Config.CurrentUser names the user; the browser's
 * cookies go with every request, to an API on another origin too): each connection with its
 * state in words and in color, the account, the scopes granted, when it was connected and last
 * used, and whether its tokens are bound to a key (DPoP). It offers Connect for each provider
 * offered and not connected, Reconnect for a connection that is not healthy, and Disconnect,
 * which asks first in a dialog and then sends DELETE {apiBase}/api/v1/oauth/connections/{provider}.
 * Connect and Reconnect send POST {apiBase}/api/v1/oauth/connections {provider} and show the
 * sign-in document it answers with an oauth-prompt in the provider's row: a popup, with the
 * prompt's same-tab link when the browser blocks it. Writes carry "X-Requested-With: oauthflow".
 *
 * Attributes:
 *   api-base  where the API lives: "" (or none) means the one this script was served with by
 *             Module.FrontendHandler(apiBase), or this page's origin when it was given none.
 *   flow      "popup" (the default) or "page": the sign-in takes this tab and the API's
 *             callback page sends the browser back here (POST's returnTo, this page's address),
 *             with ?oauth=success|error&provider=ID, which the widget announces and removes.
 *   grant     "device": sign in with a code (RFC 8628) shown in the row, for a provider that
 *             offers it; the widget polls the listing until the connection shows up.
 *
 * Every action ends with a sentence in the status region (role=status) and focus on the
 * provider's name in its row (tabindex=-1), or back on the button that started it when it
 * failed. Nothing the server or a provider wrote is parsed as HTML: every text goes through
 * textContent, without control or format characters.
 *
 * DOM hooks: the root carries data-oauthflow="connections" and data-status="loading|ready|error";
 * each row is an <li data-provider="ID" data-health="healthy|refresh_failing|unreadable|unknown|none">
 * with data-role="name", "state", "account", "reason", "details", "prompt" (the oauth-prompt's
 * slot); buttons data-action="connect|reconnect|disconnect"; the dialog data-role="confirm" with
 * data-action="cancel|confirm"; the status data-role="status" (data-result="success|error").
 * Events (bubbling, on the root): "oauthflow:change" {action: "connect"|"reconnect"|"disconnect",
 * provider, status: "success"|"error", message} after each action, and "oauthflow:list"
 * {connections, providers} (the provider IDs) after each listing. The oauth-prompt's own
 * "oauthflow:done" and "oauthflow:retry" bubble through it too. element.refresh() lists again
 * and returns a promise that settles once the list is shown.
 */
(function (window) {
  "use strict";

  if (!window.customElements || !window.HTMLElement || window.customElements.get("oauth-connections")) {
    return;
  }

  var document = window.document;
  var CONNECTIONS_PATH = "/api/v1/oauth/connections";
  var WRITE_HEADER = "X-Requested-With"; // a form cannot send it: the API refuses writes without it
  var WRITE_HEADER_VALUE = "oauthflow";
  var DEVICE_POLL_MS = 5000; // how often a sign-in with a code looks for the new connection
  var MAX_TEXT = 300; // characters of a server's sentence shown
  var MAX_NAME = 128; // characters of a name (a provider's, an account) shown
  var LOADING = "Loading your connected accounts\u2026";
  // The API base this script was served with: web.Handler writes its Options.APIBase
  // (Module.FrontendHandler's apiBase) here, as a JSON string, when it is not "".
  var DEFAULT_API_BASE = "";
  // UNSHOWN matches what would not show as itself: a control character or a format character
  // (a bidi override that reorders what follows, a zero-width one), as the prompt filters it.
  var UNSHOWN = /[\p{Cc}\p{Cf}]/gu;

  // STATES are the words of each state; the stylesheet colors the row by data-health.
  var STATES = {
    healthy: "Connected",
    refresh_failing: "Renewal failing",
    unreadable: "Unreadable",
    unknown: "State unknown",
    none: "Not connected"
  };

  // ---- helpers ---------------------------------------------------------------------------

  function el(tag, attrs, text) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (name) {
      node.setAttribute(name, attrs[name]);
    });
    if (text) {
      node.textContent = text;
    }
    return node;
  }

  function clear(node) {
    while (node.firstChild) {
      node.removeChild(node.firstChild);
    }
  }

  // find is the first node under root (depth first) for which pred holds, or null.
  function find(root, pred) {
    var kids = root.childNodes || [];
    for (var i = 0; i < kids.length; i++) {
      if (kids[i].nodeType !== undefined && kids[i].nodeType !== 1) {
        continue;
      }
      if (pred(kids[i])) {
        return kids[i];
      }
      var deeper = find(kids[i], pred);
      if (deeper) {
        return deeper;
      }
    }
    return null;
  }

  function focus(node) {
    if (node && typeof node.focus === "function") {
      node.focus();
    }
  }

  // shown is text a server or a provider chose, as it is shown: a string, without control or
  // format characters, trimmed, at most max characters.
  function shown(s, max) {
    var t = typeof s === "string" ? s.replace(UNSHOWN, "").trim() : "";
    var limit = max || MAX_TEXT;
    return t.length > limit ? t.slice(0, limit) + "\u2026" : t;
  }

  function isHTTPURL(s) {
    try {
      var u = new window.URL(String(s), window.location.href);
      return u.protocol === "https:" || u.protocol === "http:";
    } catch (e) {
      return false;
    }
  }

  function timeText(iso) {
    var t = typeof iso === "string" && iso ? new Date(iso) : null;
    return t && !isNaN(t.getTime()) ? t.toLocaleString() : "";
  }

  function connectionsURL(apiBase) {
    return String(apiBase || "").replace(/\/+$/, "") + CONNECTIONS_PATH;
  }

  // call sends one request to the connections endpoint with the browser's cookies and
  // resolves to {ok, status, body}; status 0 when the server could not be reached. It never
  // rejects.
  function call(apiBase, method, suffix, body) {
    var init = { method: method, credentials: "include", cache: "no-store", headers: { Accept: "application/json" } };
    if (method !== "GET") {
      init.headers[WRITE_HEADER] = WRITE_HEADER_VALUE;
    }
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    var sent;
    try {
      sent = Promise.resolve(window.fetch(connectionsURL(apiBase) + suffix, init));
    } catch (e) {
      sent = Promise.reject(e);
    }
    return sent.then(function (res) {
      if (res.status === 204) {
        return { ok: true, status: 204, body: null };
      }
      return res.json().then(null, function () {
        return null;
      }).then(function (b) {
        return { ok: !!res.ok, status: res.status, body: b };
      });
    }, function () {
      return { ok: false, status: 0, body: null };
    });
  }

  // failure is the sentence for an answer that is not a success: the server's message when it
  // gave one, else what went wrong in general.
  function failure(answer, what) {
    if (answer.status === 0) {
      return "The server could not be reached. Check your connection and try again.";
    }
    var said = answer.body && shown(answer.body.message);
    return said || what + " (HTTP " + answer.status + ").";
  }

  // readList turns GET's answer into rows, one per provider: each connection, then each
  // provider offered and not connected. null when the answer is not a listing.
  function readList(body) {
    if (!body || typeof body !== "object" || !Array.isArray(body.connections)) {
      return null;
    }
    var rows = [];
    var byID = Object.create(null);
    body.connections.forEach(function (c) {
      if (c && typeof c.provider === "string" && c.provider && !byID[c.provider]) {
        byID[c.provider] = { id: c.provider, name: shown(c.displayName, MAX_NAME) || c.provider, offered: false, connection: readConnection(c) };
        rows.push(byID[c.provider]);
      }
    });
    (Array.isArray(body.providers) ? body.providers : []).forEach(function (p) {
      if (!p || typeof p.id !== "string" || !p.id) {
        return;
      }
      if (byID[p.id]) {
        byID[p.id].offered = true;
        return;
      }
      byID[p.id] = { id: p.id, name: shown(p.displayName, MAX_NAME) || p.id, offered: true, connection: null };
      rows.push(byID[p.id]);
    });
    return rows;
  }

  function readConnection(c) {
    var health = Object.prototype.hasOwnProperty.call(STATES, c.health) && c.health !== "none" ? c.health : "unknown";
    return {
      health: health,
      account: shown(c.account, MAX_NAME),
      reason: shown(c.reason),
      scopes: (Array.isArray(c.scopes) ? c.scopes : []).map(function (s) { return shown(s, MAX_NAME); }).filter(Boolean),
      connectedAt: typeof c.connectedAt === "string" ? c.connectedAt : "",
      lastUsed: typeof c.lastUsed === "string" ? c.lastUsed : "",
      dpop: c.dpop === true
    };
  }

  // connectedAgain reports whether now, a row's connection as listed, is a sign-in newer than
  // before, the one listed when it started: healthy, and new, renewed or mended.
  function connectedAgain(before, now) {
    if (!now || now.health !== "healthy") {
      return false;
    }
    return !before || before.health !== "healthy" || before.connectedAt !== now.connectedAt;
  }

  // returnAddress is this page's address without the outcome a full-page sign-in added.
  function returnAddress() {
    var u = new window.URL(window.location.href);
    u.searchParams.delete("oauth");
    u.searchParams.delete("provider");
    return u.toString();
  }

  // ---- <oauth-connections> ---------------------------------------------------------------

  class OAuthConnectionsElement extends window.HTMLElement {
    static get observedAttributes() {
      return ["api-base"];
    }

    constructor() {
      super();
      this._built = false;
      this._rows = [];
      this._loads = 0; // bumped by each listing: only the latest one is shown
      this._active = null; // the connect or reconnect under way: {row, action, slot, prompt, doc, before, timer}
      this._confirming = null; // the disconnect the dialog asks about: {row, button}
      this._returned = null; // a full-page sign-in's outcome, announced after the first listing
      this._onDone = this._onDone.bind(this);
    }

    connectedCallback() {
      if (!this._built) {
        this._build();
      }
      this.refresh();
    }

    disconnectedCallback() {
      this._cancelActive();
      this._loads++;
    }

    attributeChangedCallback() {
      if (this._built) {
        this.refresh();
      }
    }

    // refresh lists the connections again; the promise it returns settles once they are shown
    // (or the failure is), and never rejects.
    refresh() {
      if (!this._built) {
        return Promise.resolve();
      }
      var load = ++this._loads;
      var self = this;
      this.setAttribute("aria-busy", "true");
      if (!this._rows.length) {
        this._setStatus("loading");
      }
      return call(this._apiBase(), "GET", "").then(function (answer) {
        if (load !== self._loads) {
          return;
        }
        self.removeAttribute("aria-busy");
        var rows = answer.ok ? readList(answer.body) : null;
        if (!rows) {
          self._setStatus("error");
          self._say(failure(answer, "Your connected accounts could not be listed"), "error");
          return;
        }
        self._show(rows);
        self._emit("oauthflow:list", {
          connections: rows.filter(function (r) { return r.connection; }).map(function (r) { return r.id; }),
          providers: rows.filter(function (r) { return r.offered; }).map(function (r) { return r.id; })
        });
        self._announceReturn();
      });
    }

    _apiBase() {
      return this.getAttribute("api-base") || DEFAULT_API_BASE;
    }

    _build() {
      this._built = true;
      this.setAttribute("data-oauthflow", "connections");
      this._status = el("p", { "data-role": "status", role: "status", "aria-live": "polite" });
      this._list = el("ul", { "data-role": "list", "aria-label": "Connected accounts", tabindex: "-1" });
      this._buildDialog();
      this.appendChild(this._status);
      this.appendChild(this._list);
      this.appendChild(this._dialog);
      this.addEventListener("oauthflow:done", this._onDone);
      this._returned = this._takeReturn();
    }

    _buildDialog() {
      var id = "oauthflow-confirm-" + Math.random().toString(36).slice(2);
      var d = el("dialog", { "data-role": "confirm", "aria-labelledby": id + "-title", "aria-describedby": id + "-text" });
      this._dialogTitle = el("h2", { id: id + "-title", "data-role": "confirm-title" });
      this._dialogText = el("p", { id: id + "-text", "data-role": "confirm-text" });
      var actions = el("div", { "data-role": "confirm-actions" });
      this._cancelButton = el("button", { type: "button", "data-action": "cancel" }, "Cancel");
      this._confirmButton = el("button", { type: "button", "data-action": "confirm" }, "Disconnect");
      this._cancelButton.addEventListener("click", this._closeDialog.bind(this));
      this._confirmButton.addEventListener("click", this._disconnect.bind(this));
      d.addEventListener("close", this._dialogClosed.bind(this));
      actions.appendChild(this._cancelButton);
      actions.appendChild(this._confirmButton);
      d.appendChild(this._dialogTitle);
      d.appendChild(this._dialogText);
      d.appendChild(actions);
      this._dialog = d;
    }

    _setStatus(status) {
      this.setAttribute("data-status", status);
      if (status === "loading") {
        this._say(LOADING, "");
      }
    }

    // _say puts a sentence in the status region, which screen readers announce.
    _say(text, result) {
      this._status.textContent = text;
      if (result) {
        this._status.setAttribute("data-result", result);
      } else {
        this._status.removeAttribute("data-result");
      }
    }

    _emit(type, detail) {
      this.dispatchEvent(new window.CustomEvent(type, { bubbles: true, detail: detail }));
    }

    // ---- the list ----

    _show(rows) {
      this._rows = rows;
      this.setAttribute("data-status", "ready");
      if (this._status.textContent === LOADING) {
        this._say("", "");
      }
      clear(this._list);
      if (!rows.length) {
        this._list.appendChild(el("li", { "data-role": "empty" }, "No accounts can be connected here."));
      }
      rows.forEach(function (row) {
        this._list.appendChild(this._row(row));
      }, this);
      if (this._active && !this._rowOf(this._active.row.id)) {
        this._cancelActive();
      }
    }

    _rowOf(id) {
      for (var i = 0; i < this._rows.length; i++) {
        if (this._rows[i].id === id) {
          return this._rows[i];
        }
      }
      return null;
    }

    _row(row) {
      var c = row.connection;
      var health = c ? c.health : "none";
      var item = el("li", { "data-provider": row.id, "data-health": health });
      var head = el("div", { "data-role": "summary" });
      head.appendChild(el("span", { "data-role": "name", tabindex: "-1" }, row.name));
      head.appendChild(el("span", { "data-role": "state" }, STATES[health]));
      item.appendChild(head);
      if (c && c.account) {
        item.appendChild(el("p", { "data-role": "account" }, "Connected as " + c.account));
      }
      if (c && c.reason) {
        item.appendChild(el("p", { "data-role": "reason" }, c.reason));
      }
      if (c) {
        item.appendChild(this._details(c));
      }
      item.appendChild(this._actions(row));
      var active = this._active && this._active.row.id === row.id;
      item.appendChild(active ? this._active.slot : el("div", { "data-role": "prompt", hidden: "" }));
      return item;
    }

    _details(c) {
      var dl = el("dl", { "data-role": "details" });
      var add = function (term, value) {
        if (value) {
          dl.appendChild(el("dt", {}, term));
          dl.appendChild(el("dd", {}, value));
        }
      };
      add("Access", c.scopes.join(", ") || "No scopes named");
      add("Connected", timeText(c.connectedAt));
      add("Last used", timeText(c.lastUsed));
      add("Key binding", c.dpop ? "Bound to the app's key (DPoP)" : "");
      return dl;
    }

    _actions(row) {
      var box = el("div", { "data-role": "actions" });
      var c = row.connection;
      var add = function (action, label) {
        var b = el("button", { type: "button", "data-action": action, "aria-label": label + " " + row.name }, label);
        b.addEventListener("click", this._press.bind(this, action, row.id, b));
        box.appendChild(b);
      }.bind(this);
      if (row.offered && !c) {
        add("connect", "Connect");
      }
      if (row.offered && c && c.health !== "healthy") {
        add("reconnect", "Reconnect");
      }
      if (c) {
        add("disconnect", "Disconnect");
      }
      return box;
    }

    _press(action, id, button) {
      var row = this._rowOf(id);
      if (!row) {
        return;
      }
      if (action === "disconnect") {
        this._askDisconnect(row, button);
      } else {
        this._start(row, action, button);
      }
    }

    _itemOf(id) {
      return find(this._list, function (n) { return n.getAttribute("data-provider") === id; });
    }

    // _focusRow moves focus to the provider's name in its row, or to the list when the row is
    // gone.
    _focusRow(id) {
      var item = this._itemOf(id);
      var name = item && find(item, function (n) { return n.getAttribute("data-role") === "name"; });
      focus(name || this._list);
    }

    // ---- connect and reconnect ----

    _start(row, action, button) {
      this._cancelActive();
      var body = { provider: row.id };
      var grant = this.getAttribute("grant");
      if (grant === "device") {
        body.grant = "device";
      } else if (this.getAttribute("flow") === "page") {
        body.returnTo = returnAddress();
      }
      var self = this;
      this._say("Starting the sign-in to " + row.name + "\u2026", "");
      return call(this._apiBase(), "POST", "", body).then(function (answer) {
        if (!self._itemOf(row.id)) {
          return; // the row is no longer shown
        }
        if (!answer.ok || !answer.body || typeof answer.body !== "object") {
          self._finish(action, row, "error", failure(answer, "The sign-in to " + row.name + " could not start"));
          focus(button);
          return;
        }
        self._prompt(row, action, answer.body, button);
      });
    }

    // _prompt shows the sign-in document doc in the row with an oauth-prompt and opens it:
    // in a popup, in this tab (flow="page"), or as a code to enter (a device sign-in).
    _prompt(row, action, doc, button) {
      var flow = window.OAuthFlow;
      if (!flow || typeof flow.renderPrompt !== "function") {
        this._finish(action, row, "error", "The sign-in cannot be shown: load oauth-prompt.js before oauth-connections.js.");
        focus(button);
        return;
      }
      var item = this._itemOf(row.id);
      var slot = item && find(item, function (n) { return n.getAttribute("data-role") === "prompt"; });
      slot.removeAttribute("hidden");
      var a = { row: row, action: action, slot: slot, doc: doc, before: row.connection, timer: 0 };
      a.prompt = flow.renderPrompt(slot, doc, { apiBase: this._apiBase(), providerName: row.name });
      this._active = a;
      this._say("", "");
      if (doc.userCode) {
        this._pollDevice(a);
        focus(find(slot, function (n) { return n.getAttribute("data-action") === "copy"; }));
      } else if (this.getAttribute("flow") === "page") {
        this._openHere(a);
      } else {
        a.prompt.connect();
        if (slot.getAttribute("data-status") !== "working") {
          focus(find(slot, function (n) { return n.tagName === "A" || n.tagName === "BUTTON"; }));
        }
      }
    }

    // _openHere sends this tab to the sign-in: its link, or, for a sign-in bound to this
    // browser, the prompt's POST to /start.
    _openHere(a) {
      if (a.doc.binding) {
        a.prompt.startIn("_self");
        return;
      }
      if (!isHTTPURL(a.doc.authUrl)) {
        this._finish(a.action, a.row, "error", "The sign-in to " + a.row.name + " could not start.");
        this._cancelActive();
        return;
      }
      this._say("Opening the sign-in to " + a.row.name + "\u2026", "");
      window.location.assign(a.doc.authUrl);
    }

    // _pollDevice lists the connections every DEVICE_POLL_MS while a sign-in with a code is
    // pending, and settles the prompt once the connection shows up.
    _pollDevice(a) {
      var self = this;
      a.timer = window.setInterval(function () {
        if (a.doc.expiresAt > 0 && Date.now() > a.doc.expiresAt) {
          window.clearInterval(a.timer);
          return;
        }
        call(self._apiBase(), "GET", "").then(function (answer) {
          var rows = answer.ok ? readList(answer.body) : null;
          var now = rows && rows.filter(function (r) { return r.id === a.row.id; })[0];
          if (self._active === a && now && connectedAgain(a.before, now.connection)) {
            window.clearInterval(a.timer);
            a.prompt.update(Object.assign({}, a.doc, { status: "success", account: now.connection.account }));
          }
        });
      }, DEVICE_POLL_MS);
    }

    // _onDone hears the prompt's outcome: a success lists again and announces it; a failure
    // stays shown in the row, with the prompt's way to try again.
    _onDone(ev) {
      var a = this._active;
      if (!a || ev.target !== a.slot) {
        return;
      }
      var detail = ev.detail || {};
      if (detail.status !== "success") {
        this._emit("oauthflow:change", { action: a.action, provider: a.row.id, status: "error", message: String(detail.message || "") });
        focus(find(a.slot, function (n) { return n.tagName === "BUTTON"; }));
        return;
      }
      this._cancelActive();
      var self = this;
      this.refresh().then(function () {
        var row = self._rowOf(a.row.id);
        var account = row && row.connection && row.connection.account;
        var verb = a.action === "reconnect" ? "Reconnected " : "Connected ";
        self._finish(a.action, a.row, "success", verb + a.row.name + (account ? " as " + account : "") + ".");
        self._focusRow(a.row.id);
      });
    }

    _cancelActive() {
      var a = this._active;
      if (!a) {
        return;
      }
      this._active = null;
      window.clearInterval(a.timer);
      if (a.prompt) {
        a.prompt.destroy();
      }
      clear(a.slot);
      a.slot.removeAttribute("data-oauthflow");
      a.slot.removeAttribute("data-status");
      a.slot.removeAttribute("data-reason");
      a.slot.setAttribute("hidden", "");
    }

    _finish(action, row, status, message) {
      this._say(message, status);
      this._emit("oauthflow:change", { action: action, provider: row.id, status: status, message: message });
    }

    // ---- a full-page sign-in's return ----

    // _takeReturn reads the outcome the API's callback page added to this page's address
    // (?oauth=success|error&provider=ID) and removes it, so a reload does not repeat it.
    _takeReturn() {
      var q = new window.URLSearchParams(window.location.search);
      var status = q.get("oauth");
      var provider = q.get("provider");
      if ((status !== "success" && status !== "error") || !provider) {
        return null;
      }
      if (window.history && typeof window.history.replaceState === "function") {
        window.history.replaceState(window.history.state, "", returnAddress());
      }
      return { status: status, provider: provider };
    }

    // _announceReturn says how a full-page sign-in ended, for a provider the listing names:
    // the address is anyone's to write, so the words are the widget's and the name the list's.
    _announceReturn() {
      var r = this._returned;
      this._returned = null;
      var row = r && this._rowOf(r.provider);
      if (!row) {
        return;
      }
      var connected = r.status === "success" && row.connection;
      var account = connected && row.connection.account;
      var message = connected ? "Connected " + row.name + (account ? " as " + account : "") + "." :
        row.name + " was not connected. Try again.";
      this._finish("connect", row, connected ? "success" : "error", message);
      this._focusRow(row.id);
    }

    // ---- disconnect ----

    _askDisconnect(row, button) {
      this._confirming = { row: row, button: button };
      var c = row.connection;
      this._dialogTitle.textContent = "Disconnect " + row.name + "?";
      this._dialogText.textContent = "The app will no longer act for you at " + row.name +
        (c && c.account ? " as " + c.account : "") + ". Its access is revoked at " + row.name +
        " where the provider allows it; you can connect again later.";
      this._confirmButton.setAttribute("aria-label", "Disconnect " + row.name);
      if (typeof this._dialog.showModal === "function") {
        this._dialog.showModal();
      } else {
        this._dialog.setAttribute("open", "");
      }
      focus(this._cancelButton);
    }

    _closeDialog() {
      if (typeof this._dialog.close === "function") {
        this._dialog.close();
      } else {
        this._dialog.removeAttribute("open");
        this._dialogClosed();
      }
    }

    // _dialogClosed puts focus back on the Disconnect button when the dialog closed without
    // a decision (Cancel, Escape).
    _dialogClosed() {
      var asked = this._confirming;
      this._confirming = null;
      if (asked) {
        focus(asked.button);
      }
    }

    _disconnect() {
      var asked = this._confirming;
      this._confirming = null;
      this._closeDialog();
      if (!asked) {
        return;
      }
      var row = asked.row;
      var self = this;
      if (this._active && this._active.row.id === row.id) {
        this._cancelActive();
      }
      this._say("Disconnecting " + row.name + "\u2026", "");
      call(this._apiBase(), "DELETE", "/" + encodeURIComponent(row.id)).then(function (answer) {
        if (!answer.ok && answer.status !== 404) {
          self._finish("disconnect", row, "error", failure(answer, row.name + " could not be disconnected"));
          focus(asked.button);
          return;
        }
        self.refresh().then(function () {
          self._finish("disconnect", row, "success", "Disconnected " + row.name + ".");
          self._focusRow(row.id);
        });
      });
    }
  }

  window.customElements.define("oauth-connections", OAuthConnectionsElement);
})(window);
