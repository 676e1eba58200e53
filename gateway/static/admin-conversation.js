/*
 * Deskpilot admin page: one conversation's audit trail, opened by a link such as
 * /admin#conversation=<id> (the notices of unanswered questions carry one). It reads
 * GET /api/admin/audit?conversation_id=<id> with the admin token and shows the records, oldest
 * first, already redacted, in #conversation-view above the tabs.
 */
(function () {
  "use strict";

  var PREFIX = "#conversation=";

  function el(tag, attrs, text) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (name) {
      node.setAttribute(name, attrs[name]);
    });
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function wanted() {
    if (location.hash.indexOf(PREFIX) !== 0) return null;
    try {
      return decodeURIComponent(location.hash.slice(PREFIX.length)) || null;
    } catch (e) {
      return null;
    }
  }

  function show() {
    var box = document.getElementById("conversation-view");
    var id = wanted();
    if (!box) return;
    box.textContent = "";
    box.hidden = !id;
    if (!id || !window.DeskpilotAdmin) return;
    box.appendChild(el("h2", { id: "conversation-title", tabindex: "-1" }, "Conversation " + id));
    var note = el("p", { class: "status" }, "Loading…");
    box.appendChild(note);
    var path = "/api/admin/audit?conversation_id=" + encodeURIComponent(id);
    window.DeskpilotAdmin.fetchJson(path).then(
      function (data) {
        var records = (data && data.records) || [];
        note.textContent = records.length
          ? records.length + " record(s), oldest first" + (data.complete === false ? " (older ones may exist)" : "") + "."
          : "No records of this conversation.";
        var list = el("ol", { class: "conversation-records" });
        records.forEach(function (r) {
          var question = r.details && r.details.question ? " — “" + r.details.question + "”" : "";
          var when = r.occurred_at ? new Date(r.occurred_at).toLocaleString() + " · " : "";
          list.appendChild(el("li", {}, when + r.service + " · " + r.action + ": " + r.reason + question));
        });
        box.appendChild(list);
      },
      function (error) {
        note.textContent = error && error.status === 401
          ? "Sign in with an admin token to read the conversation."
          : "Could not load the conversation: " + ((error && error.message) || "error");
        note.classList.add("error");
      }
    );
  }

  window.addEventListener("hashchange", show);
  document.addEventListener("deskpilot:admin-token", show);
  document.addEventListener("DOMContentLoaded", show);
})();
