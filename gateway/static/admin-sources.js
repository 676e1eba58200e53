/*
 * Deskpilot admin page: the Sources tab (renders into #tab-sources).
 *
 * The knowledge sources the indexer syncs (Confluence spaces, SharePoint libraries), from
 * GET /api/admin/sources: each one's state, documents in the index, and its last run (when it
 * ended, new / changed / unchanged / deleted / failed, why it stopped early), and for a source
 * taken out of the configuration when it is removed. "Sync now" queues
 * a run (POST /api/admin/sources/{name}/sync); Refresh reads the list again. Text from the API
 * is set with textContent only.
 */
(function () {
  "use strict";

  var API = "/api/admin/sources";
  var panel = null;
  var loaded = false;
  var list = null;
  var note = null;

  function node(tag, attrs, text) {
    var made = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (name) {
      made.setAttribute(name, attrs[name]);
    });
    if (text !== undefined && text !== null) made.textContent = String(text);
    return made;
  }

  function tell(text, isError) {
    note.textContent = text;
    note.className = isError ? "status error" : "status";
  }

  function detail(error) {
    return (error && error.body && error.body.detail) || (error && error.message) || "failed";
  }

  function counts(summary) {
    if (!summary) return "never synced";
    return (
      summary.new + " new, " + summary.changed + " changed, " + summary.unchanged +
      " unchanged, " + summary.deleted + " deleted, " + summary.failed + " failed in " +
      Number(summary.duration_s).toFixed(1) + " s"
    );
  }

  function sync(name) {
    tell("Queuing a sync of " + name + "…");
    window.DeskpilotAdmin.fetchJson(API + "/" + encodeURIComponent(name) + "/sync", {
      method: "POST",
    }).then(
      function () {
        tell("Sync of " + name + " queued; Refresh shows it when it ends.");
      },
      function (error) {
        tell("Could not queue the sync: " + detail(error), true);
      }
    );
  }

  function render(sources) {
    list.textContent = "";
    if (!sources.length) {
      list.appendChild(node("p", {}, "No sources configured (INDEXER_SOURCES)."));
      return;
    }
    var table = node("table", { class: "sources" });
    var head = node("tr");
    ["Source", "Kind", "State", "Documents", "Last sync", "Result", ""].forEach(function (h) {
      head.appendChild(node("th", { scope: "col" }, h));
    });
    table.appendChild(node("thead")).appendChild(head);
    var body = table.appendChild(node("tbody"));
    sources.forEach(function (source) {
      var row = node("tr", { "data-source": source.name });
      row.appendChild(node("td", {}, source.name));
      row.appendChild(node("td", {}, source.kind));
      var state = node("td", {}, source.state);
      if (source.removal_due_at) {
        // Taken out of INDEXER_SOURCES: hidden now, deleted then unless configured again.
        state.appendChild(
          node(
            "div",
            { class: "source-removal" },
            "No longer configured; removed " + new Date(source.removal_due_at).toLocaleString()
          )
        );
      }
      row.appendChild(state);
      row.appendChild(node("td", {}, source.documents));
      var finished = source.last_finished_at ? new Date(source.last_finished_at) : null;
      row.appendChild(node("td", {}, finished ? finished.toLocaleString() : "–"));
      var result = node("td", { class: "source-result" }, counts(source.last_summary));
      if (source.last_error) {
        result.appendChild(node("div", { class: "source-error" }, "Stopped: " + source.last_error));
      }
      row.appendChild(result);
      var actions = row.appendChild(node("td"));
      if (!source.removal_due_at) {
        var button = node("button", { type: "button", class: "source-sync" }, "Sync now");
        button.addEventListener("click", function () {
          sync(source.name);
        });
        actions.appendChild(button);
      }
      body.appendChild(row);
    });
    list.appendChild(table);
  }

  function load() {
    window.DeskpilotAdmin.fetchJson(API).then(render, function (error) {
      tell("Could not read the sources: " + detail(error), true);
    });
  }

  function show() {
    if (!panel) {
      panel = document.getElementById("tab-sources");
      if (!panel || !window.DeskpilotAdmin) return;
      panel.appendChild(node("h2", {}, "Knowledge sources"));
      var refresh = node("button", { type: "button", class: "secondary" }, "Refresh");
      refresh.addEventListener("click", load);
      panel.appendChild(refresh);
      note = panel.appendChild(node("p", { class: "status", role: "status", "aria-live": "polite" }));
      list = panel.appendChild(node("div", { id: "source-list" }));
    }
    loaded = true;
    load();
  }

  document.addEventListener("deskpilot:admin-tab", function (event) {
    if (event.detail === "tab-sources") show();
  });
  document.addEventListener("deskpilot:admin-token", function () {
    if (loaded) load();
  });
})();
