/*
 * oauthflow: the oauth-prompt widget. Plain script, no build step, no dependencies.
 *
 * Renders an OAuthPromptDocument {provider, authUrl, state, status, message?}:
 *   <oauth-prompt document='{"provider":...}' api-base="" provider-name="GitHub"></oauth-prompt>
 * or from code:
 *   var prompt = OAuthFlow.renderPrompt(element, doc, {apiBase: "", providerName: "GitHub", timeoutMs: 600000});
 * apiBase is where the API lives: "" (or no api-base attribute) means the one this script was
 * served with by Module.FrontendHandler(apiBase), or this page's origin when it was given none.
 * The widget completes callbacks through {apiBase}/api/v1/oauth/complete and accepts the API
 * callback page's result from this page's origin and from apiBase's origin, nothing else.
 * A document with a binding (Config.BindSignIns) is opened through a form POST of its state
 * and binding to {apiBase}/api/v1/oauth/start in the popup, never as a plain link, and its
 * completion is sent with the browser's cookies (credentials "include").
 *
 * DOM hooks: the root carries data-status="pending|working|success|error" (and data-reason
 * for why), buttons data-action="connect|retry", the text data-role="message".
 * Events (bubbling, on the root): "oauthflow:done" {state, status, provider, message, error}
 * and "oauthflow:retry" {state}, cancelable: preventDefault() stops the widget reopening
 * the same authUrl, so the host can launch a fresh flow and call update() with its document.
 *
 * Also exported for the callback page: OAuthFlow.complete(apiBase, fields), which posts a
 * callback's fields to {apiBase}/api/v1/oauth/complete and resolves to an outcome
 * {status: "success"|"error", provider, error, message}. It never rejects. And
 * OAuthFlow.announce(state, outcome), which the callback page uses to tell a widget on this
 * origin the outcome over the "oauthflow" BroadcastChannel when postMessage cannot reach it.
 */
(function (window) {
  "use strict";

  if (window.OAuthFlow && window.OAuthFlow.renderPrompt) {
    return; // loaded twice: keep the first copy and its custom element
  }

  var document = window.document;
  var COMPLETE_PATH = "/api/v1/oauth/complete";
  var START_PATH = "/api/v1/oauth/start"; // opens a sign-in bound to this browser (Config.BindSignIns)
  var POPUP_WIDTH = 520;
  var POPUP_HEIGHT = 680;
  var POLL_MS = 500;
  var DEFAULT_TIMEOUT_MS = 10 * 60 * 1000;
  var CALLBACK = "oauthflow:callback";
  var RESULT = "oauthflow:result";
  var CHANNEL = "oauthflow"; // BroadcastChannel for results that cannot use postMessage
  // The API base this script was served with: web.Handler writes its Options.APIBase
  // (Module.FrontendHandler's apiBase) here, as a JSON string, when it is not "".
  var DEFAULT_API_BASE = "";

  // ---- completing a callback through the API -------------------------------------------

  function completeURL(apiBase) {
    return String(apiBase || "").replace(/\/+$/, "") + COMPLETE_PATH;
  }

  function startURL(apiBase) {
    return String(apiBase || "").replace(/\/+$/, "") + START_PATH;
  }

  // completionBody is the JSON body of POST /complete for a callback's fields:
  // {code, state, iss?} or, for an error redirect, {state, error, error_description?, iss?}.
  // The iss goes with an error too: the server checks it on denials (RFC 9207).
  function completionBody(f) {
    var body;
    if (f.error) {
      body = { state: f.state, error: f.error };
      if (f.error_description) {
        body.error_description = f.error_description;
      }
    } else {
      body = { code: f.code, state: f.state };
    }
    if (f.iss) {
      body.iss = f.iss;
    }
    return body;
  }

  var MAX_MESSAGE = 300; // characters of a provider's description shown, as the server does

  function redirectErrorText(f) {
    if (f.error_description) {
      var d = String(f.error_description);
      return d.length > MAX_MESSAGE ? d.slice(0, MAX_MESSAGE) + "\u2026" : d;
    }
    if (f.error === "access_denied") {
      return "Access was denied.";
    }
    return "The provider answered " + String(f.error) + ".";
  }

  function readOutcome(res) {
    return res.json().then(null, function () {
      return null;
    }).then(function (body) {
      if (res.ok && body && body.ok === true) {
        var name = String(body.providerName || body.provider || "");
        return { status: "success", provider: String(body.provider || ""), providerName: name, error: "", message: "" };
      }
      var message = body && typeof body.message === "string" && body.message;
      return {
        status: "error",
        provider: "",
        error: (body && typeof body.error === "string" && body.error) || "http_" + res.status,
        message: message || "Sign-in could not be completed (HTTP " + res.status + ")."
      };
    });
  }

  // credentials: "same-origin" (the default) sends the app's cookies to an API on
  // the page's own origin only; "include" also to one on another origin, for a
  // bound sign-in's cookie (the server then allows it for its FrontendOrigins).
  function complete(apiBase, fields, credentials) {
    var init = {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(completionBody(fields)),
      credentials: credentials === "include" ? "include" : "same-origin",
      cache: "no-store"
    };
    var sent;
    try {
      sent = Promise.resolve(window.fetch(completeURL(apiBase), init));
    } catch (e) {
      sent = Promise.reject(e);
    }
    return sent.then(readOutcome, function () {
      return {
        status: "error",
        provider: "",
        error: "network_error",
        message: "The server could not be reached. Check your connection and try again."
      };
    }).then(function (outcome) {
      if (fields.error) {
        // The provider refused: whatever the server recorded, the user did not sign in.
        return { status: "error", provider: outcome.provider, error: String(fields.error), message: redirectErrorText(fields) };
      }
      return outcome;
    });
  }

  // ---- helpers ---------------------------------------------------------------------------

  function el(tag, attrs, text) {
    var node = document.createElement(tag);
    Object.keys(attrs).forEach(function (name) {
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

  function isHTTPURL(s) {
    try {
      var u = new window.URL(String(s), window.location.href);
      return u.protocol === "https:" || u.protocol === "http:";
    } catch (e) {
      return false;
    }
  }

  function originOf(base) {
    if (!base) {
      return "";
    }
    try {
      return new window.URL(String(base), window.location.href).origin;
    } catch (e) {
      return "";
    }
  }

  // openChannel listens on the oauthflow BroadcastChannel, where the browser has one.
  function openChannel(onMessage) {
    if (typeof window.BroadcastChannel !== "function") {
      return null;
    }
    try {
      var channel = new window.BroadcastChannel(CHANNEL);
      channel.onmessage = onMessage;
      return channel;
    } catch (e) {
      return null;
    }
  }

  // announce tells this origin's other windows the outcome for state (see onBroadcast).
  function announce(state, outcome) {
    var channel = openChannel(null);
    if (!channel) {
      return;
    }
    try {
      channel.postMessage({
        type: RESULT,
        state: state,
        status: outcome.status,
        provider: outcome.provider,
        error: outcome.error,
        message: outcome.message
      });
    } finally {
      channel.close();
    }
  }

  function popupFeatures() {
    var left = (window.screenX || 0) + ((window.outerWidth || POPUP_WIDTH) - POPUP_WIDTH) / 2;
    var top = (window.screenY || 0) + ((window.outerHeight || POPUP_HEIGHT) - POPUP_HEIGHT) / 2;
    return "popup,width=" + POPUP_WIDTH + ",height=" + POPUP_HEIGHT +
      ",left=" + Math.round(left) + ",top=" + Math.round(top);
  }

  function normaliseDocument(doc) {
    if (!doc || typeof doc !== "object") {
      return null;
    }
    return {
      provider: String(doc.provider || ""),
      authUrl: String(doc.authUrl || ""),
      state: String(doc.state || ""),
      status: doc.status === "success" || doc.status === "error" ? doc.status : "pending",
      message: typeof doc.message === "string" ? doc.message : "",
      binding: typeof doc.binding === "string" ? doc.binding : ""
    };
  }

  // ---- the prompt controller -------------------------------------------------------------

  class Prompt {
    constructor(element, doc, options) {
      this.element = element;
      this.options = {};
      this.doc = null;
      this.status = "";
      this.popup = null; // the window this attempt opened; null when none
      this.awaiting = false; // a popup is open and no answer has come yet
      this.closedSeen = false;
      this.pollTimer = 0;
      this.timeoutTimer = 0;
      this.attempt = 0; // bumped whenever an answer in flight must be dropped
      this.onMessage = this.onMessage.bind(this);
      this.checkClosed = this.checkClosed.bind(this);
      this.timedOut = this.timedOut.bind(this);
      element.setAttribute("data-oauthflow", "prompt");
      window.addEventListener("message", this.onMessage);
      this.channel = openChannel(this.onBroadcast.bind(this));
      this.update(doc, options);
    }

    // update shows a new or changed document. A new state starts over; for the same
    // state only a settled status (success, error) replaces what the widget shows,
    // so a stale "pending" copy cannot undo an answer the widget already has.
    update(doc, options) {
      if (options) {
        this.options = Object.assign({}, this.options, options);
      }
      var next = normaliseDocument(doc);
      if (!next) {
        this.reset();
        this.doc = null;
        this.fail("invalid_document", "This sign-in prompt is invalid.", false);
        return;
      }
      var sameFlow = this.doc && this.doc.state === next.state;
      this.doc = next;
      if (sameFlow && next.status === "pending" && this.status !== "") {
        if (this.status === "pending") {
          this.showPending(); // options may have changed the labels
        }
        return;
      }
      this.reset();
      if (!next.state || !isHTTPURL(next.authUrl)) {
        this.fail("invalid_document", "This sign-in prompt is invalid.", false);
      } else if (next.status === "success") {
        this.showSuccess();
      } else if (next.status === "error") {
        this.fail("error", next.message || "Sign-in was not completed.", false);
      } else {
        this.showPending();
      }
    }

    // connect opens the sign-in popup; call it from a click so the browser allows it.
    connect() {
      if (!this.doc || !isHTTPURL(this.doc.authUrl)) {
        return;
      }
      this.reset();
      var popup = null;
      var name = "oauthflow-" + this.doc.state;
      try {
        // A bound sign-in opens empty, then goes through POST /start (startIn).
        popup = window.open(this.doc.binding ? "" : this.doc.authUrl, name, popupFeatures());
      } catch (e) {
        popup = null;
      }
      if (!popup) {
        this.showBlocked();
        return;
      }
      if (this.doc.binding) {
        this.startIn(name);
      }
      this.popup = popup;
      this.awaiting = true;
      try {
        popup.focus();
      } catch (e) {
        // focusing is a courtesy
      }
      this.pollTimer = window.setInterval(this.checkClosed, POLL_MS);
      this.timeoutTimer = window.setTimeout(this.timedOut, this.timeoutMs());
      this.render("working", "", "Waiting for you to sign in to " + this.name() + " in the popup window…");
    }

    // retry announces "oauthflow:retry"; unless a listener cancels it, it reopens the same
    // authUrl (the state stays valid after a provider error, a closed window or a block).
    retry() {
      if (!this.doc) {
        return;
      }
      var ev = new window.CustomEvent("oauthflow:retry", {
        bubbles: true,
        cancelable: true,
        detail: { state: this.doc.state }
      });
      if (this.element.dispatchEvent(ev)) {
        this.connect();
      }
    }

    destroy() {
      this.reset();
      window.removeEventListener("message", this.onMessage);
      if (this.channel) {
        this.channel.close();
        this.channel = null;
      }
      this.status = "destroyed";
    }

    // reset stops waiting for the current attempt and drops any answer in flight.
    reset() {
      this.stopWaiting();
      this.popup = null;
      this.attempt++;
    }

    stopWaiting() {
      this.awaiting = false;
      this.closedSeen = false;
      if (this.pollTimer) {
        window.clearInterval(this.pollTimer);
        this.pollTimer = 0;
      }
      if (this.timeoutTimer) {
        window.clearTimeout(this.timeoutTimer);
        this.timeoutTimer = 0;
      }
    }

    timeoutMs() {
      var ms = Number(this.options.timeoutMs);
      return ms > 0 ? ms : DEFAULT_TIMEOUT_MS;
    }

    // apiBase is the host's apiBase option, or the one this script was served with.
    apiBase() {
      return this.options.apiBase ? String(this.options.apiBase) : DEFAULT_API_BASE;
    }

    name() {
      return String(this.options.providerName || (this.doc && this.doc.provider) || "your account");
    }

    // accepts reports whether a message event answers the attempt in progress: it must
    // come from the popup this widget opened, from an expected origin, for this state.
    accepts(ev) {
      var data = ev.data;
      if (!this.awaiting || !this.popup || ev.source !== this.popup) {
        return false;
      }
      if (!data || typeof data !== "object" || data.state !== this.doc.state) {
        return false;
      }
      var own = ev.origin === window.location.origin;
      if (data.type === CALLBACK) {
        return own;
      }
      // The API's own callback page answers from the API's origin when that differs.
      var api = originOf(this.apiBase());
      return data.type === RESULT && (own || (api !== "" && ev.origin === api));
    }

    // onBroadcast takes a result the callback page announced after completing the sign-in
    // itself. That happens when the popup lost its opener (a provider page with a
    // Cross-Origin-Opener-Policy severs it, and the popup then looks closed), or when the
    // sign-in ran in another tab of this origin. The channel is same-origin by construction
    // and the state ties the result to this document.
    onBroadcast(ev) {
      var data = ev.data;
      if (!this.doc || this.status === "success" || !data || typeof data !== "object") {
        return;
      }
      if (data.type !== RESULT || data.state !== this.doc.state) {
        return;
      }
      this.stopWaiting();
      this.attempt++;
      this.settleResult(data);
    }

    onMessage(ev) {
      if (!this.accepts(ev)) {
        return;
      }
      var data = ev.data;
      this.stopWaiting();
      if (data.type === RESULT) {
        this.settleResult(data);
        return;
      }
      var fields = {
        code: String(data.code || ""),
        state: String(data.state),
        iss: data.iss ? String(data.iss) : "",
        error: data.error ? String(data.error) : "",
        error_description: data.error_description ? String(data.error_description) : ""
      };
      var attempt = ++this.attempt;
      var self = this;
      this.render("working", "", "Completing sign-in…");
      complete(this.apiBase(), fields, this.doc && this.doc.binding ? "include" : "same-origin").then(function (outcome) {
        if (attempt === self.attempt) {
          self.settle(outcome, !!fields.error);
        }
      });
    }

    checkClosed() {
      var closed;
      try {
        closed = this.popup.closed;
      } catch (e) {
        closed = false;
      }
      if (!closed) {
        this.closedSeen = false;
        return;
      }
      // Wait one more tick: a message the popup posted just before closing wins.
      if (!this.closedSeen) {
        this.closedSeen = true;
        return;
      }
      this.stopWaiting();
      this.fail("popup_closed", "The sign-in window was closed.", true);
    }

    timedOut() {
      var popup = this.popup;
      this.stopWaiting();
      try {
        popup.close();
      } catch (e) {
        // it may be gone already
      }
      this.fail("timeout", "Sign-in timed out.", true);
    }

    settleResult(data) {
      this.settle({
        status: data.status === "success" ? "success" : "error",
        provider: String(data.provider || this.doc.provider),
        error: data.status === "success" ? "" : String(data.error || "error"),
        message: typeof data.message === "string" ? data.message : ""
      }, false);
    }

    settle(outcome, redirectError) {
      if (outcome.status === "success") {
        this.done("success", outcome.provider, this.showSuccess(), "");
        return;
      }
      var message = outcome.message || "Sign-in was not completed.";
      if (redirectError) {
        message = "Sign-in not completed: " + message;
      }
      this.fail(outcome.error || "error", message, true, outcome.provider);
    }

    done(status, provider, message, error) {
      this.element.dispatchEvent(new window.CustomEvent("oauthflow:done", {
        bubbles: true,
        detail: {
          state: this.doc ? this.doc.state : "",
          status: status,
          provider: provider || (this.doc ? this.doc.provider : ""),
          message: message,
          error: error
        }
      }));
    }

    // startIn opens a bound sign-in in the window named target: a form POST to
    // {apiBase}/api/v1/oauth/start with the state and the sign-in's secret, which
    // no link carries; the API sets the browser's cookie and sends it on.
    startIn(target) {
      var form = el("form", {
        method: "POST",
        action: startURL(this.apiBase()),
        target: target,
        enctype: "application/x-www-form-urlencoded"
      });
      form.appendChild(el("input", { type: "hidden", name: "state", value: this.doc.state }));
      form.appendChild(el("input", { type: "hidden", name: "binding", value: this.doc.binding }));
      document.body.appendChild(form);
      try {
        form.submit();
      } finally {
        document.body.removeChild(form);
      }
    }

    // ---- views ----

    render(status, reason, message) {
      var root = this.element;
      this.status = status;
      root.setAttribute("data-status", status);
      if (reason) {
        root.setAttribute("data-reason", reason);
      } else {
        root.removeAttribute("data-reason");
      }
      clear(root);
      root.appendChild(el("p", { "data-role": "message", role: "status", "aria-live": "polite" }, message));
    }

    button(action, label) {
      var b = el("button", { type: "button", "data-action": action }, label);
      b.addEventListener("click", action === "connect" ? this.connect.bind(this) : this.retry.bind(this));
      this.element.appendChild(b);
    }

    showPending() {
      this.render("pending", "", this.doc.message || "Sign in with " + this.name() + " to continue.");
      this.button("connect", "Connect " + this.name());
    }

    showBlocked() {
      this.render("pending", "popup_blocked", "Popup blocked. Allow popups for this site and retry, or open the sign-in in this tab.");
      if (this.doc.binding) {
        // A bound sign-in cannot go through a plain link: it posts to /start in this tab.
        var b = el("button", { type: "button", "data-role": "fallback-link" }, "Open the sign-in in this tab");
        b.addEventListener("click", this.startIn.bind(this, "_self"));
        this.element.appendChild(b);
        this.button("retry", "Retry");
        return;
      }
      this.element.appendChild(el("a", {
        "data-role": "fallback-link",
        href: this.doc.authUrl,
        rel: "noopener noreferrer"
      }, "Open the sign-in in this tab"));
      this.button("retry", "Retry");
    }

    showSuccess() {
      var message = "Connected to " + this.name() + ".";
      this.render("success", "", message);
      return message;
    }

    // fail shows an error with a way to try again (when the document allows one) and,
    // when the widget learned it itself (report), tells the host with "oauthflow:done".
    fail(reason, message, report, provider) {
      this.render("error", reason, message);
      if (this.doc && isHTTPURL(this.doc.authUrl) && this.doc.state) {
        this.button("retry", "Try again");
      }
      if (report) {
        this.done("error", provider, message, reason);
      }
    }
  }

  var controllers = new WeakMap();

  // renderPrompt renders doc into element and returns its controller:
  // {element, status, update(doc, options), connect(), retry(), destroy()}.
  // options: {apiBase, providerName, timeoutMs}.
  function renderPrompt(element, doc, options) {
    var old = controllers.get(element);
    if (old) {
      old.destroy();
    }
    var prompt = new Prompt(element, doc, options || {});
    controllers.set(element, prompt);
    return prompt;
  }

  window.OAuthFlow = {
    renderPrompt: renderPrompt,
    complete: complete,
    announce: announce,
    completionBody: completionBody
  };

  // ---- <oauth-prompt> --------------------------------------------------------------------

  if (!window.customElements || !window.HTMLElement || window.customElements.get("oauth-prompt")) {
    return;
  }

  class OAuthPromptElement extends window.HTMLElement {
    static get observedAttributes() {
      return ["document", "api-base", "provider-name"];
    }

    constructor() {
      super();
      this._doc = undefined;
      this._controller = null;
      this._connected = false;
    }

    get promptDocument() {
      return this._doc !== undefined ? this._doc : this.attributeDocument();
    }

    set promptDocument(doc) {
      this._doc = doc;
      this.refresh();
    }

    get controller() {
      return this._controller;
    }

    connectedCallback() {
      // A property set before the element was upgraded shadows the accessor: move it.
      if (Object.prototype.hasOwnProperty.call(this, "promptDocument")) {
        var doc = this.promptDocument;
        delete this.promptDocument;
        this._doc = doc;
      }
      this._connected = true;
      this.refresh();
    }

    disconnectedCallback() {
      this._connected = false;
      if (this._controller) {
        this._controller.destroy();
        this._controller = null;
      }
    }

    attributeChangedCallback() {
      this.refresh();
    }

    attributeDocument() {
      var raw = this.getAttribute("document");
      if (!raw) {
        return undefined;
      }
      try {
        return JSON.parse(raw);
      } catch (e) {
        return null; // shown as an invalid prompt
      }
    }

    refresh() {
      var doc = this.promptDocument;
      if (!this._connected || doc === undefined) {
        return;
      }
      var options = {
        apiBase: this.getAttribute("api-base") || "",
        providerName: this.getAttribute("provider-name") || ""
      };
      if (this._controller) {
        this._controller.update(doc, options);
      } else {
        this._controller = renderPrompt(this, doc, options);
      }
    }
  }

  window.customElements.define("oauth-prompt", OAuthPromptElement);
})(window);
