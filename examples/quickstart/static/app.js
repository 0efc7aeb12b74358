// The quickstart page: one card per registered provider. "Connect" starts the
// "oauth" workflow on the server and renders its prompt document with the
// oauth-prompt widget; a connected card shows the token's fingerprint and expiry,
// calls the protected API, and disconnects.
(function () {
  "use strict";
  var clockSkew = 0; // server time minus browser time, ms
  var cards = {};

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
    part(card, "token").hidden = !view.connected;
    part(card, "actions").hidden = !view.connected;
    if (view.connected) {
      part(card, "prompt").replaceChildren();
      part(card, "fingerprint").textContent = view.token.fingerprint;
      part(card, "scope").textContent = view.token.scope || "(none)";
      part(card, "refreshes").textContent = String(view.refreshes);
      part(card, "expiry").textContent = expiryText(view.token.expiresAt);
      part(card, "health").textContent = healthText(view);
      part(card, "connected-at").textContent = view.connectedAt ? new Date(view.connectedAt).toLocaleString() : "unknown";
    } else if (!part(card, "prompt").firstChild) {
      var button = document.createElement("button");
      button.type = "button";
      button.setAttribute("data-action", "start");
      button.className = "start";
      button.textContent = "Connect " + view.name;
      button.addEventListener("click", function () { connect(view); });
      part(card, "prompt").appendChild(button);
      part(card, "result").hidden = true;
    }
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
      slot.replaceChildren();
      var holder = document.createElement("div");
      slot.appendChild(holder);
      holder.addEventListener("oauthflow:done", function (ev) {
        if (ev.detail.status === "success") setTimeout(load, 600);
      });
      var prompt = OAuthFlow.renderPrompt(holder, r.data.prompt, { providerName: view.name });
      prompt.connect(); // the click that got us here lets the popup open
    });
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
      return load();
    });
  }

  function disconnect(id) {
    api("POST", "/app/disconnect", { provider: id }).then(function () {
      part(cards[id], "result").hidden = true;
      return load();
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
