/*
 * oauthflow: the oauth-prompt widget. Plain script, no build step, no dependencies.
 *
 * Renders an OAuthPromptDocument {provider, authUrl, state, status, message?, binding?}, or
 * a device sign-in's (RFC 8628) {provider, userCode, verificationUri, verificationUriComplete,
 * expiresAt, status, message?}, whose authUrl and state are "". A success's document may name
 * the account connected (account), which the widget shows as "Connected to GitHub as octocat.":
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
 * A device sign-in (a document with a userCode) shows, while pending, the code to type and
 * where: the user code as given; the verification URI as given, a link (new tab) only when
 * it is an http: or https: URL; a button that copies the code; the time left until
 * expiresAt (Unix milliseconds); and, where the page can draw SVG, a QR code of
 * verificationUriComplete when it is on verificationUri's origin and https (or http on a
 * loopback host), or else of verificationUri, for a phone. The
 * widget cannot see the user act: the host polls the run's document and calls update(),
 * and a pending device sign-in that an update() settles ends with "oauthflow:done".
 *
 * DOM hooks: the root carries data-status="pending|working|success|error" (and data-reason
 * for why; "expired" on a pending device sign-in whose code ran out), buttons
 * data-action="connect|retry|copy", the text data-role="message". A device sign-in adds
 * data-role="verification-uri" (an <a>, or a <span> for a URI that is not http(s)),
 * data-role="user-code", data-role="expires" (role=timer) and data-role="qr" (an <svg>,
 * absent when it cannot be drawn or the URI is too long for one).
 * Events (bubbling, on the root): "oauthflow:done" {state, status, provider, message, error}
 * and "oauthflow:retry" {state}, cancelable: preventDefault() stops the widget reopening
 * the same authUrl, so the host can launch a fresh flow and call update() with its document.
 *
 * Also exported for the callback page: OAuthFlow.complete(apiBase, fields), which posts a
 * callback's fields to {apiBase}/api/v1/oauth/complete and resolves to an outcome
 * {status: "success"|"error", provider, error, message}. It never rejects. And
 * OAuthFlow.announce(state, outcome), which the callback page uses to tell a widget on this
 * origin the outcome over the "oauthflow" BroadcastChannel when postMessage cannot reach it.
 * OAuthFlow.qrCode(text, mask?) is the QR encoder the device view draws with (see qrCode).
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
  var COPY_LABEL = "Copy code";
  var COPIED_MS = 2000; // how long the copy button says what it did
  var SVG_NS = "http://www.w3.org/2000/svg";
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
  // {code, state, iss?, fields?} or, for an error redirect, {state, error, error_description?, iss?}.
  // The iss goes with an error too: the server checks it on denials (RFC 9207). fields are
  // the redirect's extra parameters the provider keeps with the tokens (callbackExtra).
  function completionBody(f) {
    var body;
    if (f.error) {
      body = { state: f.state, error: f.error };
      if (f.error_description) {
        body.error_description = f.error_description;
      }
    } else {
      body = { code: f.code, state: f.state };
      var extra = callbackExtra(f.fields);
      if (extra) {
        body.fields = extra;
      }
    }
    if (f.iss) {
      body.iss = f.iss;
    }
    return body;
  }

  var MAX_EXTRA = 8; // extra callback fields sent, as the server keeps at most
  var MAX_EXTRA_NAME = 64; // characters of an extra field's name
  var MAX_EXTRA_VALUE = 4096; // characters of an extra field's value, as the server bounds it

  // callbackExtra is the extra fields of a callback (the callback page's fields: those
  // the providers keep with the tokens) as they are sent: string values, bounded, at most
  // MAX_EXTRA of them; null when there are none.
  function callbackExtra(given) {
    if (!given || typeof given !== "object") {
      return null;
    }
    var out = null;
    var kept = 0;
    Object.keys(given).forEach(function (name) {
      var v = given[name];
      if (typeof v === "string" && v !== "" && v.length <= MAX_EXTRA_VALUE && name.length <= MAX_EXTRA_NAME &&
          kept < MAX_EXTRA) {
        out = out || Object.create(null);
        out[name] = v;
        kept++;
      }
    });
    return out;
  }

  var MAX_MESSAGE = 300; // characters of a provider's description shown, as the server does
  var MAX_CODE = 64; // characters of a provider's error code shown, as the server does
  // UNSHOWN matches what would not show as itself, as the server filters it: a control
  // character (C0 or C1, which a terminal acts on) or a format character (a bidi override
  // that reorders what follows, a zero-width one).
  var UNSHOWN = /[\p{Cc}\p{Cf}]/gu;

  // serverText is text an authorization server chose, as it is shown: filtered, trimmed.
  function serverText(s) {
    return String(s || "").replace(UNSHOWN, "").trim();
  }

  function redirectErrorText(f) {
    var d = serverText(f.error_description);
    if (d) {
      return d.length > MAX_MESSAGE ? d.slice(0, MAX_MESSAGE) + "\u2026" : d;
    }
    if (f.error === "access_denied") {
      return "Access was denied.";
    }
    var code = serverText(f.error).slice(0, MAX_CODE);
    return code ? "The provider answered " + code + "." : "The provider reported an error.";
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

  // isLinkURL reports whether s may be a link's href: an absolute http: or https: URL. A
  // device sign-in's verification URI comes from the authorization server, and a relative
  // one would resolve against this page.
  function isLinkURL(s) {
    try {
      var u = new window.URL(String(s));
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
      binding: typeof doc.binding === "string" ? doc.binding : "",
      userCode: typeof doc.userCode === "string" ? doc.userCode : "",
      verificationUri: typeof doc.verificationUri === "string" ? doc.verificationUri : "",
      verificationUriComplete: typeof doc.verificationUriComplete === "string" ? doc.verificationUriComplete : "",
      expiresAt: typeof doc.expiresAt === "number" && isFinite(doc.expiresAt) ? doc.expiresAt : 0,
      account: typeof doc.account === "string" ? doc.account : ""
    };
  }

  // sameFlow reports whether a and b are documents of one sign-in: a device sign-in is
  // named by its code, a redirect sign-in by its state.
  function sameFlow(a, b) {
    if (a.userCode || b.userCode) {
      return a.userCode === b.userCode && a.verificationUri === b.verificationUri;
    }
    return a.state === b.state;
  }

  function isValidDocument(doc) {
    if (doc.userCode) {
      return doc.verificationUri !== "";
    }
    return doc.state !== "" && isHTTPURL(doc.authUrl);
  }

  // timeLeft writes whole seconds as m:ss, or h:mm:ss from an hour.
  function timeLeft(seconds) {
    var pad = function (n) { return (n < 10 ? "0" : "") + n; };
    var h = Math.floor(seconds / 3600);
    var m = Math.floor(seconds / 60) % 60;
    var s = seconds % 60;
    return h ? h + ":" + pad(m) + ":" + pad(s) : m + ":" + pad(s);
  }

  // selectText selects node's text, for the user to copy, and tries the old copy command,
  // which works with a selection where the clipboard API is missing or refused.
  function selectText(node) {
    var selection = typeof window.getSelection === "function" ? window.getSelection() : null;
    if (!selection) {
      return false;
    }
    selection.selectAllChildren(node);
    try {
      return document.execCommand("copy") === true;
    } catch (e) {
      return false;
    }
  }

  // completeLink is a device sign-in's complete URI when it leads where uri, the address
  // shown, does: on uri's origin, https: (or http: on a loopback host, in development),
  // with no user info; "" otherwise. It carries the code and is opened from a QR code
  // without being read. The server leaves out any other; the widget checks again.
  function completeLink(uri, complete) {
    try {
      var u = new window.URL(String(uri));
      var c = new window.URL(String(complete));
      var loopback = /^(localhost|127(\.\d{1,3}){3}|\[::1\])$/i.test(c.hostname);
      if (c.origin === u.origin && !c.username && !c.password &&
          (c.protocol === "https:" || c.protocol === "http:" && loopback)) {
        return String(complete);
      }
    } catch (e) {
      // not a URL: no link
    }
    return "";
  }

  // ---- QR codes (ISO/IEC 18004) ----------------------------------------------------------
  //
  // A device sign-in shows its verification URI as a QR code, so that the user can open it
  // on a phone. The encoder covers what a URI needs and no more: byte mode, error correction
  // level M (a symbol survives about 15% damage) and versions 1 to 15 (up to 412 bytes).

  var QR_MAX_VERSION = 15;
  var QR_QUIET = 4; // modules of light margin the standard asks around the symbol
  var QR_LEVEL_M = 0; // the two bits that name level M in the format information
  // QR_BLOCKS[v] is version v's level M block structure (the standard's Table 9): error
  // correction codewords per block, the number of blocks in the first group, the data
  // codewords of each, and the number of blocks in the second group, which have one more.
  var QR_BLOCKS = [null,
    [10, 1, 16, 0], [16, 1, 28, 0], [26, 1, 44, 0], [18, 2, 32, 0], [24, 2, 43, 0],
    [16, 4, 27, 0], [18, 4, 31, 0], [22, 2, 38, 2], [22, 3, 36, 2], [26, 4, 43, 1],
    [30, 1, 50, 4], [22, 6, 36, 2], [22, 8, 37, 1], [24, 4, 40, 5], [24, 5, 41, 5]];
  // QR_ALIGN[v] holds the rows (and, the same, the columns) of version v's alignment
  // pattern centres (the standard's Annex E).
  var QR_ALIGN = [null, [], [6, 18], [6, 22], [6, 26], [6, 30], [6, 34],
    [6, 22, 38], [6, 24, 42], [6, 26, 46], [6, 28, 50], [6, 30, 54], [6, 32, 58], [6, 34, 62],
    [6, 26, 46, 66], [6, 26, 48, 70]];
  // The eight data masks: a module at column x, row y is inverted where its mask says so.
  var QR_MASKS = [
    function (x, y) { return (x + y) % 2 === 0; },
    function (x, y) { return y % 2 === 0; },
    function (x, y) { return x % 3 === 0; },
    function (x, y) { return (x + y) % 3 === 0; },
    function (x, y) { return (Math.floor(y / 2) + Math.floor(x / 3)) % 2 === 0; },
    function (x, y) { return (x * y) % 2 + (x * y) % 3 === 0; },
    function (x, y) { return ((x * y) % 2 + (x * y) % 3) % 2 === 0; },
    function (x, y) { return ((x + y) % 2 + (x * y) % 3) % 2 === 0; }
  ];

  // GF(256) over the standard's polynomial x^8 + x^4 + x^3 + x^2 + 1, as exponent and
  // logarithm tables of its generator 2.
  var GF_EXP = [];
  var GF_LOG = [];
  (function () {
    for (var i = 0, x = 1; i < 255; i++) {
      GF_EXP[i] = GF_EXP[i + 255] = x;
      GF_LOG[x] = i;
      x = x & 0x80 ? (x << 1) ^ 0x11d : x << 1;
    }
  })();

  function gfMul(a, b) {
    return a === 0 || b === 0 ? 0 : GF_EXP[GF_LOG[a] + GF_LOG[b]];
  }

  // rsGenerator returns the Reed–Solomon generator polynomial (x - 2^0)…(x - 2^(n-1)),
  // coefficients from the highest power down.
  function rsGenerator(n) {
    var g = [1];
    for (var i = 0; i < n; i++) {
      var next = new Array(g.length + 1).fill(0);
      for (var j = 0; j < g.length; j++) {
        next[j] ^= g[j];
        next[j + 1] ^= gfMul(g[j], GF_EXP[i]);
      }
      g = next;
    }
    return g;
  }

  // rsRemainder returns a block's error correction codewords: the remainder of
  // data(x)·x^n divided by the generator polynomial gen of degree n.
  function rsRemainder(data, gen) {
    var rem = new Array(gen.length - 1).fill(0);
    data.forEach(function (byte) {
      var factor = byte ^ rem.shift();
      rem.push(0);
      for (var i = 0; i < rem.length; i++) {
        rem[i] ^= gfMul(gen[i + 1], factor);
      }
    });
    return rem;
  }

  // bchCode appends to value the remainder of value·x^k divided by poly, of degree k:
  // the format (15,5) and version (18,6) information's error correction.
  function bchCode(value, poly) {
    var k = 31 - Math.clz32(poly);
    var rem = value << k;
    for (var bit = 31 - Math.clz32(rem); bit >= k; bit = 31 - Math.clz32(rem)) {
      rem ^= poly << (bit - k);
    }
    return (value << k) | rem;
  }

  function utf8Bytes(text) {
    var escaped = encodeURIComponent(text); // throws on a lone surrogate, which no URI holds
    var bytes = [];
    for (var i = 0; i < escaped.length; i++) {
      if (escaped[i] === "%") {
        bytes.push(parseInt(escaped.substr(i + 1, 2), 16));
        i += 2;
      } else {
        bytes.push(escaped.charCodeAt(i));
      }
    }
    return bytes;
  }

  function dataCapacity(version) {
    var b = QR_BLOCKS[version];
    return b[1] * b[2] + b[3] * (b[2] + 1);
  }

  // qrVersionFor is the smallest version whose data codewords hold n bytes in byte mode
  // (a 4-bit mode, an 8- or 16-bit count, then the bytes), or 0 when none does.
  function qrVersionFor(n) {
    for (var v = 1; v <= QR_MAX_VERSION; v++) {
      if (4 + (v < 10 ? 8 : 16) + 8 * n <= 8 * dataCapacity(v)) {
        return v;
      }
    }
    return 0;
  }

  // qrData is the data codewords for bytes: one byte-mode segment, the terminator, and
  // the pad codewords 0xEC and 0x11 in turn up to the version's capacity. The mode and
  // count take 12 or 20 bits, so the terminator's four 0 bits always fit and end a byte.
  function qrData(bytes, version) {
    var capacity = dataCapacity(version);
    var bits = [];
    function put(value, length) {
      for (var i = length - 1; i >= 0; i--) {
        bits.push((value >>> i) & 1);
      }
    }
    put(4, 4);
    put(bytes.length, version < 10 ? 8 : 16);
    bytes.forEach(function (byte) {
      put(byte, 8);
    });
    put(0, 4);
    var data = [];
    for (var i = 0; i < bits.length; i += 8) {
      data.push(parseInt(bits.slice(i, i + 8).join(""), 2));
    }
    for (var pad = 0xec; data.length < capacity; pad ^= 0xec ^ 0x11) {
      data.push(pad);
    }
    return data;
  }

  // qrCodewords splits the data into the version's blocks, adds each block's error
  // correction, and interleaves them: the blocks' first data codewords, their second, …,
  // then their error correction codewords the same way.
  function qrCodewords(data, version) {
    var b = QR_BLOCKS[version];
    var gen = rsGenerator(b[0]);
    var blocks = [];
    for (var i = 0, at = 0; i < b[1] + b[3]; i++) {
      var length = b[2] + (i < b[1] ? 0 : 1);
      var block = data.slice(at, at + length);
      at += length;
      blocks.push({ data: block, ec: rsRemainder(block, gen) });
    }
    var out = [];
    function take(part, k) {
      blocks.forEach(function (bl) {
        if (k < bl[part].length) {
          out.push(bl[part][k]);
        }
      });
    }
    for (var k = 0; k <= b[2]; k++) {
      take("data", k);
    }
    for (k = 0; k < b[0]; k++) {
      take("ec", k);
    }
    return out;
  }

  // A symbol under construction: dark[y*size+x] is the module at column x, row y, and
  // fixed marks the function modules (patterns and information), which data avoids.
  function newSymbol(version) {
    var size = 17 + 4 * version;
    return { version: version, size: size, dark: new Array(size * size).fill(false), fixed: new Array(size * size).fill(false) };
  }

  function setFixed(s, x, y, dark) {
    s.dark[y * s.size + x] = dark;
    s.fixed[y * s.size + x] = true;
  }

  // drawSquares draws the concentric squares around (cx, cy) out to radius, dark where
  // isDark(distance) says, leaving out what falls outside the symbol.
  function drawSquares(s, cx, cy, radius, isDark) {
    for (var dy = -radius; dy <= radius; dy++) {
      for (var dx = -radius; dx <= radius; dx++) {
        var x = cx + dx;
        var y = cy + dy;
        if (x >= 0 && x < s.size && y >= 0 && y < s.size) {
          setFixed(s, x, y, isDark(Math.max(Math.abs(dx), Math.abs(dy))));
        }
      }
    }
  }

  function drawFunctionPatterns(s) {
    var size = s.size;
    for (var i = 0; i < size; i++) {
      setFixed(s, 6, i, i % 2 === 0); // timing patterns
      setFixed(s, i, 6, i % 2 === 0);
    }
    var finder = function (d) { return d !== 2 && d !== 4; }; // 4 is the light separator
    drawSquares(s, 3, 3, 4, finder);
    drawSquares(s, size - 4, 3, 4, finder);
    drawSquares(s, 3, size - 4, 4, finder);
    var align = QR_ALIGN[s.version];
    var last = align.length - 1;
    align.forEach(function (y, i) {
      align.forEach(function (x, j) {
        var onFinder = (i === 0 && (j === 0 || j === last)) || (i === last && j === 0);
        if (!onFinder) {
          drawSquares(s, x, y, 2, function (d) { return d !== 1; });
        }
      });
    });
    drawFormat(s, 0); // reserves the format modules; the real bits come with the mask
    setFixed(s, 8, size - 8, true); // the one module that is always dark
    if (s.version >= 7) {
      drawVersion(s);
    }
  }

  // drawFormat writes the 15 format bits (level and mask) in their two copies: around the
  // top-left finder, and split between the bottom-left and top-right ones.
  function drawFormat(s, bits) {
    var size = s.size;
    var bit = function (i) { return ((bits >>> i) & 1) === 1; };
    for (var i = 0; i < 15; i++) {
      if (i < 6) {
        setFixed(s, 8, i, bit(i));
      } else if (i < 8) {
        setFixed(s, 8, i + 1, bit(i)); // skips the timing pattern in row 6
      } else {
        setFixed(s, i === 8 ? 7 : 14 - i, 8, bit(i)); // skips it in column 6
      }
      if (i < 8) {
        setFixed(s, size - 1 - i, 8, bit(i));
      } else {
        setFixed(s, 8, size - 15 + i, bit(i));
      }
    }
  }

  function formatBits(mask) {
    return bchCode((QR_LEVEL_M << 3) | mask, 0x537) ^ 0x5412;
  }

  // drawVersion writes the 18 version bits (versions 7 and up) in two 6×3 blocks, beside
  // the top-right and bottom-left finders.
  function drawVersion(s) {
    var bits = bchCode(s.version, 0x1f25);
    for (var i = 0; i < 18; i++) {
      var dark = ((bits >>> i) & 1) === 1;
      var near = Math.floor(i / 3);
      var far = s.size - 11 + i % 3;
      setFixed(s, far, near, dark);
      setFixed(s, near, far, dark);
    }
  }

  // placeData fills the modules that are not fixed with the codewords' bits, most
  // significant first, in two-module columns from the right, up and down in turn.
  // Modules past the last codeword (the remainder bits) stay light.
  function placeData(s, codewords) {
    var size = s.size;
    var i = 0;
    var upward = true;
    for (var right = size - 1; right >= 1; right -= 2) {
      if (right === 6) {
        right = 5; // column 6 is the vertical timing pattern
      }
      for (var k = 0; k < size; k++) {
        var y = upward ? size - 1 - k : k;
        for (var x = right; x >= right - 1; x--) {
          if (!s.fixed[y * size + x]) {
            s.dark[y * size + x] = i < 8 * codewords.length && ((codewords[i >>> 3] >>> (7 - (i & 7))) & 1) === 1;
            i++;
          }
        }
      }
      upward = !upward;
    }
  }

  function masked(s, mask) {
    var m = { version: s.version, size: s.size, dark: s.dark.slice(), fixed: s.fixed };
    for (var y = 0; y < s.size; y++) {
      for (var x = 0; x < s.size; x++) {
        if (!s.fixed[y * s.size + x] && QR_MASKS[mask](x, y)) {
          m.dark[y * s.size + x] = !m.dark[y * s.size + x];
        }
      }
    }
    drawFormat(m, formatBits(mask));
    return m;
  }

  // penalty scores a masked symbol by the standard's four rules; the mask with the lowest
  // score is the one used. Rules 1 and 3 look at each row and column (linePenalty); rule 2
  // counts the 2×2 blocks of one colour; rule 4 the distance of the dark share from half.
  function penalty(s) {
    var size = s.size;
    var at = function (x, y) { return s.dark[y * size + x]; };
    var score = 0;
    for (var a = 0; a < size; a++) {
      score += linePenalty(lineOf(size, function (i) { return at(i, a); }));
      score += linePenalty(lineOf(size, function (i) { return at(a, i); }));
    }
    for (var y = 0; y < size - 1; y++) {
      for (var x = 0; x < size - 1; x++) {
        var c = at(x, y);
        if (c === at(x + 1, y) && c === at(x, y + 1) && c === at(x + 1, y + 1)) {
          score += 3;
        }
      }
    }
    var dark = s.dark.filter(Boolean).length;
    var total = size * size;
    return score + 10 * Math.floor(Math.abs(20 * dark - 10 * total) / total);
  }

  function lineOf(size, get) {
    var line = "";
    for (var i = 0; i < size; i++) {
      line += get(i) ? "1" : "0";
    }
    return line;
  }

  // linePenalty scores a row or column, "1" for dark: 3 for each run of five modules of
  // one colour plus 1 for each module more (rule 1), and 40 for each finder-like
  // 1:1:3:1:1 pattern with four light modules before or after it (rule 3).
  function linePenalty(line) {
    var score = 0;
    (line.match(/0{5,}|1{5,}/g) || []).forEach(function (run) {
      score += run.length - 2;
    });
    ["00001011101", "10111010000"].forEach(function (pattern) {
      for (var i = line.indexOf(pattern); i >= 0; i = line.indexOf(pattern, i + 1)) {
        score += 40;
      }
    });
    return score;
  }

  // qrCode encodes text (UTF-8, byte mode, level M) as a QR code: {version, size, mask,
  // penalty, modules}, modules[y][x] true for a dark module, without the quiet zone. It is
  // null when text does not fit version 15. mask (0–7), for tests, forces a mask pattern
  // instead of the one the penalty rules choose.
  function qrCode(text, mask) {
    var bytes;
    try {
      bytes = utf8Bytes(String(text));
    } catch (e) {
      return null;
    }
    var version = qrVersionFor(bytes.length);
    if (!version) {
      return null;
    }
    var s = newSymbol(version);
    drawFunctionPatterns(s);
    placeData(s, qrCodewords(qrData(bytes, version), version));
    var best = null;
    for (var m = 0; m < QR_MASKS.length; m++) {
      if (mask === undefined || mask === m) {
        var candidate = { mask: m, symbol: masked(s, m) };
        candidate.penalty = penalty(candidate.symbol);
        if (!best || candidate.penalty < best.penalty) {
          best = candidate;
        }
      }
    }
    if (!best) {
      return null;
    }
    var modules = [];
    for (var y = 0; y < s.size; y++) {
      modules.push(best.symbol.dark.slice(y * s.size, (y + 1) * s.size));
    }
    return { version: version, size: s.size, mask: best.mask, penalty: best.penalty, modules: modules };
  }

  // qrPathData draws a code's dark modules as SVG path data, one rectangle per run of dark
  // modules in a row, offset by the quiet zone.
  function qrPathData(code) {
    var d = "";
    code.modules.forEach(function (row, y) {
      for (var x = 0; x < row.length; x++) {
        if (!row[x]) {
          continue;
        }
        var start = x;
        while (x + 1 < row.length && row[x + 1]) {
          x++;
        }
        var run = x - start + 1;
        d += "M" + (start + QR_QUIET) + " " + (y + QR_QUIET) + "h" + run + "v1h-" + run + "z";
      }
    });
    return d;
  }

  function svg(tag, attrs) {
    var node = document.createElementNS(SVG_NS, tag);
    Object.keys(attrs).forEach(function (name) {
      node.setAttribute(name, String(attrs[name]));
    });
    return node;
  }

  // qrImage draws uri's QR code as an SVG, black on white whatever the page's colours so
  // that cameras read it, or returns null when the page cannot draw SVG or uri does not fit.
  function qrImage(uri) {
    var code = typeof document.createElementNS === "function" ? qrCode(uri) : null;
    if (!code) {
      return null;
    }
    var n = code.size + 2 * QR_QUIET;
    var image = svg("svg", {
      "data-role": "qr",
      viewBox: "0 0 " + n + " " + n,
      role: "img",
      "aria-label": "QR code of the sign-in address",
      "shape-rendering": "crispEdges"
    });
    image.appendChild(svg("rect", { width: n, height: n, fill: "#fff" }));
    image.appendChild(svg("path", { d: qrPathData(code), fill: "#000" }));
    return image;
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
      this.countdownTimer = 0;
      this.copyTimer = 0;
      this.deviceView = ""; // what the device view shows, to redraw it only when that changes
      this.expires = null; // the device view's countdown
      this.onMessage = this.onMessage.bind(this);
      this.tick = this.tick.bind(this);
      this.checkClosed = this.checkClosed.bind(this);
      this.timedOut = this.timedOut.bind(this);
      element.setAttribute("data-oauthflow", "prompt");
      window.addEventListener("message", this.onMessage);
      this.channel = openChannel(this.onBroadcast.bind(this));
      this.update(doc, options);
    }

    // update shows a new or changed document. A new sign-in starts over; for the same
    // one only a settled status (success, error) replaces what the widget shows,
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
      var same = this.doc && sameFlow(this.doc, next);
      var shown = this.status;
      this.doc = next;
      if (same && next.status === "pending" && shown !== "") {
        if (shown === "pending") {
          this.showPending(); // options may have changed the labels
        }
        return;
      }
      this.reset();
      // The widget learns a device sign-in's outcome only from the documents the host
      // passes in: the one that settles the sign-in it showed pending is its outcome.
      var report = same && next.userCode !== "" && shown === "pending";
      if (!isValidDocument(next)) {
        this.fail("invalid_document", "This sign-in prompt is invalid.", false);
      } else if (next.status === "success") {
        var message = this.showSuccess();
        if (report) {
          this.done("success", next.provider, message, "");
        }
      } else if (next.status === "error") {
        this.fail("error", next.message || "Sign-in was not completed.", report);
      } else {
        this.showPending();
      }
    }

    // connect opens the sign-in popup; call it from a click so the browser allows it.
    connect() {
      if (!this.doc || this.doc.userCode || !isHTTPURL(this.doc.authUrl)) {
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
      this.stopDeviceTimers();
      this.popup = null;
      this.attempt++;
    }

    stopDeviceTimers() {
      this.deviceView = "";
      if (this.countdownTimer) {
        window.clearInterval(this.countdownTimer);
        this.countdownTimer = 0;
      }
      if (this.copyTimer) {
        window.clearTimeout(this.copyTimer);
        this.copyTimer = 0;
      }
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
        error_description: data.error_description ? String(data.error_description) : "",
        fields: data.fields
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
      if (this.doc.userCode) {
        this.showDevice();
        return;
      }
      this.render("pending", "", this.doc.message || "Sign in with " + this.name() + " to continue.");
      this.button("connect", "Connect " + this.name());
    }

    // showDevice shows a pending device sign-in. The host calls update() each time it polls:
    // an unchanged document keeps the view as it is, so neither the code the user may be
    // selecting nor the copy button's answer is redrawn under them.
    showDevice() {
      var doc = this.doc;
      var view = JSON.stringify([this.name(), doc.message, doc.userCode, doc.verificationUri,
        doc.verificationUriComplete, doc.expiresAt]);
      if (this.status === "pending" && this.deviceView === view) {
        return;
      }
      this.stopDeviceTimers();
      this.deviceView = view;
      this.render("pending", "", doc.message ||
        "To sign in to " + this.name() + ", open this address on any device and enter the code below.");
      var root = this.element;
      var uri = doc.verificationUri;
      root.appendChild(isLinkURL(uri)
        ? el("a", { "data-role": "verification-uri", href: uri, target: "_blank", rel: "noopener noreferrer" }, uri)
        : el("span", { "data-role": "verification-uri" }, uri));
      var code = el("code", { "data-role": "user-code" }, doc.userCode);
      root.appendChild(code);
      var copy = el("button", { type: "button", "data-action": "copy" }, COPY_LABEL);
      copy.addEventListener("click", this.copyCode.bind(this, code, copy));
      root.appendChild(copy);
      this.startCountdown();
      var target = [completeLink(uri, doc.verificationUriComplete), uri].filter(isLinkURL)[0];
      var image = target ? qrImage(target) : null;
      if (image) {
        root.appendChild(image);
      }
    }

    startCountdown() {
      if (!(this.doc.expiresAt > 0)) {
        return;
      }
      this.expires = el("p", { "data-role": "expires", role: "timer" });
      this.element.appendChild(this.expires);
      if (this.tick()) {
        this.countdownTimer = window.setInterval(this.tick, 1000);
      }
    }

    // tick shows the time left for the code and reports whether there is any.
    tick() {
      var left = Math.ceil((this.doc.expiresAt - Date.now()) / 1000);
      if (left > 0) {
        this.expires.textContent = "The code expires in " + timeLeft(left) + ".";
        return true;
      }
      if (this.countdownTimer) {
        window.clearInterval(this.countdownTimer);
        this.countdownTimer = 0;
      }
      // The server decides; until the host's next update() says so, the code stays shown.
      this.expires.textContent = "The code has expired.";
      this.element.setAttribute("data-reason", "expired");
      return false;
    }

    // copyCode copies the user code with the clipboard API or, where that is missing or
    // refused, selects it for the user to copy.
    copyCode(code, button) {
      var attempt = this.attempt;
      var self = this;
      var clipboard = window.navigator && window.navigator.clipboard;
      var written;
      try {
        written = Promise.resolve(clipboard.writeText(this.doc.userCode));
      } catch (e) {
        written = Promise.reject(e);
      }
      written.then(function () {
        return true;
      }, function () {
        return selectText(code);
      }).then(function (copied) {
        if (attempt === self.attempt) {
          self.showCopied(button, copied ? "Copied" : "Selected");
        }
      });
    }

    showCopied(button, label) {
      button.textContent = label;
      window.clearTimeout(this.copyTimer);
      var self = this;
      this.copyTimer = window.setTimeout(function () {
        self.copyTimer = 0;
        button.textContent = COPY_LABEL;
      }, COPIED_MS);
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
      var account = this.doc && this.doc.account;
      var message = "Connected to " + this.name() + (account ? " as " + account : "") + ".";
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
    completionBody: completionBody,
    qrCode: qrCode
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
