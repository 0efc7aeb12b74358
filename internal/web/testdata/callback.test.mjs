// Unit tests of assets/callback.js (with oauth-prompt.js loaded first, as the page
// does) in a fake browser. Run by TestJavaScript in js_test.go.
import test from "node:test";
import assert from "node:assert/strict";
import { makeBrowser, settle, jsonResponse } from "./fakedom.mjs";

const ORIGIN = "https://app.example";

// page builds the DOM of assets/callback.html (the Go tests pin those hooks).
function page(apiBase, callbackFields) {
  return (document) => {
    const main = document.createElement("main");
    main.setAttribute("id", "oauth-callback");
    main.setAttribute("data-status", "pending");
    main.setAttribute("data-api-base", apiBase);
    if (callbackFields !== undefined) {
      main.setAttribute("data-callback-fields", callbackFields);
    }
    const h1 = document.createElement("h1");
    h1.setAttribute("id", "oauth-callback-title");
    h1.setAttribute("data-role", "title");
    const p = document.createElement("p");
    p.setAttribute("id", "oauth-callback-message");
    p.setAttribute("data-role", "message");
    main.appendChild(h1);
    main.appendChild(p);
    return main;
  };
}

// open loads the page at search with the given opener and fetch.
function open(search, opts = {}) {
  const b = makeBrowser({ origin: ORIGIN, search, pageRoot: page(opts.apiBase || "", opts.callbackFields), ...opts });
  b.load("oauth-prompt.js");
  b.load("callback.js");
  const root = b.document.getElementById("oauth-callback");
  const text = (role) => root.byAttr("data-role", role).textContent;
  return { ...b, root, text };
}

// sameOriginOpener records what the page posts to it.
function makeOpener(origin = ORIGIN) {
  const posted = [];
  return {
    posted,
    closed: false,
    location: { origin },
    postMessage(data, targetOrigin) {
      posted.push({ data, targetOrigin });
    },
  };
}

// plain copies a value out of the script's realm, whose objects have another
// Object.prototype, so deepEqual compares fields only.
const plain = (v) => JSON.parse(JSON.stringify(v));

const okQuery = "?code=C1&state=S1&iss=https%3A%2F%2Fauth.example";

test("as a popup it posts the fields to its opener with a strict target origin and closes", () => {
  const opener = makeOpener();
  const t = open(okQuery, { opener });
  assert.deepEqual(opener.posted.map(plain), [{
    data: { type: "oauthflow:callback", code: "C1", state: "S1", iss: "https://auth.example", error: "", error_description: "" },
    targetOrigin: ORIGIN,
  }]);
  assert.equal(t.fetchCalls.length, 0);
  assert.ok(t.window.closed);
  assert.equal(t.root.getAttribute("data-mode"), "popup");
});

test("the code leaves the address bar before anything else", () => {
  const opener = makeOpener();
  const t = open(okQuery, { opener });
  assert.deepEqual(t.log[0], ["replaceState", "/oauth/callback"]);
  assert.equal(t.window.location.search, "");
  assert.equal(opener.posted.length, 1);

  const direct = open(okQuery);
  assert.deepEqual(direct.log[0], ["replaceState", "/oauth/callback"]);
  assert.equal(direct.log[1][0], "fetch");
});

test("a popup error redirect is passed on as is", () => {
  const opener = makeOpener();
  open("?error=access_denied&error_description=Nope&state=S1", { opener });
  assert.deepEqual(plain(opener.posted[0]).data, {
    type: "oauthflow:callback", code: "", state: "S1", iss: "", error: "access_denied", error_description: "Nope",
  });
});

test("opened directly it completes through POST /complete and shows Connected", async () => {
  let answer;
  const t = open(okQuery, { apiBase: "https://api.example", fetch: () => new Promise((r) => { answer = r; }) });
  assert.equal(t.root.getAttribute("data-mode"), "direct");
  assert.equal(t.root.getAttribute("data-status"), "working");
  assert.equal(t.text("title"), "Working…");
  const call = t.fetchCalls[0];
  assert.equal(call.url, "https://api.example/api/v1/oauth/complete");
  assert.equal(call.init.method, "POST");
  assert.equal(call.init.credentials, "same-origin");
  assert.equal(call.init.headers["Content-Type"], "application/json");
  assert.deepEqual(call.body, { code: "C1", state: "S1", iss: "https://auth.example" });
  assert.equal(t.window.closed, false);

  answer(jsonResponse(200, { ok: true, provider: "github" }));
  await settle();
  assert.equal(t.root.getAttribute("data-status"), "success");
  assert.equal(t.text("title"), "Connected");
  assert.match(t.text("message"), /github/);
});

test("the success names the provider as the server does (its display name)", async () => {
  const t = open(okQuery, { apiBase: "https://api.example",
    fetch: () => Promise.resolve(jsonResponse(200, { ok: true, provider: "demo", providerName: "Demo Cloud" })) });
  await settle();
  assert.equal(t.root.getAttribute("data-status"), "success");
  assert.equal(t.text("message"), "Your Demo Cloud account is connected. You can close this window.");
});

test("without iss the body omits it; the default API base is the page's origin", async () => {
  const t = open("?code=C1&state=S1");
  await settle();
  assert.equal(t.fetchCalls[0].url, "/api/v1/oauth/complete");
  assert.deepEqual(t.fetchCalls[0].body, { code: "C1", state: "S1" });
});

test("a direct error redirect posts the error form and shows the description as text", async () => {
  const t = open("?error=access_denied&error_description=%3Cimg+src%3Dx%3E+denied&state=S1");
  await settle();
  assert.deepEqual(t.fetchCalls[0].body, { state: "S1", error: "access_denied", error_description: "<img src=x> denied" });
  assert.equal(t.root.getAttribute("data-status"), "error");
  assert.equal(t.text("title"), "Sign-in not completed");
  assert.equal(t.text("message"), "<img src=x> denied");
});

test("the extra fields the page names go with the code, as given; no other parameter, none too long, at most eight", async () => {
  const names = "realmId accounts-server z0 z1 z2 z3 z4 z5 z6 z7";
  const q = "?code=C1&state=S1&realmId=4620816365&accounts-server=https%3A%2F%2Faccounts.zoho.eu&other=LEAKED" +
    "&z0=" + "v".repeat(4097) + "&z1=1&z2=2&z3=3&z4=4&z5=5&z6=6&z7=7&a=LEAKED";
  const want = { realmId: "4620816365", "accounts-server": "https://accounts.zoho.eu", z1: "1", z2: "2", z3: "3", z4: "4", z5: "5", z6: "6" };

  const opener = makeOpener();
  open(q, { opener, callbackFields: names });
  assert.deepEqual(plain(opener.posted[0]).data, {
    type: "oauthflow:callback", code: "C1", state: "S1", iss: "", error: "", error_description: "", fields: want,
  });

  const t = open(q, { callbackFields: names });
  await settle();
  assert.deepEqual(t.fetchCalls[0].body, { code: "C1", state: "S1", fields: want });

  const none = open("?code=C1&state=S1&realmId=4620816365", { callbackFields: "" });
  await settle();
  assert.deepEqual(none.fetchCalls[0].body, { code: "C1", state: "S1" }, "a page that names none forwards none");
});

test("a failed completion shows the server's message", async () => {
  const t = open(okQuery, {
    fetch: async () => jsonResponse(400, { ok: false, error: "invalid_state", message: "This sign-in link has expired or was already used." }),
  });
  await settle();
  assert.equal(t.root.getAttribute("data-status"), "error");
  assert.equal(t.text("message"), "This sign-in link has expired or was already used.");
});

test("a closed or cross-origin opener falls back to the direct path", async () => {
  const closed = makeOpener();
  closed.closed = true;
  const a = open(okQuery, { opener: closed });
  assert.equal(closed.posted.length, 0);
  assert.equal(a.fetchCalls.length, 1);

  const foreign = makeOpener();
  Object.defineProperty(foreign, "location", { get() { throw new Error("SecurityError"); } });
  const b = open(okQuery, { opener: foreign });
  assert.equal(foreign.posted.length, 0);
  assert.equal(b.fetchCalls.length, 1);

  const other = makeOpener("https://evil.example");
  const c = open(okQuery, { opener: other });
  assert.equal(other.posted.length, 0);
  assert.equal(c.fetchCalls.length, 1);
  assert.equal(c.window.closed, false);
});

test("a callback without state, or without code and error, is refused", async () => {
  for (const search of ["?code=C1", "?state=S1", "", "?error_description=x&state=S1"]) {
    const opener = makeOpener();
    const t = open(search, { opener });
    await settle();
    assert.equal(t.root.getAttribute("data-status"), "error", search);
    assert.equal(t.text("title"), "Invalid callback");
    assert.equal(opener.posted.length, 0);
    assert.equal(t.fetchCalls.length, 0);
    assert.equal(t.window.closed, false);
  }
});

test("the page waits for DOMContentLoaded while the document is loading", () => {
  const t = makeBrowser({ origin: ORIGIN, search: okQuery, pageRoot: page(""), readyState: "loading" });
  t.load("oauth-prompt.js");
  t.load("callback.js");
  assert.equal(t.fetchCalls.length, 0);
  t.document.readyState = "interactive";
  t.document.dispatchEvent(new t.window.Event("DOMContentLoaded"));
  assert.equal(t.fetchCalls.length, 1);
});

test("opened directly it announces the outcome to widgets of its origin", async () => {
  const widget = makeBrowser({ origin: ORIGIN });
  const heard = [];
  const ch = new widget.window.BroadcastChannel("oauthflow");
  ch.onmessage = (ev) => heard.push(ev.data);

  open(okQuery, { bus: widget.bus });
  await settle();
  assert.deepEqual(heard, [{ type: "oauthflow:result", state: "S1", status: "success", provider: "github", error: "", message: "" }]);

  const popup = open(okQuery, { bus: widget.bus, opener: makeOpener() });
  await settle();
  assert.equal(heard.length, 1, "a popup that reached its opener announces nothing");
  assert.equal(popup.fetchCalls.length, 0);
});
