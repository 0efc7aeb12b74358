// A minimal fake browser for the widget and callback page scripts: just the DOM,
// window and timer surface they use, run in a fresh vm context per test. No npm
// dependencies. Setting innerHTML throws, so a script that uses it fails its tests.
import fs from "node:fs";
import vm from "node:vm";

// The assets are read from OAUTHFLOW_ASSETS_DIR when it is set: TestJavaScript sets it to a
// copy of the assets the Go package embeds, so the scripts tested are the ones it serves.
const assetsDir = process.env.OAUTHFLOW_ASSETS_DIR
  ? new URL("file://" + process.env.OAUTHFLOW_ASSETS_DIR.replace(/\/*$/, "/"))
  : new URL("../assets/", import.meta.url);

export function asset(name) {
  return fs.readFileSync(new URL(name, assetsDir), "utf8");
}

class FakeEvent {
  constructor(type, init = {}) {
    this.type = type;
    this.bubbles = !!init.bubbles;
    this.cancelable = !!init.cancelable;
    this.defaultPrevented = false;
    this.target = null;
    this.currentTarget = null;
  }
  preventDefault() {
    if (this.cancelable) this.defaultPrevented = true;
  }
}

class FakeCustomEvent extends FakeEvent {
  constructor(type, init = {}) {
    super(type, init);
    this.detail = init.detail === undefined ? null : init.detail;
  }
}

class FakeEventTarget {
  constructor() {
    this._listeners = new Map();
  }
  addEventListener(type, fn) {
    if (!this._listeners.has(type)) this._listeners.set(type, []);
    const list = this._listeners.get(type);
    if (!list.includes(fn)) list.push(fn);
  }
  removeEventListener(type, fn) {
    const list = this._listeners.get(type) || [];
    const i = list.indexOf(fn);
    if (i >= 0) list.splice(i, 1);
  }
  listenerCount(type) {
    return (this._listeners.get(type) || []).length;
  }
  dispatchEvent(ev) {
    if (!ev.target) ev.target = this;
    for (let node = this; node; node = ev.bubbles ? node.parentNode : null) {
      ev.currentTarget = node;
      for (const fn of [...(node._listeners.get(ev.type) || [])]) fn.call(node, ev);
      if (!ev.bubbles) break;
    }
    return !ev.defaultPrevented;
  }
}

class FakeElement extends FakeEventTarget {
  constructor(tagName = "div") {
    super();
    this.tagName = String(tagName).toUpperCase();
    this.childNodes = [];
    this.parentNode = null;
    this._attrs = new Map();
    this._text = "";
  }
  get firstChild() {
    return this.childNodes[0] || null;
  }
  get children() {
    return this.childNodes;
  }
  appendChild(child) {
    if (child.parentNode) child.parentNode.removeChild(child);
    child.parentNode = this;
    this.childNodes.push(child);
    this._text = "";
    if (this.isConnected) connectTree(child);
    return child;
  }
  removeChild(child) {
    const i = this.childNodes.indexOf(child);
    if (i < 0) throw new Error("removeChild: not a child");
    this.childNodes.splice(i, 1);
    const wasConnected = this.isConnected;
    child.parentNode = null;
    if (wasConnected) disconnectTree(child);
    return child;
  }
  get isConnected() {
    let n = this;
    while (n.parentNode) n = n.parentNode;
    return n._isDocumentRoot === true;
  }
  get textContent() {
    return this._text + this.childNodes.map((c) => c.textContent).join("");
  }
  set textContent(v) {
    while (this.firstChild) this.removeChild(this.firstChild);
    this._text = String(v);
  }
  set innerHTML(_) {
    throw new Error("innerHTML is forbidden: use textContent");
  }
  get innerHTML() {
    throw new Error("innerHTML is forbidden");
  }
  set outerHTML(_) {
    throw new Error("outerHTML is forbidden");
  }
  insertAdjacentHTML() {
    throw new Error("insertAdjacentHTML is forbidden");
  }
  setAttribute(name, value) {
    const old = this.getAttribute(name);
    this._attrs.set(name, String(value));
    this._attrChanged(name, old, String(value));
  }
  getAttribute(name) {
    return this._attrs.has(name) ? this._attrs.get(name) : null;
  }
  hasAttribute(name) {
    return this._attrs.has(name);
  }
  removeAttribute(name) {
    const old = this.getAttribute(name);
    this._attrs.delete(name);
    this._attrChanged(name, old, null);
  }
  _attrChanged(name, old, value) {
    const observed = this.constructor.observedAttributes;
    if (typeof this.attributeChangedCallback === "function" && observed && observed.includes(name)) {
      this.attributeChangedCallback(name, old, value);
    }
  }
  get id() {
    return this.getAttribute("id") || "";
  }
  click() {
    this.dispatchEvent(new FakeEvent("click", { bubbles: true, cancelable: true }));
  }
  focus() {
    if (this.ownerDocument) this.ownerDocument.activeElement = this;
  }
  // Test helpers (the scripts under test do not use them).
  all() {
    return this.childNodes.flatMap((c) => [c, ...c.all()]);
  }
  find(pred) {
    return this.all().find(pred) || null;
  }
  byAttr(name, value) {
    return this.find((n) => n.getAttribute(name) === value);
  }
}

function connectTree(node) {
  if (typeof node.connectedCallback === "function") node.connectedCallback();
  for (const c of node.childNodes) connectTree(c);
}

function disconnectTree(node) {
  if (typeof node.disconnectedCallback === "function") node.disconnectedCallback();
  for (const c of node.childNodes) disconnectTree(c);
}

// FakeTimers is a virtual clock: nothing runs until tick(ms).
class FakeTimers {
  constructor() {
    this.now = 0;
    this.nextId = 1;
    this.timers = new Map();
  }
  add(fn, ms, repeat) {
    const id = this.nextId++;
    const every = Math.max(0, Number(ms) || 0);
    this.timers.set(id, { fn, at: this.now + every, every, repeat });
    return id;
  }
  clear(id) {
    this.timers.delete(id);
  }
  pending() {
    return this.timers.size;
  }
  tick(ms) {
    const end = this.now + ms;
    for (;;) {
      let next = null;
      for (const [id, t] of this.timers) {
        if (t.at <= end && (!next || t.at < next[1].at)) next = [id, t];
      }
      if (!next) break;
      const [id, t] = next;
      this.now = t.at;
      if (t.repeat) t.at += Math.max(1, t.every);
      else this.timers.delete(id);
      t.fn();
    }
    this.now = end;
  }
}

// FakePopup stands for a window the widget opened.
export class FakePopup {
  constructor() {
    this.closed = false;
    this.focused = false;
  }
  focus() {
    this.focused = true;
  }
  close() {
    this.closed = true;
  }
}

// newBus returns what windows of one origin share: BroadcastChannel delivery.
export function newBus() {
  return new Map(); // channel name -> Set of open channels
}

// fakeBroadcastChannel builds a BroadcastChannel class over bus. Like the real one, it
// delivers asynchronously, to every other open channel of that name, a copy of the data.
function fakeBroadcastChannel(bus) {
  return class FakeBroadcastChannel {
    constructor(name) {
      this.name = String(name);
      this.onmessage = null;
      if (!bus.has(this.name)) bus.set(this.name, new Set());
      bus.get(this.name).add(this);
    }
    postMessage(data) {
      const copy = structuredClone(data);
      for (const ch of bus.get(this.name)) {
        if (ch === this) continue;
        setImmediate(() => {
          if (bus.get(ch.name).has(ch) && typeof ch.onmessage === "function") ch.onmessage({ data: copy });
        });
      }
    }
    close() {
      bus.get(this.name).delete(this);
    }
  };
}

// jsonResponse is what the fake fetch answers.
export function jsonResponse(status, body) {
  return {
    ok: status >= 200 && status < 300,
    status,
    json: async () => (typeof body === "string" ? JSON.parse(body) : body),
  };
}

// EPOCH is what Date.now() answers in a fake window before its timers move.
export const EPOCH = Date.UTC(2025, 0, 1);

// makeBrowser builds a window for one test. opts: origin, search, opener, open(url, name, features),
// fetch(url, init) (defaults to 200 {ok:true, provider:"github"}), pageRoot (element to put in body),
// bus (from newBus, to share BroadcastChannels with another window of the origin),
// svg (false: no document.createElementNS), clipboard (writeText(text); null: no
// navigator.clipboard; by default it records into clipboardWrites), execCommand(name)
// (document.execCommand; by default it refuses, as browsers do without a user gesture).
export function makeBrowser(opts = {}) {
  const origin = opts.origin || "https://app.example";
  const pathname = opts.pathname || "/oauth/callback";
  const search = opts.search || "";
  const log = []; // ordered record of side effects: ["replaceState", url], ["postMessage", data, origin], ...
  const timers = new FakeTimers();
  const registry = new Map();
  const bus = opts.bus || newBus();

  const document = new FakeEventTarget();
  const html = new FakeElement("html");
  html._isDocumentRoot = true;
  const body = new FakeElement("body");
  html.appendChild(body);
  document.documentElement = html;
  document.body = body;
  document.readyState = opts.readyState || "interactive";
  const submits = []; // forms submitted: {action, method, target, enctype, fields, connected}
  document.createElement = (tag) => {
    const Ctor = registry.get(String(tag).toLowerCase());
    const node = Ctor ? new Ctor() : new FakeElement(tag);
    node.ownerDocument = document;
    if (node.tagName === "DIALOG") {
      // A <dialog>: showModal opens it, close closes it and fires "close", as a browser does
      // (which fires it a task later).
      node.showModal = () => node.setAttribute("open", "");
      node.close = () => {
        if (!node.hasAttribute("open")) return;
        node.removeAttribute("open");
        node.dispatchEvent(new FakeEvent("close"));
      };
    }
    if (node.tagName === "FORM") {
      node.submit = () => {
        const fields = {};
        for (const input of node.childNodes) fields[input.getAttribute("name")] = input.getAttribute("value");
        const attr = (name) => node.getAttribute(name);
        submits.push({ action: attr("action"), method: attr("method"), target: attr("target"), enctype: attr("enctype"),
          fields, connected: node.isConnected });
        log.push(["submit", attr("action")]);
      };
    }
    return node;
  };
  document.getElementById = (id) => html.find((n) => n.id === id);
  document.activeElement = body;
  if (opts.svg !== false) {
    document.createElementNS = (ns, tag) => {
      const node = new FakeElement(tag);
      node.tagName = tag; // SVG elements keep their case
      node.namespaceURI = ns;
      return node;
    };
  }
  const commands = []; // document.execCommand calls
  document.execCommand = (name) => {
    commands.push(name);
    return opts.execCommand ? opts.execCommand(name) : false;
  };
  const selection = { node: null, selectAllChildren(node) { this.node = node; } };
  const clipboardWrites = [];
  let clipboard = { writeText: async (text) => { clipboardWrites.push(text); } };
  if (opts.clipboard === null) clipboard = undefined;
  else if (opts.clipboard) clipboard = { writeText: opts.clipboard };

  const location = {
    origin,
    pathname,
    search,
    get href() {
      return origin + this.pathname + this.search;
    },
    assign(url) {
      log.push(["assign", url]);
    },
  };

  const win = new FakeEventTarget();
  const fetchCalls = [];
  const openCalls = [];
  Object.assign(win, {
    document,
    location,
    history: {
      replaceState(stateObj, title, url) {
        log.push(["replaceState", url]);
        const u = new URL(url, location.href);
        location.pathname = u.pathname;
        location.search = u.search;
      },
    },
    opener: opts.opener === undefined ? null : opts.opener,
    closed: false,
    close() {
      log.push(["close"]);
      win.closed = true;
    },
    open(url, name, features) {
      openCalls.push({ url, name, features });
      log.push(["open", url]);
      return opts.open ? opts.open(url, name, features) : new FakePopup();
    },
    fetch(url, init) {
      fetchCalls.push({ url, init, body: init && init.body ? JSON.parse(init.body) : undefined });
      log.push(["fetch", url]);
      return opts.fetch ? opts.fetch(url, init) : Promise.resolve(jsonResponse(200, { ok: true, provider: "github" }));
    },
    screenX: 100,
    screenY: 50,
    outerWidth: 1200,
    outerHeight: 900,
    setTimeout: (fn, ms) => timers.add(fn, ms, false),
    clearTimeout: (id) => timers.clear(id),
    setInterval: (fn, ms) => timers.add(fn, ms, true),
    clearInterval: (id) => timers.clear(id),
    Date: class extends Date {
      static now() {
        return EPOCH + timers.now;
      }
    },
    navigator: { clipboard },
    getSelection: () => selection,
    Event: FakeEvent,
    CustomEvent: FakeCustomEvent,
    HTMLElement: FakeElement,
    URL,
    URLSearchParams,
    BroadcastChannel: fakeBroadcastChannel(bus),
    customElements: {
      define(name, Ctor) {
        if (registry.has(name)) throw new Error("already defined: " + name);
        registry.set(name, Ctor);
      },
      get: (name) => registry.get(name),
    },
    console,
  });
  win.window = win;
  win.self = win;
  if (opts.pageRoot) body.appendChild(opts.pageRoot(document));

  const context = vm.createContext(win);
  return {
    bus,
    window: win,
    document,
    timers,
    log,
    fetchCalls,
    openCalls,
    submits,
    commands,
    clipboardWrites,
    selection,
    // load runs an asset in the window. served.apiBase serves oauth-prompt.js as
    // web.Handler does for Options.APIBase: written into its DEFAULT_API_BASE line.
    load(name, served = {}) {
      let src = asset(name);
      if (served.apiBase) {
        const line = 'var DEFAULT_API_BASE = "";';
        if (src.split(line).length !== 2) throw new Error(name + " must hold " + line + " once");
        src = src.replace(line, "var DEFAULT_API_BASE = " + JSON.stringify(served.apiBase) + ";");
      }
      vm.runInContext(src, context, { filename: name });
    },
    // message delivers a postMessage event to the window, as a browser would.
    message(data, origin, source) {
      const ev = new FakeEvent("message");
      ev.data = data;
      ev.origin = origin;
      ev.source = source;
      win.dispatchEvent(ev);
    },
  };
}

// settle lets promise chains (the fake fetch and its .then()s) run to the end.
export async function settle() {
  for (let i = 0; i < 10; i++) await new Promise((r) => setImmediate(r));
}

export { FakeElement };
