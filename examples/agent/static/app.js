// The agent page: "List my repositories" starts a run of the consumer workflow
// (POST /app/runs) and polls its view (GET /app/runs/{id}). While the run waits
// in awaiting_auth, the view carries its "oauth" child's prompt document, which
// the page renders inline with the oauth-prompt widget; once the user has signed
// in, the server resumes the run on its own and the view lists the repositories.
//
// DOM hooks: #run carries data-status (running|waiting|completed|failed) and
// data-state; [data-role=prompt] holds the inline prompt; ul[data-role=repos] li.
(function () {
  "use strict";
  var POLL_MS = 1000;
  var root = document.getElementById("run");
  var startButton = document.querySelector('[data-action="start"]');
  var current = null; // {id, timer, childId, promptStatus, widget}

  function api(method, path, body) {
    var init = { method: method, headers: {}, credentials: "same-origin", cache: "no-store" };
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    return fetch(path, init).then(function (resp) {
      return resp.json().then(function (data) { return { status: resp.status, data: data }; },
        function () { return { status: resp.status, data: {} }; });
    });
  }

  function part(role) { return root.querySelector('[data-role="' + role + '"]'); }

  function settled(status) { return status === "completed" || status === "failed"; }

  // renderPrompt shows the child's prompt inline; an unchanged document is left
  // alone, so a poll never interrupts a sign-in the widget is driving.
  function renderPrompt(view) {
    var slot = part("prompt");
    var inline = view.prompt && view.child && view.child.show === "inline";
    if (!inline) {
      slot.hidden = !current.widget; // once signed in, it keeps saying "Connected"
      return;
    }
    slot.hidden = false;
    if (current.childId !== view.child.id) {
      slot.replaceChildren();
      var holder = document.createElement("div");
      slot.appendChild(holder);
      holder.addEventListener("oauthflow:done", function (ev) {
        if (ev.detail.status === "success") poll(0);
      });
      current.childId = view.child.id;
      current.promptStatus = view.prompt.status;
      current.widget = OAuthFlow.renderPrompt(holder, view.prompt, { providerName: view.providerName });
    } else if (current.promptStatus !== view.prompt.status) {
      current.promptStatus = view.prompt.status;
      current.widget.update(view.prompt);
    }
  }

  function renderRepos(repos) {
    var list = part("repos");
    list.replaceChildren();
    (repos || []).forEach(function (r) {
      var li = document.createElement("li");
      var name = document.createElement("strong");
      name.textContent = r.full_name || r.name;
      li.appendChild(name);
      if (r.private) {
        var tag = document.createElement("span");
        tag.className = "private";
        tag.textContent = "private";
        li.appendChild(tag);
      }
      if (r.description) {
        var d = document.createElement("span");
        d.className = "description";
        d.textContent = " — " + r.description;
        li.appendChild(d);
      }
      list.appendChild(li);
    });
    list.hidden = !repos || repos.length === 0;
  }

  function render(view) {
    root.hidden = false;
    root.setAttribute("data-status", view.status);
    root.setAttribute("data-state", view.state);
    part("run-id").textContent = view.id;
    part("status").textContent = view.status;
    part("state").textContent = view.state;
    renderPrompt(view);
    renderRepos(view.status === "completed" ? view.repos : null);
    var error = part("error");
    error.textContent = view.error || "";
    error.hidden = !view.error;
    if (view.status === "completed" && !view.error && (!view.repos || view.repos.length === 0)) {
      error.hidden = false;
      error.textContent = "No repositories.";
    }
    startButton.disabled = !settled(view.status);
  }

  function poll(delay) {
    var run = current;
    window.clearTimeout(run.timer);
    run.timer = window.setTimeout(function () {
      api("GET", "/app/runs/" + encodeURIComponent(run.id)).then(function (r) {
        if (run !== current) return;
        if (r.status !== 200) { showError("Could not read the run: " + (r.data.error || r.status)); return; }
        render(r.data);
        if (!settled(r.data.status)) poll(POLL_MS);
      }, function () {
        if (run === current) poll(POLL_MS * 3); // offline for a moment: keep trying
      });
    }, delay);
  }

  function showError(text) {
    root.hidden = false;
    var error = part("error");
    error.textContent = text;
    error.hidden = false;
    startButton.disabled = false;
  }

  function follow(view) {
    if (current) window.clearTimeout(current.timer);
    if (current && current.widget) current.widget.destroy();
    part("prompt").replaceChildren();
    current = { id: view.id, timer: 0, childId: "", promptStatus: "", widget: null };
    window.history.replaceState(null, "", "#run=" + encodeURIComponent(view.id));
    render(view);
    if (!settled(view.status)) poll(POLL_MS);
  }

  startButton.addEventListener("click", function () {
    startButton.disabled = true;
    api("POST", "/app/runs", {}).then(function (r) {
      if (r.status !== 201) { showError("Could not start the run: " + (r.data.error || r.status)); return; }
      follow(r.data);
    }, function () { showError("The server could not be reached."); });
  });

  // A reload keeps following the run named in the address.
  var m = /^#run=([^&]+)$/.exec(window.location.hash);
  if (m) {
    api("GET", "/app/runs/" + m[1]).then(function (r) {
      if (r.status === 200) follow(r.data);
    });
  }
})();
