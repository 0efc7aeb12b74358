/*
 * oauthflow: the frontend callback page (/oauth/callback), the provider's redirect target
 * when the redirect URI points at the frontend. Plain script, no build step; it needs
 * oauth-prompt.js loaded before it (for OAuthFlow.complete).
 *
 * Opened as a popup by a same-origin page, it posts
 *   {type: "oauthflow:callback", code, state, iss, error, error_description[, fields]}
 * to its opener with the strict target origin location.origin, then closes. fields holds
 * the extra parameters of the provider's redirect that the page names in its
 * data-callback-fields (those the providers keep with the tokens, QuickBooks' realmId),
 * as given, at most eight, none longer than 4096 characters; nothing else is forwarded.
 * Opened directly (no opener, e.g. from a link a CLI printed), it posts the fields to
 * {data-api-base}/api/v1/oauth/complete, shows the outcome and announces it on the
 * "oauthflow" BroadcastChannel, so a widget whose popup lost its opener still learns it.
 *
 * DOM hooks: #oauth-callback carries data-status="pending|working|success|error" and
 * data-mode="popup|direct"; [data-role=title] and [data-role=message] hold the text.
 */
(function (window) {
  "use strict";

  var document = window.document;
  var location = window.location;

  var MAX_FIELD = 4096; // characters of an extra field, as the API bounds a callback's
  var MAX_EXTRA = 8; // extra fields forwarded, as the API keeps at most

  // readFields reads the provider's answer from search, and the extra fields named in
  // names (space-separated), when search holds any.
  function readFields(search, names) {
    var q = new window.URLSearchParams(search);
    var fields = {
      code: q.get("code") || "",
      state: q.get("state") || "",
      iss: q.get("iss") || "",
      error: q.get("error") || "",
      error_description: q.get("error_description") || ""
    };
    var extra = null;
    var kept = 0;
    String(names || "").split(/\s+/).forEach(function (name) {
      var v = name ? q.get(name) : null;
      if (v && v.length <= MAX_FIELD && kept < MAX_EXTRA && !(extra && name in extra)) {
        extra = extra || Object.create(null);
        extra[name] = v;
        kept++;
      }
    });
    if (extra) {
      fields.fields = extra;
    }
    return fields;
  }

  // sameOriginOpener returns the window that opened this one when it is open and on this
  // origin (reading a cross-origin opener's location throws), and null otherwise.
  function sameOriginOpener() {
    var opener = window.opener;
    try {
      if (opener && !opener.closed && opener.location.origin === location.origin) {
        return opener;
      }
    } catch (e) {
      // a cross-origin opener: answer as if opened directly
    }
    return null;
  }

  function show(root, status, title, message) {
    root.setAttribute("data-status", status);
    document.getElementById("oauth-callback-title").textContent = title;
    document.getElementById("oauth-callback-message").textContent = message;
  }

  function main() {
    var root = document.getElementById("oauth-callback");
    if (!root) {
      return;
    }
    var fields = readFields(location.search, root.getAttribute("data-callback-fields"));
    // First of all, take the code out of the address bar and the history.
    window.history.replaceState(null, "", location.pathname);

    if (!fields.state || !(fields.code || fields.error)) {
      show(root, "error", "Invalid callback", "The sign-in answer is missing its code or state. Start the sign-in again.");
      return;
    }
    var opener = sameOriginOpener();
    if (opener) {
      root.setAttribute("data-mode", "popup");
      show(root, "working", "Working…", "Returning to the application…");
      var message = {
        type: "oauthflow:callback",
        code: fields.code,
        state: fields.state,
        iss: fields.iss,
        error: fields.error,
        error_description: fields.error_description
      };
      if (fields.fields) {
        message.fields = fields.fields;
      }
      opener.postMessage(message, location.origin);
      window.close();
      return;
    }
    root.setAttribute("data-mode", "direct");
    if (!window.OAuthFlow || !window.OAuthFlow.complete) {
      show(root, "error", "Sign-in not completed", "The sign-in script did not load. Reload the page to try again.");
      return;
    }
    show(root, "working", "Working…", "Completing sign-in…");
    window.OAuthFlow.complete(root.getAttribute("data-api-base") || "", fields).then(function (outcome) {
      window.OAuthFlow.announce(fields.state, outcome);
      if (outcome.status === "success") {
        var name = outcome.providerName || outcome.provider;
        var account = name ? "Your " + name + " account" : "Your account";
        show(root, "success", "Connected", account + " is connected. You can close this window.");
      } else {
        show(root, "error", "Sign-in not completed", outcome.message);
      }
    });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", main);
  } else {
    main();
  }
})(window);
