// The quickstart page: one card per registered provider. "Connect" starts the
// "oauth" workflow on the server and renders its prompt document with the
// oauth-prompt widget; "Sign in with a code" (for a provider with the device
// grant) starts one whose prompt shows a code to enter on any device, and polls
// the sign-in's document until the user has acted. A connected card shows who
// connected, the token's fingerprint and expiry, calls the protected API, and
// disconnects. The "Connected accounts" section is the oauth-connections
// widget, on the library's connections endpoint; each side lists again when
// the other changed something.
(function () {
  "use strict";
  var SIGN_IN_POLL_MS = 1000;
  var clockSkew = 0; // server time minus browser time, ms
  var cards = {};
  var accounts = document.querySelector("oauth-connections");

  function refreshAccounts() {
    if (accounts && typeof accounts.refresh === "function") accounts.refresh();
  }

  if (accounts) {
    accounts.addEventListener("oauthflow:change", function (ev) {
      if (ev.detail.status === "success") load();
    });
  }

  function api(method, path, body) {
    var init = { method: method, headers: {}, credentials: "same-origin" };
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    return fetch(path, init).then(function (resp) {
      return resp.json().then(function (data) { return { status: resp.status, data: data }; });
    });
  }

  function part(card, role) { return card.querySelector('[data-role="' + role + '"]'); }

  function expiryText(expiresAt) {
    if (!expiresAt) return "never";
    var left = Math.round((expiresAt - (Date.now() + clockSkew)) / 1000);
    if (left <= 0) return "expired " + -left + " s ago (the next call refreshes it)";
    if (left <= 60) return "in " + left + " s (inside the 60 s refresh window: the next call refreshes it)";
    return "in " + left + " s";
  }

  function render(view) {
    var card = cards[view.id];
    if (!card) {
      card = document.getElementById("provider-card").content.firstElementChild.cloneNode(true);
      card.setAttribute("data-provider", view.id);
      part(card, "name").textContent = view.name;
      card.querySelector('[data-action="call"]').addEventListener("click", function () { call(view.id); });
      card.querySelector('[data-action="disconnect"]').addEventListener("click", function () { disconnect(view.id); });
      document.getElementById("providers").appendChild(card);
      cards[view.id] = card;
    }
    card.setAttribute("data-connected", view.connected ? "true" : "false");
    card.view = view;
    part(card, "account").hidden = !view.connected;
    part(card, "token").hidden = !view.connected;
    part(card, "actions").hidden = !view.connected;
    if (view.connected) {
      part(card, "prompt").replaceChildren();
      part(card, "account").textContent = "Connected to " + view.name + (view.account ? " as " + view.account : "");
      part(card, "fingerprint").textContent = view.token.fingerprint;
      part(card, "scope").textContent = view.token.scope || "(none)";
      part(card, "refreshes").textContent = String(view.refreshes);
      part(card, "expiry").textContent = expiryText(view.token.expiresAt);
      part(card, "health").textContent = healthText(view);
      part(card, "connected-at").textContent = view.connectedAt ? new Date(view.connectedAt).toLocaleString() : "unknown";
    } else if (!part(card, "prompt").firstChild) {
      showStart(card, view);
      part(card, "result").hidden = true;
    }
  }

  // showStart offers the provider's sign-ins: through a popup, and with a code
  // when the provider offers the device grant.
  function showStart(card, view) {
    var slot = part(card, "prompt");
    slot.appendChild(startButton("start", "Connect " + view.name, function () { connect(view); }));
    if (view.device) {
      slot.appendChild(startButton("start-device", "Sign in with a code", function () { connectDevice(view); }));
    }
  }

  function startButton(action, label, onClick) {
    var button = document.createElement("button");
    button.type = "button";
    button.setAttribute("data-action", action);
    button.className = action === "start" ? "start" : "start secondary";
    button.textContent = label;
    button.addEventListener("click", onClick);
    return button;
  }

  // healthText says how the connection's refreshes are going.
  function healthText(view) {
    if (view.health === "refresh_failing") {
      return "refresh failing: " + view.attempts + " in a row (" + view.lastError + "), next try " +
        new Date(view.nextAttempt).toLocaleTimeString();
    }
    var text = view.health || "unknown";
    if (view.refreshedAt) text += ", refreshed " + new Date(view.refreshedAt).toLocaleTimeString();
    return text;
  }

  function load() {
    return api("GET", "/app/session").then(function (r) {
      var first = document.querySelector("#providers > p");
      if (first) first.remove();
      clockSkew = r.data.now - Date.now();
      r.data.providers.forEach(render);
    });
  }

  // connect launches the sign-in on the server and shows its prompt with the widget.
  function connect(view) {
    var slot = part(cards[view.id], "prompt");
    api("POST", "/app/connect", { provider: view.id }).then(function (r) {
      if (r.status !== 200) { slot.textContent = "Could not start the sign-in: " + r.data.error; return; }
      showPrompt(view, r.data.prompt).connect(); // the click that got us here lets the popup open
    });
  }

  // connectDevice launches a sign-in with a code: the widget shows the code and
  // where to enter it, and the page hands it each new prompt document until the
  // sign-in settles (the server's worker learns the outcome from the provider).
  function connectDevice(view) {
    var slot = part(cards[view.id], "prompt");
    api("POST", "/app/connect-device", { provider: view.id }).then(function (r) {
      if (r.status !== 200) { slot.textContent = "Could not start the sign-in: " + r.data.error; return; }
      watch(showPrompt(view, r.data.prompt), r.data.runId);
    });
  }

  // watch polls the sign-in runId's prompt document while it is pending and
  // the widget is on the page; the widget redraws only what changed.
  function watch(prompt, runId) {
    setTimeout(function () {
      if (!prompt.element.isConnected) return;
      api("GET", "/app/signins/" + encodeURIComponent(runId)).then(function (r) {
        if (r.status === 200) prompt.update(r.data.prompt);
        if (r.status === 200 ? r.data.prompt.status === "pending" : r.status >= 500) watch(prompt, runId);
      }, function () { watch(prompt, runId); }); // offline for a moment: keep trying
    }, SIGN_IN_POLL_MS);
  }

  // showPrompt renders a prompt document with the widget in the card. A sign-in
  // that connected reloads the card; a sign-in with a code that did not (denied,
  // expired) has no retry of its own, so the card offers a new sign-in below it.
  function showPrompt(view, doc) {
    var slot = part(cards[view.id], "prompt");
    slot.replaceChildren();
    var holder = document.createElement("div");
    slot.appendChild(holder);
    holder.addEventListener("oauthflow:done", function (ev) {
      if (ev.detail.status === "success") setTimeout(function () { load().then(refreshAccounts); }, 600);
      else if (doc.userCode) showStart(cards[view.id], view);
    });
    return OAuthFlow.renderPrompt(holder, doc, { providerName: view.name });
  }

  function call(id) {
    var out = part(cards[id], "result");
    out.hidden = false;
    out.textContent = "Calling…";
    api("POST", "/app/call", { provider: id }).then(function (r) {
      out.textContent = r.status === 200
        ? "GET /demo/api/me with token " + r.data.fingerprint + "\n" + JSON.stringify(r.data.me, null, 2)
        : "Error " + r.status + ": " + r.data.error;
      out.setAttribute("data-status", r.status === 200 ? "success" : "error");
      return load().then(refreshAccounts); // a call may have refreshed the token, or learned the grant ended
    });
  }

  function disconnect(id) {
    api("POST", "/app/disconnect", { provider: id }).then(function () {
      part(cards[id], "result").hidden = true;
      return load().then(refreshAccounts);
    });
  }

  setInterval(function () {
    Object.keys(cards).forEach(function (id) {
      var v = cards[id].view;
      if (v && v.connected) part(cards[id], "expiry").textContent = expiryText(v.token.expiresAt);
    });
  }, 1000);
  load();
})();
