// Unit tests of assets/oauth-prompt.js in a fake browser (fakedom.mjs). Run by
// TestJavaScript in js_test.go, or directly: node --test testdata/
import test from "node:test";
import assert from "node:assert/strict";
import { makeBrowser, settle, jsonResponse, FakePopup, EPOCH } from "./fakedom.mjs";

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

test("a callback message's extra fields go to POST /complete: strings only, bounded", async () => {
  const t = setupOpen({ fetch: async () => jsonResponse(200, { ok: true, provider: "github" }) });
  const fields = { realmId: "4620816365", n: 5, o: { x: 1 }, long: "v".repeat(4097) };
  for (let i = 0; i < 10; i++) fields["z" + i] = String(i);
  t.message(callback({ fields }), ORIGIN, t.popup);
  await settle();
  assert.deepEqual(t.fetchCalls[0].body, { code: "C1", state: "S1", iss: "https://auth.example",
    fields: { realmId: "4620816365", z0: "0", z1: "1", z2: "2", z3: "3", z4: "4", z5: "5", z6: "6" } });

  const e = setupOpen({ fetch: async () => jsonResponse(200, { ok: true, provider: "github" }) });
  e.message(callback({ fields: "realmId=1" }), ORIGIN, e.popup);
  await settle();
  assert.deepEqual(e.fetchCalls[0].body, { code: "C1", state: "S1", iss: "https://auth.example" }, "not an object: none");
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

test("a provider's error text is shown without the characters that would not show as themselves", async () => {
  // An OSC 8 link, a screen clear, a right-to-left override, a C1 control, a zero-width space.
  const spoof = "Go to \x1b]8;;https://evil.example\x07example.com\x1b]8;;\x07 \x1b[2J\u202egnp.exe\u202c \u009b31m\u200b.";
  for (const [fields, want] of [
    [{ error: "access_denied", error_description: spoof }, "Go to ]8;;https://evil.exampleexample.com]8;; [2Jgnp.exe 31m."],
    [{ error: "server_error\u202e\x1b[2J" }, "The provider answered server_error[2J."],
  ]) {
    const t = setupOpen({ fetch: async () => jsonResponse(200, { ok: true, provider: "github" }) });
    t.message(callback({ code: "", ...fields }), ORIGIN, t.popup);
    await settle();
    assert.equal(t.q("data-role", "message").textContent, "Sign-in not completed: " + want);
  }
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

// ---- device sign-ins (RFC 8628) ----------------------------------------------------------

const MINUTE = 60 * 1000;
const deviceDoc = {
  provider: "github",
  authUrl: "",
  state: "",
  status: "pending",
  userCode: "WDJB-MJHT",
  verificationUri: "https://example.com/device",
  verificationUriComplete: "https://example.com/device?user_code=WDJB-MJHT",
  expiresAt: EPOCH + 15 * MINUTE,
};

function setupDevice(d = {}, opts = {}, options = { providerName: "GitHub" }) {
  return setup(opts, options, { ...deviceDoc, ...d });
}

// qrModules reads back the modules an <svg data-role="qr"> draws: its path's runs, less
// the quiet zone of four.
function qrModules(image) {
  const n = Number(image.getAttribute("viewBox").split(" ")[2]) - 8;
  const rows = Array.from({ length: n }, () => new Array(n).fill(false));
  const d = image.childNodes[1].getAttribute("d");
  for (const [, x, y, w] of d.matchAll(/M(\d+) (\d+)h(\d+)v1h-\d+z/g)) {
    for (let i = 0; i < Number(w); i++) rows[Number(y) - 4][Number(x) - 4 + i] = true;
  }
  return rows;
}

const plain = (v) => JSON.parse(JSON.stringify(v)); // a value from the widget's realm, for deepEqual
const hrefs = (root) => root.all().filter((n) => n.hasAttribute("href"));

test("a device sign-in shows the code, the address as a link, a copy button, the time left and a QR code", () => {
  const t = setupDevice();
  assert.equal(t.root.getAttribute("data-status"), "pending");
  assert.equal(t.q("data-role", "message").textContent,
    "To sign in to GitHub, open this address on any device and enter the code below.");
  const code = t.q("data-role", "user-code");
  assert.equal(code.tagName, "CODE");
  assert.equal(code.textContent, "WDJB-MJHT");
  const link = t.q("data-role", "verification-uri");
  assert.equal(link.tagName, "A");
  assert.equal(link.getAttribute("href"), "https://example.com/device");
  assert.equal(link.textContent, "https://example.com/device");
  assert.equal(link.getAttribute("target"), "_blank");
  assert.equal(link.getAttribute("rel"), "noopener noreferrer");
  const copy = t.q("data-action", "copy");
  assert.equal(copy.tagName, "BUTTON");
  assert.equal(copy.getAttribute("type"), "button");
  assert.equal(copy.textContent, "Copy code");
  assert.equal(t.q("data-role", "expires").textContent, "The code expires in 15:00.");
  assert.equal(t.q("data-role", "expires").getAttribute("role"), "timer");
  assert.equal(t.q("data-action", "connect"), null);
  assert.equal(t.q("data-action", "retry"), null);

  const image = t.q("data-role", "qr");
  assert.equal(image.tagName, "svg");
  assert.equal(image.namespaceURI, "http://www.w3.org/2000/svg");
  assert.deepEqual(qrModules(image), plain(t.window.OAuthFlow.qrCode(deviceDoc.verificationUriComplete).modules),
    "the QR code is of the complete URI, which carries the code");
  assert.equal(image.childNodes[0].getAttribute("fill"), "#fff");

  t.prompt.connect();
  assert.equal(t.openCalls.length, 0, "there is no popup to open");
  assert.equal(t.events.length, 0);
});

test("the code and the address are shown exactly as the server gave them, as text", () => {
  const t = setupDevice({ userCode: "wdjb mjht <b>x</b>", verificationUri: "HTTPS://Example.COM/De%76ice?a=1&b=%3D" },
    {}, { providerName: "<i>GitHub</i>" });
  assert.equal(t.q("data-role", "user-code").textContent, "wdjb mjht <b>x</b>");
  assert.equal(t.q("data-role", "user-code").childNodes.length, 0);
  assert.equal(t.q("data-role", "verification-uri").getAttribute("href"), "HTTPS://Example.COM/De%76ice?a=1&b=%3D");
  assert.equal(t.q("data-role", "verification-uri").textContent, "HTTPS://Example.COM/De%76ice?a=1&b=%3D");
  assert.match(t.q("data-role", "message").textContent, /^To sign in to <i>GitHub<\/i>,/);
});

test("a verification URI that is not an absolute http(s) URL is shown as text, never as a link", () => {
  for (const uri of ["javascript:alert(1)", " javascript:alert(1)", "JavaScript:alert(1)", "data:text/html,<b>x</b>",
    "vbscript:x", "/device", "example.com/device", "//evil.example/device", "ftp://example.com/device"]) {
    const t = setupDevice({ verificationUri: uri, verificationUriComplete: "" });
    const shown = t.q("data-role", "verification-uri");
    assert.equal(shown.tagName, "SPAN", uri);
    assert.equal(shown.textContent, uri);
    assert.deepEqual(hrefs(t.root), [], uri);
    assert.equal(t.q("data-role", "qr"), null, "nor drawn as a QR code: " + uri);
    assert.equal(t.q("data-role", "user-code").textContent, "WDJB-MJHT", "the code is still shown");
  }
});

test("the QR code is of verificationUri when there is no http(s) complete URI", () => {
  for (const complete of ["", "javascript:alert(1)"]) {
    const t = setupDevice({ verificationUriComplete: complete });
    assert.deepEqual(qrModules(t.q("data-role", "qr")), plain(t.window.OAuthFlow.qrCode(deviceDoc.verificationUri).modules));
    assert.deepEqual(hrefs(t.root).map((n) => n.getAttribute("href")), [deviceDoc.verificationUri]);
  }
});

test("the QR code is of the complete URI only where it leads where the shown address does", () => {
  const uri = deviceDoc.verificationUri; // https://example.com/device
  for (const [verificationUri, complete, drawn] of [
    [uri, "https://EXAMPLE.com:443/device?user_code=WDJB-MJHT", "https://EXAMPLE.com:443/device?user_code=WDJB-MJHT"],
    ["http://127.0.0.1:8080/device", "http://127.0.0.1:8080/device?user_code=A", "http://127.0.0.1:8080/device?user_code=A"],
    ["http://localhost:8080/device", "http://localhost:8080/device?user_code=A", "http://localhost:8080/device?user_code=A"],
    [uri, "https://evil.example/device?user_code=WDJB-MJHT", uri],
    [uri, "https://example.com.evil.example/device", uri],
    [uri, "https://example.com@evil.example/device", uri],
    [uri, "https://user@example.com/device", uri],
    [uri, "https://example.com:8443/device", uri],
    [uri, "http://example.com/device?user_code=WDJB-MJHT", uri],
    ["http://example.com/device", "http://example.com/device?user_code=A", "http://example.com/device"],
  ]) {
    const t = setupDevice({ verificationUri, verificationUriComplete: complete });
    assert.deepEqual(qrModules(t.q("data-role", "qr")), plain(t.window.OAuthFlow.qrCode(drawn).modules), complete);
    assert.equal(t.q("data-role", "verification-uri").textContent, verificationUri);
  }
});

test("no QR code where the page cannot draw SVG, or for a URI too long for one", () => {
  const plain = setupDevice({}, { svg: false });
  assert.equal(plain.q("data-role", "qr"), null);
  assert.equal(plain.q("data-role", "user-code").textContent, "WDJB-MJHT");

  const long = "https://example.com/device?user_code=WDJB-MJHT&pad=" + "x".repeat(400);
  const t = setupDevice({ verificationUriComplete: long });
  assert.equal(t.q("data-role", "qr"), null);
  assert.equal(t.window.OAuthFlow.qrCode(long), null);
  assert.equal(t.q("data-role", "verification-uri").getAttribute("href"), deviceDoc.verificationUri);
});

test("the copy button copies the code and says so for a moment", async () => {
  const t = setupDevice();
  t.q("data-action", "copy").click();
  await settle();
  assert.deepEqual(t.clipboardWrites, ["WDJB-MJHT"]);
  assert.equal(t.q("data-action", "copy").textContent, "Copied");
  assert.equal(t.selection.node, null, "nothing to select");
  t.timers.tick(1999);
  assert.equal(t.q("data-action", "copy").textContent, "Copied");
  t.timers.tick(1);
  assert.equal(t.q("data-action", "copy").textContent, "Copy code");
});

test("without the clipboard API, or when it refuses, the copy button selects the code", async () => {
  for (const [opts, copied, label] of [
    [{ clipboard: null }, false, "Selected"],
    [{ clipboard: () => Promise.reject(new Error("NotAllowedError")) }, false, "Selected"],
    [{ clipboard: () => { throw new TypeError("no"); } }, false, "Selected"],
    [{ clipboard: null, execCommand: () => true }, true, "Copied"],
  ]) {
    const t = setupDevice({}, opts);
    t.q("data-action", "copy").click();
    await settle();
    assert.equal(t.selection.node, t.q("data-role", "user-code"), "the code is selected for the user");
    assert.deepEqual(t.commands, ["copy"]);
    assert.equal(t.q("data-action", "copy").textContent, label, String(copied));
    t.timers.tick(2000);
    assert.equal(t.q("data-action", "copy").textContent, "Copy code");
  }
});

test("the time left counts down, and an expired code says so while the host has not", () => {
  const t = setupDevice({ expiresAt: EPOCH + 61 * 1000 + 500 });
  const expires = () => t.q("data-role", "expires").textContent;
  assert.equal(expires(), "The code expires in 1:02.");
  t.timers.tick(1000);
  assert.equal(expires(), "The code expires in 1:01.");
  t.timers.tick(51 * 1000);
  assert.equal(expires(), "The code expires in 0:10.");
  assert.equal(t.root.getAttribute("data-reason"), null);
  t.timers.tick(10 * 1000);
  assert.equal(expires(), "The code has expired.");
  assert.equal(t.root.getAttribute("data-status"), "pending", "the server decides");
  assert.equal(t.root.getAttribute("data-reason"), "expired");
  assert.equal(t.timers.pending(), 0, "the countdown stops");
  assert.equal(t.events.length, 0);

  const hours = setupDevice({ expiresAt: EPOCH + 2 * 60 * MINUTE + 5000 });
  assert.equal(hours.q("data-role", "expires").textContent, "The code expires in 2:00:05.");
  const past = setupDevice({ expiresAt: EPOCH - 1 });
  assert.equal(past.q("data-role", "expires").textContent, "The code has expired.");
  assert.equal(past.root.getAttribute("data-reason"), "expired");
  const none = setupDevice({ expiresAt: undefined });
  assert.equal(none.q("data-role", "expires"), null);
  assert.equal(none.timers.pending(), 0);
});

test("a success that names the account says who is connected, as text", () => {
  const t = setupDevice();
  t.prompt.update({ ...deviceDoc, status: "success", account: "<b>octocat</b>" });
  assert.equal(t.q("data-role", "message").textContent, "Connected to GitHub as <b>octocat</b>.");
  assert.equal(t.q("data-role", "message").children.length, 0, "never parsed as markup");
});

test("update() from pending to success shows it and announces it", () => {
  const t = setupDevice();
  t.prompt.update({ ...deviceDoc, status: "success" });
  assert.equal(t.root.getAttribute("data-status"), "success");
  assert.equal(t.q("data-role", "message").textContent, "Connected to GitHub.");
  assert.equal(t.q("data-role", "user-code"), null);
  assert.equal(t.q("data-role", "qr"), null);
  assert.equal(t.events.length, 1);
  assert.deepEqual({ ...t.events[0].detail }, {
    state: "", status: "success", provider: "github", message: "Connected to GitHub.", error: "",
  });
  assert.equal(t.timers.pending(), 0, "no countdown left running");

  t.prompt.update({ ...deviceDoc, status: "success" });
  t.prompt.update({ ...deviceDoc });
  assert.equal(t.root.getAttribute("data-status"), "success", "a stale pending copy does not undo it");
  assert.equal(t.events.length, 1, "announced once");
});

test("update() from pending to error shows the server's message and announces it", () => {
  for (const message of ["The user denied the request.", "The code expired before the user entered it."]) {
    const t = setupDevice();
    t.prompt.update({ ...deviceDoc, status: "error", message });
    assert.equal(t.root.getAttribute("data-status"), "error");
    assert.equal(t.root.getAttribute("data-reason"), "error");
    assert.equal(t.q("data-role", "message").textContent, message);
    assert.equal(t.q("data-role", "user-code"), null, "the spent code is gone");
    assert.equal(t.q("data-action", "retry"), null, "the widget cannot start a sign-in");
    assert.deepEqual({ ...t.events[0].detail }, { state: "", status: "error", provider: "github", message, error: "error" });
    assert.equal(t.timers.pending(), 0);
  }
  const t = setupDevice();
  t.prompt.update({ ...deviceDoc, status: "error" });
  assert.equal(t.q("data-role", "message").textContent, "Sign-in was not completed.");
});

test("a device document that arrives settled is shown without an event", () => {
  const ok = setupDevice({ status: "success" });
  assert.equal(ok.root.getAttribute("data-status"), "success");
  const bad = setupDevice({ status: "error", message: "The user denied the request." });
  assert.equal(bad.q("data-role", "message").textContent, "The user denied the request.");
  assert.equal(ok.events.length + bad.events.length, 0, "done is for outcomes the widget saw come");
});

test("polling with the same pending document keeps the view; a changed one redraws it", async () => {
  const t = setupDevice();
  const code = t.q("data-role", "user-code");
  t.q("data-action", "copy").click();
  await settle();
  t.timers.tick(1000);
  t.prompt.update({ ...deviceDoc });
  t.prompt.update({ ...deviceDoc });
  assert.equal(t.q("data-role", "user-code"), code, "the code the user may be selecting stays");
  assert.equal(t.q("data-action", "copy").textContent, "Copied");
  assert.equal(t.q("data-role", "expires").textContent, "The code expires in 14:59.");
  assert.equal(t.timers.pending(), 2, "one countdown, one copy label");

  t.prompt.update({ ...deviceDoc, message: "Enter the code on your TV." }, { providerName: "Hub" });
  assert.notEqual(t.q("data-role", "user-code"), code);
  assert.equal(t.q("data-role", "message").textContent, "Enter the code on your TV.");
  assert.equal(t.q("data-action", "copy").textContent, "Copy code");
  assert.equal(t.timers.pending(), 1, "the old countdown and copy label timers are gone");
  t.timers.tick(1000);
  assert.equal(t.q("data-role", "expires").textContent, "The code expires in 14:58.");
});

test("a new device document, a fresh sign-in, replaces the old code", () => {
  const t = setupDevice({ expiresAt: EPOCH + 1000 });
  t.timers.tick(1000);
  assert.equal(t.root.getAttribute("data-reason"), "expired");
  t.prompt.update({ ...deviceDoc, status: "error", message: "The code expired." });
  const fresh = { ...deviceDoc, userCode: "BCDF-GHJK", verificationUriComplete: "https://example.com/device?user_code=BCDF-GHJK",
    expiresAt: EPOCH + 1000 + 10 * MINUTE };
  t.prompt.update(fresh);
  assert.equal(t.root.getAttribute("data-status"), "pending");
  assert.equal(t.root.getAttribute("data-reason"), null);
  assert.equal(t.q("data-role", "user-code").textContent, "BCDF-GHJK");
  assert.equal(t.root.all().filter((n) => n.getAttribute("data-role") === "user-code").length, 1);
  assert.equal(t.q("data-role", "expires").textContent, "The code expires in 10:00.");
  assert.deepEqual(qrModules(t.q("data-role", "qr")), plain(t.window.OAuthFlow.qrCode(fresh.verificationUriComplete).modules));

  // While pending, a fresh code also replaces the shown one at once.
  t.prompt.update({ ...fresh, userCode: "LMNP-QRST" });
  assert.equal(t.q("data-role", "user-code").textContent, "LMNP-QRST");
  t.prompt.update({ ...fresh, userCode: "LMNP-QRST", status: "success" });
  assert.equal(t.events.at(-1).detail.status, "success");
});

test("a redirect document after a device one shows the connect button, and back", () => {
  const t = setupDevice();
  t.prompt.update(doc);
  assert.equal(t.q("data-role", "user-code"), null);
  assert.ok(t.q("data-action", "connect"));
  assert.equal(t.timers.pending(), 0);
  t.prompt.update(deviceDoc);
  assert.equal(t.q("data-action", "connect"), null);
  assert.equal(t.q("data-role", "user-code").textContent, "WDJB-MJHT");
  assert.equal(t.events.length, 0);
});

test("a device document without a verification URI is invalid", () => {
  const t = setupDevice({ verificationUri: "" });
  assert.equal(t.root.getAttribute("data-status"), "error");
  assert.equal(t.root.getAttribute("data-reason"), "invalid_document");
  assert.equal(t.q("data-role", "user-code"), null);
});

test("destroy stops the countdown and the copy label's timer", async () => {
  const t = setupDevice();
  t.q("data-action", "copy").click();
  await settle();
  assert.equal(t.timers.pending(), 2);
  t.prompt.destroy();
  assert.equal(t.timers.pending(), 0);
});

test("the oauth-prompt element renders a device document", () => {
  const t = setup();
  const el = t.document.createElement("oauth-prompt");
  el.setAttribute("document", JSON.stringify(deviceDoc));
  t.document.body.appendChild(el);
  assert.equal(el.byAttr("data-role", "user-code").textContent, "WDJB-MJHT");
  el.setAttribute("document", JSON.stringify({ ...deviceDoc, status: "success" }));
  assert.equal(el.getAttribute("data-status"), "success");
});

// ---- the QR encoder's mask choice --------------------------------------------------------

// score is the standard's penalty for a symbol (ISO/IEC 18004, 7.8.3), counted here module
// by module, apart from the encoder's own scoring: N1 = 3 for each run of five alike in a row
// or column plus 1 for each more, N2 = 3 for each 2×2 block alike, N3 = 40 for each
// 1011101 with 0000 before or after it, N4 = 10 for each 5% of dark share away from 50%.
function score(m) {
  const n = m.length;
  const lines = [];
  for (let i = 0; i < n; i++) {
    lines.push(m[i]);
    lines.push(m.map((row) => row[i]));
  }
  let total = 0;
  for (const line of lines) {
    let run = 1;
    for (let i = 1; i <= n; i++) {
      if (i < n && line[i] === line[i - 1]) {
        run++;
        continue;
      }
      if (run >= 5) total += 3 + (run - 5);
      run = 1;
    }
    const finder = [1, 0, 1, 1, 1, 0, 1];
    for (let i = 0; i + 7 <= n; i++) {
      if (!finder.every((b, k) => line[i + k] === (b === 1))) continue;
      const lightBefore = i >= 4 && [1, 2, 3, 4].every((k) => !line[i - k]);
      const lightAfter = i + 11 <= n && [7, 8, 9, 10].every((k) => !line[i + k]);
      total += 40 * (Number(lightBefore) + Number(lightAfter));
    }
  }
  for (let y = 0; y + 1 < n; y++) {
    for (let x = 0; x + 1 < n; x++) {
      const c = m[y][x];
      if (m[y][x + 1] === c && m[y + 1][x] === c && m[y + 1][x + 1] === c) total += 3;
    }
  }
  const dark = m.flat().filter(Boolean).length;
  const percent = (100 * dark) / (n * n);
  return total + 10 * Math.floor(Math.abs(percent - 50) / 5);
}

test("the encoder uses the mask the standard's penalty rules score lowest", () => {
  const b = makeBrowser();
  b.load("oauth-prompt.js");
  const qr = (text, mask) => plain(b.window.OAuthFlow.qrCode(text, mask));
  // Under some masks the last two are 56% and 57% dark, which rule 4 scores.
  for (const text of ["https://example.com/device", "https://example.com/device?user_code=WDJB-MJHT",
    "https://auth.example.com/activate?code=" + "A1b2%3D&".repeat(20), "https://example.com/d?c=x",
    "https://example.com/d?c=xxxxxxxxxxxx"]) {
    const scores = [0, 1, 2, 3, 4, 5, 6, 7].map((mask) => {
      const code = qr(text, mask);
      assert.equal(code.mask, mask);
      assert.equal(code.penalty, score(code.modules), `${text}, mask ${mask}`);
      return code.penalty;
    });
    const chosen = qr(text);
    assert.equal(chosen.mask, scores.indexOf(Math.min(...scores)), text);
    assert.deepEqual(chosen.modules, qr(text, chosen.mask).modules);
    assert.ok(new Set(scores).size > 1, "the masks differ");
  }
});

test("a success whose spent link was left out still shows as a success", () => {
  const t = setup();
  t.prompt.update({ provider: "github", authUrl: "", state: "S1", status: "success" });
  assert.equal(t.root.getAttribute("data-status"), "success");
  assert.equal(t.root.getAttribute("data-reason"), null);
});
