// Unit tests of assets/oauth-prompt.js in a fake browser (fakedom.mjs). Run by
// TestJavaScript in js_test.go, or directly: node --test testdata/
import test from "node:test";
import assert from "node:assert/strict";
import { makeBrowser, settle, jsonResponse, FakePopup } from "./fakedom.mjs";

const ORIGIN = "https://app.example";
const doc = {
  provider: "github",
  authUrl: "https://auth.example/authorize?client_id=c&state=S1",
  state: "S1",
  status: "pending",
};

// setup loads the widget (as served for opts.served, see fakedom's load) and
// renders doc into a fresh element.
function setup(opts = {}, options = { providerName: "GitHub" }, d = doc) {
  const b = makeBrowser({ origin: ORIGIN, ...opts });
  b.load("oauth-prompt.js", opts.served);
  const root = b.document.createElement("section");
  b.document.body.appendChild(root);
  const events = [];
  root.addEventListener("oauthflow:done", (e) => events.push(e));
  const prompt = b.window.OAuthFlow.renderPrompt(root, d, options);
  const q = (name, value) => root.byAttr(name, value);
  return { ...b, root, prompt, events, q };
}

function setupOpen(opts = {}, options) {
  const popup = new FakePopup();
  const t = setup({ open: () => popup, ...opts }, options);
  t.q("data-action", "connect").click();
  return { ...t, popup };
}

const callback = (extra = {}) => ({ type: "oauthflow:callback", code: "C1", state: "S1", iss: "https://auth.example", ...extra });

test("pending shows a connect button and the message hook", () => {
  const t = setup();
  assert.equal(t.root.getAttribute("data-status"), "pending");
  assert.equal(t.q("data-action", "connect").textContent, "Connect GitHub");
  assert.equal(t.q("data-action", "connect").getAttribute("type"), "button");
  assert.ok(t.q("data-role", "message"));
  assert.equal(t.openCalls.length, 0);
});

test("the provider ID names the provider without provider-name", () => {
  const t = setup({}, {});
  assert.equal(t.q("data-action", "connect").textContent, "Connect github");
});

test("connect opens a centred popup named after the state", () => {
  const t = setupOpen();
  assert.deepEqual(t.openCalls, [{
    url: doc.authUrl,
    name: "oauthflow-S1",
    // left = 100 + (1200-520)/2, top = 50 + (900-680)/2
    features: "popup,width=520,height=680,left=440,top=160",
  }]);
  assert.ok(t.popup.focused);
  assert.equal(t.root.getAttribute("data-status"), "working");
  assert.equal(t.q("data-action", "connect"), null);
});

test("a blocked popup offers a same-tab link and a retry", () => {
  let blocked = true;
  const popup = new FakePopup();
  const t = setup({ open: () => (blocked ? null : popup) });
  t.q("data-action", "connect").click();
  assert.equal(t.root.getAttribute("data-status"), "pending");
  assert.equal(t.root.getAttribute("data-reason"), "popup_blocked");
  assert.match(t.q("data-role", "message").textContent, /Popup blocked/);
  const link = t.q("data-role", "fallback-link");
  assert.equal(link.tagName, "A");
  assert.equal(link.getAttribute("href"), doc.authUrl);
  assert.equal(link.getAttribute("rel"), "noopener noreferrer");
  assert.equal(link.getAttribute("target"), null);
  assert.equal(t.events.length, 0, "a blocked popup is not an outcome");

  blocked = false;
  t.q("data-action", "retry").click();
  assert.equal(t.openCalls.length, 2);
  assert.equal(t.root.getAttribute("data-status"), "working");
  assert.equal(t.root.getAttribute("data-reason"), null);
});

// A bound sign-in (Config.BindSignIns) carries a secret no link does: the
// popup opens empty and a POST to /start with the state and the secret takes
// it to the provider, setting the browser's cookie on the way.
const boundDoc = { ...doc, binding: "B1-secret" };

test("a bound sign-in opens the popup empty and posts to /start in it", () => {
  const popup = new FakePopup();
  const t = setup({ open: () => popup }, { providerName: "GitHub", apiBase: "https://api.example/" }, boundDoc);
  t.q("data-action", "connect").click();
  assert.deepEqual(t.openCalls.map((c) => [c.url, c.name]), [["", "oauthflow-S1"]]);
  assert.deepEqual(t.submits, [{
    action: "https://api.example/api/v1/oauth/start", method: "POST", target: "oauthflow-S1",
    enctype: "application/x-www-form-urlencoded", fields: { state: "S1", binding: "B1-secret" }, connected: true,
  }]);
  assert.equal(t.document.body.byAttr("action", "https://api.example/api/v1/oauth/start"), null, "the form is gone");
  assert.equal(t.root.getAttribute("data-status"), "working");
});

test("an unbound sign-in posts nothing", () => {
  const t = setupOpen();
  assert.equal(t.openCalls[0].url, doc.authUrl);
  assert.deepEqual(t.submits, []);
});

test("a bound sign-in whose popup is blocked offers /start in this tab, not a link", () => {
  const t = setup({ open: () => null }, { providerName: "GitHub" }, boundDoc);
  t.q("data-action", "connect").click();
  assert.equal(t.root.getAttribute("data-reason"), "popup_blocked");
  const fallback = t.q("data-role", "fallback-link");
  assert.equal(fallback.tagName, "BUTTON");
  assert.equal(fallback.getAttribute("href"), null);
  assert.equal(t.submits.length, 0);
  fallback.click();
  assert.equal(t.submits.length, 1);
  assert.equal(t.submits[0].target, "_self");
  assert.equal(t.submits[0].action, "/api/v1/oauth/start");
  assert.deepEqual(t.submits[0].fields, { state: "S1", binding: "B1-secret" });
});

test("a bound sign-in completes with the browser's cookies, for the API on another origin", async () => {
  const popup = new FakePopup();
  const t = setup({ open: () => popup }, { providerName: "GitHub", apiBase: "https://api.example" }, boundDoc);
  t.q("data-action", "connect").click();
  t.message(callback(), ORIGIN, popup);
  await settle();
  assert.equal(t.fetchCalls[0].init.credentials, "include");
  assert.equal(t.root.getAttribute("data-status"), "success");
});

test("window.open throwing counts as blocked", () => {
  const t = setup({ open: () => { throw new Error("denied"); } });
  t.q("data-action", "connect").click();
  assert.equal(t.root.getAttribute("data-reason"), "popup_blocked");
});

test("messages are filtered by origin, source and state", async () => {
  const t = setupOpen({}, { providerName: "GitHub", apiBase: "https://api.example/" });
  const other = new FakePopup();
  t.message(callback(), "https://evil.example", t.popup); // wrong origin
  t.message(callback(), "https://api.example", t.popup); // API origin may not send codes
  t.message(callback(), ORIGIN, other); // wrong source
  t.message(callback(), ORIGIN, null); // no source
  t.message(callback({ state: "S2" }), ORIGIN, t.popup); // wrong state
  t.message(callback({ state: undefined }), ORIGIN, t.popup); // no state
  t.message("S1", ORIGIN, t.popup); // not an object
  t.message(null, ORIGIN, t.popup);
  t.message({ type: "other", state: "S1" }, ORIGIN, t.popup); // unknown type
  t.message({ type: "oauthflow:result", state: "S1", status: "success" }, "https://evil.example", t.popup);
  await settle();
  assert.equal(t.fetchCalls.length, 0);
  assert.equal(t.root.getAttribute("data-status"), "working");
  assert.equal(t.events.length, 0);

  t.message(callback(), ORIGIN, t.popup);
  await settle();
  assert.equal(t.fetchCalls.length, 1);
  assert.equal(t.root.getAttribute("data-status"), "success");
});

test("messages are ignored before any popup was opened", async () => {
  const t = setup();
  t.message(callback(), ORIGIN, null);
  t.message(callback(), ORIGIN, undefined);
  await settle();
  assert.equal(t.fetchCalls.length, 0);
  assert.equal(t.root.getAttribute("data-status"), "pending");
});

test("a callback message is completed through POST /complete", async () => {
  let answer;
  const t = setupOpen({ fetch: () => new Promise((r) => { answer = r; }) }, { providerName: "GitHub", apiBase: "https://api.example/" });
  t.message(callback(), ORIGIN, t.popup);
  assert.equal(t.root.getAttribute("data-status"), "working");
  assert.match(t.q("data-role", "message").textContent, /Completing/);
  assert.equal(t.fetchCalls.length, 1);
  const call = t.fetchCalls[0];
  assert.equal(call.url, "https://api.example/api/v1/oauth/complete");
  assert.equal(call.init.method, "POST");
  assert.equal(call.init.credentials, "same-origin", "the app's cookies go to its own origin only");
  assert.deepEqual({ ...call.init.headers }, { "Content-Type": "application/json" });
  assert.deepEqual(call.body, { code: "C1", state: "S1", iss: "https://auth.example" });

  answer(jsonResponse(200, { ok: true, provider: "github" }));
  await settle();
  assert.equal(t.root.getAttribute("data-status"), "success");
  assert.match(t.q("data-role", "message").textContent, /^Connected to GitHub/);
  assert.equal(t.events.length, 1);
  assert.deepEqual({ ...t.events[0].detail }, {
    state: "S1", status: "success", provider: "github", message: "Connected to GitHub.", error: "",
  });
  assert.ok(t.events[0].bubbles);
  assert.equal(t.timers.pending(), 0, "no poll or timeout left running");
});

test("the same-origin default and the omitted iss", async () => {
  const t = setupOpen({}, {});
  t.message(callback({ iss: undefined }), ORIGIN, t.popup);
  await settle();
  assert.equal(t.fetchCalls[0].url, "/api/v1/oauth/complete");
  assert.deepEqual(t.fetchCalls[0].body, { code: "C1", state: "S1" });
});

test("a provider error is posted in the error form and shown with a retry", async () => {
  const t = setupOpen({ fetch: async () => jsonResponse(200, { ok: true, provider: "github" }) });
  t.message(callback({ code: "", iss: "", error: "access_denied", error_description: "The user said <b>no</b>" }), ORIGIN, t.popup);
  await settle();
  assert.deepEqual(t.fetchCalls[0].body, { state: "S1", error: "access_denied", error_description: "The user said <b>no</b>" });
  assert.equal(t.root.getAttribute("data-status"), "error");
  assert.equal(t.q("data-role", "message").textContent, "Sign-in not completed: The user said <b>no</b>");
  assert.equal(t.q("data-action", "retry").textContent, "Try again");
  assert.equal(t.events[0].detail.status, "error");
  assert.equal(t.events[0].detail.error, "access_denied");
});

test("a provider error carries the callback's iss, which the server checks (RFC 9207)", async () => {
  const t = setupOpen({ fetch: async () => jsonResponse(200, { ok: true, provider: "github" }) });
  t.message(callback({ code: "", error: "access_denied" }), ORIGIN, t.popup);
  await settle();
  assert.deepEqual(t.fetchCalls[0].body, { state: "S1", error: "access_denied", iss: "https://auth.example" });
});

test("an overlong provider description is cut, as the server cuts it", async () => {
  const t = setupOpen({ fetch: async () => jsonResponse(200, { ok: true, provider: "github" }) });
  t.message(callback({ code: "", error: "access_denied", error_description: "x".repeat(5000) }), ORIGIN, t.popup);
  await settle();
  assert.equal(t.q("data-role", "message").textContent, "Sign-in not completed: " + "x".repeat(300) + "\u2026");
});

test("a failed exchange shows the server's message", async () => {
  const t = setupOpen({ fetch: async () => jsonResponse(400, { ok: false, error: "invalid_state", message: "This sign-in link has expired or was already used." }) });
  t.message(callback(), ORIGIN, t.popup);
  await settle();
  assert.equal(t.root.getAttribute("data-status"), "error");
  assert.equal(t.root.getAttribute("data-reason"), "invalid_state");
  assert.equal(t.q("data-role", "message").textContent, "This sign-in link has expired or was already used.");
  assert.ok(t.q("data-action", "retry"));
  assert.equal(t.events[0].detail.message, "This sign-in link has expired or was already used.");
});

test("a non-JSON failure and a network failure get generic messages", async () => {
  const bad = setupOpen({ fetch: async () => ({ ok: false, status: 502, json: async () => { throw new SyntaxError("html"); } }) });
  bad.message(callback(), ORIGIN, bad.popup);
  await settle();
  assert.equal(bad.root.getAttribute("data-status"), "error");
  assert.match(bad.q("data-role", "message").textContent, /HTTP 502/);

  const down = setupOpen({ fetch: () => Promise.reject(new TypeError("Failed to fetch")) });
  down.message(callback(), ORIGIN, down.popup);
  await settle();
  assert.equal(down.root.getAttribute("data-reason"), "network_error");
  assert.match(down.q("data-role", "message").textContent, /could not be reached/);
});

test("a result message from the API callback page is shown without a POST", async () => {
  const ok = setupOpen();
  ok.message({ type: "oauthflow:result", state: "S1", status: "success", provider: "github" }, ORIGIN, ok.popup);
  await settle();
  assert.equal(ok.fetchCalls.length, 0);
  assert.equal(ok.root.getAttribute("data-status"), "success");
  assert.equal(ok.events[0].detail.provider, "github");

  const bad = setupOpen({}, { apiBase: "https://api.example" });
  bad.message({ type: "oauthflow:result", state: "S1", status: "error", provider: "github", message: "Access was denied." }, "https://api.example", bad.popup);
  await settle();
  assert.equal(bad.fetchCalls.length, 0);
  assert.equal(bad.root.getAttribute("data-status"), "error");
  assert.equal(bad.q("data-role", "message").textContent, "Access was denied.");
  assert.ok(bad.q("data-action", "retry"));
});

const API = "http://127.0.0.1:8081"; // the API on another origin than the page
const result = (extra = {}) => ({ type: "oauthflow:result", state: "S1", status: "success", provider: "github", ...extra });

test("served with an API base, the widget accepts the API callback page's result from the API's origin only", async () => {
  const t = setupOpen({ served: { apiBase: API } }, {});
  t.message(result(), "http://localhost:8081", t.popup); // the API's port on another host
  t.message(result(), "http://127.0.0.1:8082", t.popup); // another port
  t.message(result(), "https://127.0.0.1:8081", t.popup); // another scheme
  t.message(result(), "https://evil.example", t.popup);
  t.message(callback(), API, t.popup); // the API's origin may not send codes
  await settle();
  assert.equal(t.root.getAttribute("data-status"), "working");
  assert.equal(t.fetchCalls.length, 0);
  assert.equal(t.events.length, 0);

  t.message(result({ status: "error", message: "Access was denied." }), API, t.popup);
  await settle();
  assert.equal(t.root.getAttribute("data-status"), "error");
  assert.equal(t.q("data-role", "message").textContent, "Access was denied.");
  assert.equal(t.fetchCalls.length, 0, "a result needs no POST");
});

test("served with an API base, a callback from the page's own origin completes through that API", async () => {
  const t = setupOpen({ served: { apiBase: API + "/svc" } }, {});
  t.message(callback(), ORIGIN, t.popup);
  await settle();
  assert.equal(t.fetchCalls[0].url, API + "/svc/api/v1/oauth/complete");
  assert.equal(t.fetchCalls[0].init.credentials, "same-origin");
  assert.equal(t.root.getAttribute("data-status"), "success");
});

test("without an API base the widget refuses a result from any other origin", async () => {
  const t = setupOpen({}, {});
  t.message(result(), API, t.popup);
  await settle();
  assert.equal(t.root.getAttribute("data-status"), "working");
  t.message(result(), ORIGIN, t.popup);
  await settle();
  assert.equal(t.root.getAttribute("data-status"), "success");
});

test("the host's apiBase wins over the one the script was served with", async () => {
  const t = setupOpen({ served: { apiBase: API } }, { apiBase: "https://api.example" });
  t.message(result(), API, t.popup);
  await settle();
  assert.equal(t.root.getAttribute("data-status"), "working");
  t.message(result(), "https://api.example", t.popup);
  await settle();
  assert.equal(t.root.getAttribute("data-status"), "success");
});

test("a popup closed early is an error after one grace tick", () => {
  const t = setupOpen();
  t.timers.tick(500);
  assert.equal(t.root.getAttribute("data-status"), "working");
  t.popup.closed = true;
  t.timers.tick(500);
  assert.equal(t.root.getAttribute("data-status"), "working", "a message posted just before closing still wins");
  t.timers.tick(500);
  assert.equal(t.root.getAttribute("data-status"), "error");
  assert.equal(t.root.getAttribute("data-reason"), "popup_closed");
  assert.equal(t.q("data-role", "message").textContent, "The sign-in window was closed.");
  assert.ok(t.q("data-action", "retry"));
  assert.equal(t.events.length, 1);
  assert.equal(t.timers.pending(), 0);
});

test("a message just before the close is still accepted", async () => {
  const t = setupOpen();
  t.popup.closed = true;
  t.timers.tick(500);
  t.message({ type: "oauthflow:result", state: "S1", status: "success", provider: "github" }, ORIGIN, t.popup);
  t.timers.tick(2000);
  assert.equal(t.root.getAttribute("data-status"), "success");
  assert.equal(t.events.length, 1);
});

test("the sign-in times out after timeoutMs", () => {
  const t = setupOpen({}, { timeoutMs: 5000 });
  t.timers.tick(4999);
  assert.equal(t.root.getAttribute("data-status"), "working");
  t.timers.tick(1);
  assert.equal(t.root.getAttribute("data-status"), "error");
  assert.equal(t.root.getAttribute("data-reason"), "timeout");
  assert.equal(t.q("data-role", "message").textContent, "Sign-in timed out.");
  assert.ok(t.popup.closed, "the widget closes its popup");
  assert.ok(t.q("data-action", "retry"));
  assert.equal(t.timers.pending(), 0);
});

test("the default timeout is ten minutes", () => {
  const t = setupOpen();
  t.timers.tick(10 * 60 * 1000 - 1);
  assert.equal(t.root.getAttribute("data-status"), "working");
  t.timers.tick(1);
  assert.equal(t.root.getAttribute("data-reason"), "timeout");
});

test("messages after a timeout are ignored", async () => {
  const t = setupOpen({}, { timeoutMs: 1000 });
  t.timers.tick(1000);
  t.message(callback(), ORIGIN, t.popup);
  await settle();
  assert.equal(t.fetchCalls.length, 0);
  assert.equal(t.root.getAttribute("data-reason"), "timeout");
});

test("retry announces itself and reopens the same authUrl", () => {
  const t = setupOpen({}, { timeoutMs: 1000 });
  t.timers.tick(1000);
  const retries = [];
  t.document.body.addEventListener("oauthflow:retry", (e) => retries.push(e));
  t.q("data-action", "retry").click();
  assert.equal(retries.length, 1, "the event bubbles to the host");
  assert.deepEqual({ ...retries[0].detail }, { state: "S1" });
  assert.equal(t.openCalls.length, 2);
  assert.equal(t.openCalls[1].url, doc.authUrl);
  assert.equal(t.openCalls[1].name, "oauthflow-S1");
  assert.equal(t.root.getAttribute("data-status"), "working");
});

test("a cancelled retry does not reopen; the host relaunches with update()", () => {
  const t = setupOpen({}, { timeoutMs: 1000 });
  t.timers.tick(1000);
  t.root.addEventListener("oauthflow:retry", (e) => e.preventDefault());
  t.q("data-action", "retry").click();
  assert.equal(t.openCalls.length, 1);
  assert.equal(t.root.getAttribute("data-status"), "error");

  t.prompt.update({ ...doc, state: "S2", authUrl: "https://auth.example/authorize?state=S2" });
  assert.equal(t.root.getAttribute("data-status"), "pending");
  t.q("data-action", "connect").click();
  assert.equal(t.openCalls[1].url, "https://auth.example/authorize?state=S2");
  assert.equal(t.openCalls[1].name, "oauthflow-S2");
});

test("an answer for a replaced document is dropped", async () => {
  let answer;
  const t = setupOpen({ fetch: () => new Promise((r) => { answer = r; }) });
  t.message(callback(), ORIGIN, t.popup);
  t.prompt.update({ ...doc, state: "S2" });
  answer(jsonResponse(200, { ok: true, provider: "github" }));
  await settle();
  assert.equal(t.root.getAttribute("data-status"), "pending");
  assert.equal(t.events.length, 0);
});

test("documents with a settled status render it", () => {
  const ok = setup({}, { providerName: "GitHub" }, { ...doc, status: "success" });
  assert.equal(ok.root.getAttribute("data-status"), "success");
  assert.match(ok.q("data-role", "message").textContent, /Connected to GitHub/);
  assert.equal(ok.events.length, 0, "done is for outcomes the widget saw itself");

  const bad = setup({}, {}, { ...doc, status: "error", message: "Access was denied." });
  assert.equal(bad.root.getAttribute("data-status"), "error");
  assert.equal(bad.q("data-role", "message").textContent, "Access was denied.");
  assert.ok(bad.q("data-action", "retry"));
});

test("a stale pending copy of the same flow does not undo a shown outcome", async () => {
  const t = setupOpen();
  t.message(callback(), ORIGIN, t.popup);
  await settle();
  t.prompt.update({ ...doc });
  assert.equal(t.root.getAttribute("data-status"), "success");
  t.prompt.update({ ...doc, status: "error", message: "Revoked." });
  assert.equal(t.root.getAttribute("data-status"), "error");
});

test("an authUrl that is not http(s) is never opened or linked", () => {
  const t = setup({}, {}, { ...doc, authUrl: "javascript:alert(1)" });
  assert.equal(t.root.getAttribute("data-status"), "error");
  assert.equal(t.root.getAttribute("data-reason"), "invalid_document");
  assert.equal(t.q("data-action", "connect"), null);
  assert.equal(t.q("data-action", "retry"), null);
  t.prompt.connect();
  assert.equal(t.openCalls.length, 0);
});

test("text from documents and messages is never parsed as markup", async () => {
  // The fake DOM throws on innerHTML; this checks the text lands verbatim.
  const t = setup({}, { providerName: "<img src=x onerror=alert(1)>" }, { ...doc, message: "<script>x</script>" });
  assert.equal(t.q("data-role", "message").textContent, "<script>x</script>");
  assert.equal(t.q("data-action", "connect").textContent, "Connect <img src=x onerror=alert(1)>");
  assert.equal(t.q("data-role", "message").childNodes.length, 0);
});

test("destroy stops listening and clears timers", async () => {
  const t = setupOpen();
  assert.equal(t.window.listenerCount("message"), 1);
  t.prompt.destroy();
  assert.equal(t.window.listenerCount("message"), 0);
  assert.equal(t.timers.pending(), 0);
});

test("rendering twice into one element replaces the first controller", () => {
  const t = setup();
  t.window.OAuthFlow.renderPrompt(t.root, doc, {});
  assert.equal(t.window.listenerCount("message"), 1);
});

test("the oauth-prompt element reads the document attribute and its options", async () => {
  const t = setup();
  const el = t.document.createElement("oauth-prompt");
  el.setAttribute("api-base", "https://api.example");
  el.setAttribute("provider-name", "GitHub");
  el.setAttribute("document", JSON.stringify({ ...doc, state: "E1" }));
  assert.equal(el.getAttribute("data-status"), null, "nothing renders before it is connected");
  t.document.body.appendChild(el);
  assert.equal(el.getAttribute("data-status"), "pending");
  assert.equal(el.byAttr("data-action", "connect").textContent, "Connect GitHub");

  el.byAttr("data-action", "connect").click();
  const popupCall = t.openCalls.at(-1);
  assert.equal(popupCall.name, "oauthflow-E1");
  assert.equal(el.getAttribute("data-status"), "working");

  t.document.body.removeChild(el);
  assert.equal(t.window.listenerCount("message"), 1, "only the setup() prompt still listens");
});

test("the oauth-prompt element takes a promptDocument property, even one set before upgrade", () => {
  const t = setup();
  const el = t.document.createElement("oauth-prompt");
  el.promptDocument = { ...doc, status: "success" };
  t.document.body.appendChild(el);
  assert.equal(el.getAttribute("data-status"), "success");
  el.promptDocument = { ...doc, state: "P2" };
  assert.equal(el.getAttribute("data-status"), "pending");

  // A plain own property, as a framework might set on an element not yet upgraded.
  const early = t.document.createElement("oauth-prompt");
  Object.defineProperty(early, "promptDocument", { value: { ...doc, state: "P3" }, configurable: true, writable: true });
  t.document.body.appendChild(early);
  assert.equal(early.getAttribute("data-status"), "pending");
  early.promptDocument = { ...doc, state: "P3", status: "error", message: "No." };
  assert.equal(early.getAttribute("data-status"), "error");
});

test("an oauth-prompt with malformed JSON shows an invalid prompt", () => {
  const t = setup();
  const el = t.document.createElement("oauth-prompt");
  el.setAttribute("document", "{not json");
  t.document.body.appendChild(el);
  assert.equal(el.getAttribute("data-status"), "error");
  assert.equal(el.getAttribute("data-reason"), "invalid_document");
});

test("loading the script twice keeps the first copy", () => {
  const t = setup();
  const first = t.window.OAuthFlow;
  t.load("oauth-prompt.js");
  assert.equal(t.window.OAuthFlow, first);
});

test("a result announced on the BroadcastChannel settles the widget", async () => {
  const t = setupOpen();
  // The provider's Cross-Origin-Opener-Policy severed the popup: it looks closed at once.
  t.popup.closed = true;
  t.timers.tick(1000);
  assert.equal(t.root.getAttribute("data-reason"), "popup_closed");

  // Meanwhile the callback page, without an opener, completed the sign-in itself.
  const page = makeBrowser({ origin: ORIGIN, bus: t.bus });
  page.load("oauth-prompt.js");
  page.window.OAuthFlow.announce("S2", { status: "error", provider: "github", error: "x", message: "other flow" });
  await settle();
  assert.equal(t.root.getAttribute("data-reason"), "popup_closed", "another state is ignored");

  page.window.OAuthFlow.announce("S1", { status: "success", provider: "github", error: "", message: "" });
  await settle();
  assert.equal(t.root.getAttribute("data-status"), "success");
  assert.equal(t.events.at(-1).detail.status, "success");

  page.window.OAuthFlow.announce("S1", { status: "error", provider: "github", error: "x", message: "late" });
  await settle();
  assert.equal(t.root.getAttribute("data-status"), "success", "a shown success stays");
});

test("a destroyed widget leaves the BroadcastChannel", async () => {
  const t = setup();
  t.prompt.destroy();
  assert.equal(t.bus.get("oauthflow").size, 0);
});
