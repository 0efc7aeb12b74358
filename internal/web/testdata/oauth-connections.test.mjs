// Unit tests of assets/oauth-connections.js in a fake browser (fakedom.mjs), with the real
// oauth-prompt.js loaded first, as a page does. Run by TestJavaScript in js_test.go, or
// directly: node --test testdata/
import test from "node:test";
import assert from "node:assert/strict";
import { makeBrowser, settle, jsonResponse, FakePopup } from "./fakedom.mjs";

const ORIGIN = "https://app.example";
const API = "/api/v1/oauth/connections"; // on the page's own origin: no api-base

const demo = {
  provider: "demo", displayName: "Demo Cloud", account: "demo-user", scopes: ["read", "write"],
  health: "healthy", reason: "", connectedAt: "2026-01-02T03:04:05Z", lastUsed: "2026-01-03T03:04:05Z", dpop: true,
};
const failing = {
  provider: "github", displayName: "GitHub", account: "octocat", scopes: ["repo"], health: "refresh_failing",
  reason: "GitHub could not renew this connection's access.", connectedAt: "2026-01-02T03:04:05Z", lastUsed: "", dpop: false,
};
const offered = [{ id: "demo", displayName: "Demo Cloud" }, { id: "github", displayName: "GitHub" }, { id: "slack", displayName: "Slack" }];

const signIn = (state = "S1") => ({ provider: "demo", authUrl: "https://auth.example/authorize?state=" + state, state, status: "pending" });

// fakeAPI answers the connections endpoint from lists, a queue of GET answers (the last one
// repeats), and post and del, the answers of POST and DELETE (functions of the call).
function fakeAPI(lists, post, del) {
  let gets = 0;
  return (url, init) => {
    url = String(url).replace(/^https:\/\/[^/]+/, "");
    const method = (init && init.method) || "GET";
    if (url.startsWith(API) && method === "GET") {
      const answer = lists[Math.min(gets++, lists.length - 1)];
      return Promise.resolve(typeof answer === "function" ? answer() : jsonResponse(200, answer));
    }
    if (url === API && method === "POST") return Promise.resolve(post ? post(init) : jsonResponse(200, signIn()));
    if (url.startsWith(API + "/") && method === "DELETE") return Promise.resolve(del ? del(url) : { ok: true, status: 204, json: async () => null });
    if (url.endsWith("/api/v1/oauth/complete")) return Promise.resolve(jsonResponse(200, { ok: true, provider: "demo" }));
    return Promise.resolve(jsonResponse(404, { error: "not_found" }));
  };
}

// setup loads both widgets and puts an <oauth-connections> with attrs in the page.
async function setup({ lists = [{ connections: [demo, failing], providers: offered }], post, del, attrs = {}, ...opts } = {}) {
  const b = makeBrowser({ origin: ORIGIN, pathname: "/settings", fetch: fakeAPI(lists, post, del), ...opts });
  b.load("oauth-prompt.js", opts.served);
  b.load("oauth-connections.js", opts.served);
  const root = b.document.createElement("oauth-connections");
  for (const [k, v] of Object.entries(attrs)) root.setAttribute(k, v);
  const events = [];
  root.addEventListener("oauthflow:change", (e) => events.push({ ...e.detail }));
  b.document.body.appendChild(root);
  await settle();
  const row = (id) => root.find((n) => n.tagName === "LI" && n.getAttribute("data-provider") === id);
  const inRow = (id, name, value) => row(id) && row(id).byAttr(name, value);
  const status = () => root.byAttr("data-role", "status");
  const active = () => b.document.activeElement;
  const dialog = () => root.byAttr("data-role", "confirm");
  const calls = (method) => b.fetchCalls.filter((c) => ((c.init && c.init.method) || "GET") === method);
  return { ...b, root, row, inRow, status, active, dialog, events, calls };
}

test("lists each connection with its state in words, and the providers to connect", async () => {
  const t = await setup();
  assert.equal(t.root.getAttribute("data-status"), "ready");
  const ids = t.root.all().filter((n) => n.tagName === "LI").map((n) => [n.getAttribute("data-provider"), n.getAttribute("data-health")]);
  assert.deepEqual(ids, [["demo", "healthy"], ["github", "refresh_failing"], ["slack", "none"]]);

  assert.equal(t.inRow("demo", "data-role", "name").textContent, "Demo Cloud");
  assert.equal(t.inRow("demo", "data-role", "state").textContent, "Connected");
  assert.equal(t.inRow("demo", "data-role", "account").textContent, "Connected as demo-user");
  const details = t.inRow("demo", "data-role", "details").all().map((n) => n.textContent);
  assert.ok(details.includes("read, write"), details.join("|"));
  assert.ok(details.includes("Bound to the app's key (DPoP)"));
  assert.ok(details.includes("Last used"));
  assert.equal(t.inRow("github", "data-role", "state").textContent, "Renewal failing");
  assert.equal(t.inRow("github", "data-role", "reason").textContent, failing.reason);
  assert.equal(t.inRow("slack", "data-role", "state").textContent, "Not connected");
  assert.equal(t.inRow("slack", "data-role", "account"), null);

  const buttons = t.root.all().filter((n) => n.tagName === "BUTTON" && n.parentNode.getAttribute("data-role") === "actions")
    .map((b) => [b.getAttribute("data-action"), b.getAttribute("aria-label"), b.getAttribute("type")]);
  assert.deepEqual(buttons, [
    ["disconnect", "Disconnect Demo Cloud", "button"],
    ["reconnect", "Reconnect GitHub", "button"],
    ["disconnect", "Disconnect GitHub", "button"],
    ["connect", "Connect Slack", "button"],
  ], "Reconnect only for a connection that is not healthy, Connect only for one not connected");

  assert.equal(t.calls("GET").length, 1);
  const get = t.calls("GET")[0];
  assert.equal(get.url, API);
  assert.equal(get.init.credentials, "include", "the app's cookies name the user, on the API's origin too");
  assert.equal(get.init.headers["X-Requested-With"], undefined, "a read needs no write header");
  assert.equal(t.status().getAttribute("role"), "status");
  assert.equal(t.status().textContent, "", "the loading sentence is gone");
});

test("a provider's and the server's text is shown as text, without control or format characters", async () => {
  const evil = {
    ...demo, displayName: "<img src=x onerror=alert(1)>", account: "\u202Eresu-omed\u202C\u0007",
    reason: "line\u0000one", scopes: ["<b>x</b>"], health: "refresh_failing",
  };
  const t = await setup({ lists: [{ connections: [evil], providers: [] }] });
  assert.equal(t.inRow("demo", "data-role", "name").textContent, "<img src=x onerror=alert(1)>");
  assert.equal(t.inRow("demo", "data-role", "account").textContent, "Connected as resu-omed");
  assert.equal(t.inRow("demo", "data-role", "reason").textContent, "lineone");
  assert.equal(t.root.find((n) => n.tagName === "IMG" || n.tagName === "B"), null);
  assert.equal(t.inRow("demo", "data-action", "reconnect"), null, "a provider the app does not offer is not reconnected here");
  assert.equal(t.inRow("demo", "data-action", "disconnect").getAttribute("aria-label"), "Disconnect <img src=x onerror=alert(1)>");
});

test("a health the widget does not know is shown as unknown, never as given", async () => {
  const t = await setup({ lists: [{ connections: [{ ...demo, health: "healthy\" onclick=\"x" }], providers: offered }] });
  assert.equal(t.row("demo").getAttribute("data-health"), "unknown");
  assert.equal(t.inRow("demo", "data-role", "state").textContent, "State unknown");
  assert.ok(t.inRow("demo", "data-action", "reconnect"), "it may be reconnected");
});

test("a listing the API refuses says why", async () => {
  const t = await setup({ lists: [() => jsonResponse(401, { error: "unauthorized", message: "Sign in to the app first." })] });
  assert.equal(t.root.getAttribute("data-status"), "error");
  assert.equal(t.status().textContent, "Sign in to the app first.");
  assert.equal(t.status().getAttribute("data-result"), "error");
});

test("only the latest listing is shown", async () => {
  let first;
  const lists = [() => new Promise((r) => { first = r; }), { connections: [], providers: offered }];
  const t = await setup({ lists });
  await t.root.refresh();
  assert.equal(t.row("demo").getAttribute("data-health"), "none");
  first(jsonResponse(200, { connections: [demo], providers: offered }));
  await settle();
  assert.equal(t.row("demo").getAttribute("data-health"), "none", "the older answer is dropped");
});

test("Connect starts a sign-in through the API and opens it in a popup", async () => {
  const popup = new FakePopup();
  const lists = [{ connections: [], providers: offered }, { connections: [demo], providers: offered }];
  const t = await setup({ lists, open: () => popup });
  t.inRow("demo", "data-action", "connect").click();
  await settle();
  const post = t.calls("POST")[0];
  assert.equal(post.url, API);
  assert.deepEqual(post.body, { provider: "demo" });
  assert.equal(post.init.credentials, "include");
  assert.equal(post.init.headers["X-Requested-With"], "oauthflow", "the header a form cannot send");
  assert.equal(post.init.headers["Content-Type"], "application/json");
  assert.deepEqual(t.openCalls.map((c) => c.url), [signIn().authUrl]);
  const slot = t.inRow("demo", "data-role", "prompt");
  assert.equal(slot.getAttribute("data-status"), "working");
  assert.equal(slot.getAttribute("hidden"), null);

  t.message({ type: "oauthflow:result", state: "S1", status: "success", provider: "demo" }, ORIGIN, popup);
  await settle();
  assert.equal(t.row("demo").getAttribute("data-health"), "healthy");
  assert.equal(t.status().textContent, "Connected Demo Cloud as demo-user.");
  assert.equal(t.status().getAttribute("data-result"), "success");
  assert.equal(t.active(), t.inRow("demo", "data-role", "name"), "focus on the provider's row");
  assert.equal(t.inRow("demo", "data-role", "prompt").getAttribute("hidden"), "", "the prompt is gone");
  assert.deepEqual(t.events, [{ action: "connect", provider: "demo", status: "success", message: "Connected Demo Cloud as demo-user." }]);
});

test("Reconnect a failing connection runs the same sign-in and says so", async () => {
  const popup = new FakePopup();
  const mended = { ...failing, health: "healthy", reason: "" };
  const lists = [{ connections: [failing], providers: offered }, { connections: [mended], providers: offered }];
  const t = await setup({ lists, open: () => popup, post: () => jsonResponse(200, { ...signIn("R1"), provider: "github" }) });
  t.inRow("github", "data-action", "reconnect").click();
  await settle();
  assert.deepEqual(t.calls("POST")[0].body, { provider: "github" });
  t.message({ type: "oauthflow:result", state: "R1", status: "success", provider: "github" }, ORIGIN, popup);
  await settle();
  assert.equal(t.inRow("github", "data-role", "state").textContent, "Connected");
  assert.equal(t.status().textContent, "Reconnected GitHub as octocat.");
  assert.equal(t.events[0].action, "reconnect");
});

test("a sign-in that fails stays in the row with its way to try again", async () => {
  const popup = new FakePopup();
  const t = await setup({ lists: [{ connections: [], providers: offered }], open: () => popup });
  t.inRow("demo", "data-action", "connect").click();
  await settle();
  t.message({ type: "oauthflow:result", state: "S1", status: "error", error: "access_denied", message: "Access was denied." }, ORIGIN, popup);
  await settle();
  const slot = t.inRow("demo", "data-role", "prompt");
  assert.equal(slot.getAttribute("data-status"), "error");
  assert.equal(t.active(), slot.byAttr("data-action", "retry"));
  assert.deepEqual(t.events, [{ action: "connect", provider: "demo", status: "error", message: "Access was denied." }]);
});

test("a blocked popup leaves focus on the prompt's way to sign in in this tab", async () => {
  const t = await setup({ lists: [{ connections: [], providers: offered }], open: () => null });
  t.inRow("demo", "data-action", "connect").click();
  await settle();
  const slot = t.inRow("demo", "data-role", "prompt");
  assert.equal(slot.getAttribute("data-reason"), "popup_blocked");
  assert.equal(t.active(), slot.byAttr("data-role", "fallback-link"));
});

test("a sign-in the API refuses to start says why, and focus stays on the button", async () => {
  const t = await setup({
    lists: [{ connections: [], providers: offered }],
    post: () => jsonResponse(403, { error: "cross_site", message: "Connections can only be changed from the app itself." }),
  });
  const button = t.inRow("demo", "data-action", "connect");
  button.click();
  await settle();
  assert.equal(t.status().textContent, "Connections can only be changed from the app itself.");
  assert.equal(t.status().getAttribute("data-result"), "error");
  assert.equal(t.active(), button);
  assert.equal(t.openCalls.length, 0);
  assert.deepEqual(t.events, [{ action: "connect", provider: "demo", status: "error", message: "Connections can only be changed from the app itself." }]);
});

test("Disconnect asks first; Cancel changes nothing and gives focus back", async () => {
  const t = await setup();
  const button = t.inRow("demo", "data-action", "disconnect");
  button.click();
  assert.equal(t.dialog().getAttribute("open"), "");
  assert.equal(t.dialog().byAttr("data-role", "confirm-title").textContent, "Disconnect Demo Cloud?");
  assert.match(t.dialog().byAttr("data-role", "confirm-text").textContent, /at Demo Cloud as demo-user\./);
  assert.equal(t.dialog().byAttr("data-action", "confirm").getAttribute("aria-label"), "Disconnect Demo Cloud");
  assert.equal(t.active(), t.dialog().byAttr("data-action", "cancel"), "the safe choice has focus");
  await settle();
  assert.equal(t.calls("DELETE").length, 0, "nothing is deleted before the user confirms");

  t.dialog().byAttr("data-action", "cancel").click();
  assert.equal(t.dialog().getAttribute("open"), null);
  assert.equal(t.active(), button);
  await settle();
  assert.equal(t.calls("DELETE").length, 0);
});

test("Disconnect confirmed deletes the connection and lists again", async () => {
  const lists = [{ connections: [demo], providers: offered }, { connections: [], providers: offered }];
  const t = await setup({ lists });
  t.inRow("demo", "data-action", "disconnect").click();
  t.dialog().byAttr("data-action", "confirm").click();
  assert.equal(t.dialog().getAttribute("open"), null);
  await settle();
  const del = t.calls("DELETE");
  assert.equal(del.length, 1);
  assert.equal(del[0].url, API + "/demo");
  assert.equal(del[0].init.headers["X-Requested-With"], "oauthflow");
  assert.equal(del[0].init.credentials, "include");
  assert.equal(t.row("demo").getAttribute("data-health"), "none");
  assert.equal(t.status().textContent, "Disconnected Demo Cloud.");
  assert.equal(t.active(), t.inRow("demo", "data-role", "name"));
  assert.deepEqual(t.events, [{ action: "disconnect", provider: "demo", status: "success", message: "Disconnected Demo Cloud." }]);
});

test("Disconnect names the provider in the path, escaped", async () => {
  const odd = { ...demo, provider: "a/b?c", displayName: "Odd" };
  const t = await setup({ lists: [{ connections: [odd], providers: [] }] });
  t.inRow("a/b?c", "data-action", "disconnect").click();
  t.dialog().byAttr("data-action", "confirm").click();
  await settle();
  assert.equal(t.calls("DELETE")[0].url, API + "/a%2Fb%3Fc");
});

test("a disconnect the API refuses says why, and focus goes back to the button", async () => {
  const t = await setup({ del: () => jsonResponse(502, { error: "provider_unavailable", message: "The provider could not be reached." }) });
  const button = t.inRow("demo", "data-action", "disconnect");
  button.click();
  t.dialog().byAttr("data-action", "confirm").click();
  await settle();
  assert.equal(t.status().textContent, "The provider could not be reached.");
  assert.equal(t.active(), button);
  assert.equal(t.calls("GET").length, 1, "no new listing");
});

test("the API base is the attribute's, else the one the script was served with", async () => {
  const served = await setup({ served: { apiBase: "https://api.example" } });
  assert.equal(served.calls("GET")[0].url, "https://api.example/api/v1/oauth/connections");
  const given = await setup({ attrs: { "api-base": "https://other.example/" } });
  assert.equal(given.calls("GET")[0].url, "https://other.example/api/v1/oauth/connections");
});

test("flow=page takes this tab to the sign-in, with this page as the way back", async () => {
  const t = await setup({ lists: [{ connections: [], providers: offered }], attrs: { flow: "page" }, search: "?tab=accounts&oauth=error&provider=x" });
  t.inRow("demo", "data-action", "connect").click();
  await settle();
  assert.deepEqual(t.calls("POST")[0].body, { provider: "demo", returnTo: ORIGIN + "/settings?tab=accounts" });
  assert.deepEqual(t.log.filter((l) => l[0] === "assign"), [["assign", signIn().authUrl]]);
  assert.equal(t.openCalls.length, 0);
});

test("flow=page never follows a sign-in link that is not http(s)", async () => {
  const t = await setup({
    lists: [{ connections: [], providers: offered }], attrs: { flow: "page" },
    post: () => jsonResponse(200, { ...signIn(), authUrl: "javascript:alert(1)" }),
  });
  t.inRow("demo", "data-action", "connect").click();
  await settle();
  assert.deepEqual(t.log.filter((l) => l[0] === "assign"), []);
  assert.equal(t.status().getAttribute("data-result"), "error");
});

test("a full-page sign-in's outcome is announced for a listed provider and taken off the address", async () => {
  const t = await setup({ lists: [{ connections: [demo], providers: offered }], search: "?tab=a&oauth=success&provider=demo" });
  assert.deepEqual(t.log.filter((l) => l[0] === "replaceState"), [["replaceState", ORIGIN + "/settings?tab=a"]]);
  assert.equal(t.status().textContent, "Connected Demo Cloud as demo-user.");
  assert.equal(t.active(), t.inRow("demo", "data-role", "name"));

  const failed = await setup({ lists: [{ connections: [], providers: offered }], search: "?oauth=error&provider=demo" });
  assert.equal(failed.status().textContent, "Demo Cloud was not connected. Try again.");
  assert.equal(failed.status().getAttribute("data-result"), "error");
});

test("an outcome in the address for a provider the list does not name says nothing", async () => {
  const t = await setup({ search: "?oauth=success&provider=%3Cb%3EYour%20bank%3C%2Fb%3E" });
  assert.equal(t.status().textContent, "");
  assert.deepEqual(t.events, []);
  assert.equal(t.log.filter((l) => l[0] === "replaceState").length, 1, "it is still taken off the address");
});

test("grant=device shows the code and polls the listing until the connection shows up", async () => {
  const device = { provider: "demo", authUrl: "", state: "", status: "pending", userCode: "ABCD-EFGH",
    verificationUri: "https://auth.example/device", expiresAt: Date.UTC(2025, 0, 1) + 600000 };
  const none = { connections: [], providers: offered };
  const t = await setup({ lists: [none, none, { connections: [demo], providers: offered }], attrs: { grant: "device" },
    post: () => jsonResponse(200, device) });
  t.inRow("demo", "data-action", "connect").click();
  await settle();
  assert.deepEqual(t.calls("POST")[0].body, { provider: "demo", grant: "device" });
  const slot = t.inRow("demo", "data-role", "prompt");
  assert.equal(slot.byAttr("data-role", "user-code").textContent, "ABCD-EFGH");
  assert.equal(t.active(), slot.byAttr("data-action", "copy"));
  assert.equal(t.openCalls.length, 0);

  t.timers.tick(5000);
  await settle();
  assert.equal(t.calls("GET").length, 2);
  assert.equal(slot.getAttribute("data-status"), "pending", "not connected yet");
  t.timers.tick(5000);
  await settle();
  assert.equal(t.status().textContent, "Connected Demo Cloud as demo-user.");
  assert.equal(t.row("demo").getAttribute("data-health"), "healthy");
  const polls = t.calls("GET").length;
  t.timers.tick(60000);
  await settle();
  assert.equal(t.calls("GET").length, polls, "the polling stopped");
});

test("a device sign-in stops polling once its code expired", async () => {
  const device = { provider: "demo", authUrl: "", state: "", status: "pending", userCode: "ABCD",
    verificationUri: "https://auth.example/device", expiresAt: Date.UTC(2025, 0, 1) + 12000 };
  const t = await setup({ lists: [{ connections: [], providers: offered }], attrs: { grant: "device" }, post: () => jsonResponse(200, device) });
  t.inRow("demo", "data-action", "connect").click();
  await settle();
  t.timers.tick(60000);
  await settle();
  assert.equal(t.calls("GET").length, 3, "the first listing and two polls before the code expired");
});
