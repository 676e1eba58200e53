/*
 * Deskpilot admin page: the Proposals tab (renders into #tab-proposals).
 *
 * The review queue of knowledge-base update proposals the indexer drafts from recurring gaps
 * (questions that went unanswered, were escalated or rated low). GET /api/admin/proposals lists
 * them; a row opens one (GET .../{id}): its questions, the proposed article, sources and the
 * closest existing article. Approve ingests the article into the knowledge base; Reject needs a
 * reason; Export downloads the Markdown (and Copy puts it on the clipboard) for SharePoint.
 * Text from the API is set with textContent only; links are made only for http(s) URLs.
 */
(function () {
  "use strict";

  var API = "/api/admin/proposals";
  var STATUSES = ["pending", "approved", "rejected", ""];
  var SIGNALS = { no_answer: "not answered", escalated: "escalated", low_rating: "rated low" };

  var panel = null;
  var state = { status: "pending", selected: null, loaded: false };
  var els = {};

  function el(tag, attrs, text) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (name) {
      node.setAttribute(name, attrs[name]);
    });
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function headers(extra) {
    var base = window.DeskpilotAdmin ? window.DeskpilotAdmin.headers() : {};
    return Object.assign({ Accept: "application/json" }, base, extra || {});
  }

  function call(method, path, body) {
    var init = { method: method, headers: headers() };
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    return fetch(path, init).then(function (response) {
      return response.text().then(function (text) {
        var data = null;
        try {
          data = text ? JSON.parse(text) : null;
        } catch (e) {
          data = null;
        }
        if (!response.ok) {
          var error = new Error((data && data.detail) || "HTTP " + response.status);
          error.status = response.status;
          throw error;
        }
        return data;
      });
    });
  }

  function say(text, isError) {
    els.status.textContent = text;
    els.status.className = isError ? "status error" : "status";
  }

  function safeLink(url, label) {
    var text = label || url;
    if (typeof url === "string" && /^https?:\/\//i.test(url)) {
      var a = el("a", { href: url, target: "_blank", rel: "noopener noreferrer" }, text);
      return a;
    }
    return el("span", {}, text);
  }

  function when(iso) {
    var date = new Date(iso);
    return isNaN(date.getTime()) ? String(iso) : date.toLocaleString();
  }

  function signalText(signals) {
    return Object.keys(signals || {})
      .map(function (key) {
        return signals[key] + " " + (SIGNALS[key] || key);
      })
      .join(", ");
  }

  // -- list ---------------------------------------------------------------------------------

  function loadList() {
    var query = state.status ? "?status=" + encodeURIComponent(state.status) : "";
    say("Loading proposals…");
    return call("GET", API + query)
      .then(function (data) {
        renderList(data.proposals || []);
        say(data.proposals.length + " proposal(s).");
      })
      .catch(function (error) {
        renderList([]);
        say(error.status === 401 || error.status === 403
          ? "Sign in with an admin token to review proposals."
          : "Could not load proposals: " + error.message, true);
      });
  }

  function renderList(proposals) {
    els.list.textContent = "";
    if (!proposals.length) {
      els.list.appendChild(el("p", { class: "placeholder" }, "No proposals here."));
      return;
    }
    var wrap = el("div", { class: "table-wrap" });
    var table = el("table", { id: "proposals-table" });
    table.appendChild(el("caption", { class: "sr-caption" }, "Knowledge-base update proposals"));
    var head = el("tr");
    ["Title", "Status", "Questions", "Why", "Drafted"].forEach(function (name) {
      head.appendChild(el("th", { scope: "col" }, name));
    });
    table.appendChild(el("thead")).appendChild(head);
    var body = el("tbody");
    proposals.forEach(function (p) {
      var row = el("tr", { "data-proposal-id": p.id });
      var cell = el("td");
      var open = el("button", { type: "button", class: "secondary proposal-open" }, p.title);
      open.addEventListener("click", function () {
        openProposal(p.id);
      });
      cell.appendChild(open);
      row.appendChild(cell);
      row.appendChild(el("td", {}, p.status));
      row.appendChild(el("td", { class: "num" }, p.questions));
      row.appendChild(el("td", {}, signalText(p.signals)));
      row.appendChild(el("td", {}, when(p.drafted_at)));
      body.appendChild(row);
    });
    table.appendChild(body);
    wrap.appendChild(table);
    els.list.appendChild(wrap);
  }

  // -- one proposal ---------------------------------------------------------------------------

  function openProposal(id) {
    state.selected = id;
    return call("GET", API + "/" + encodeURIComponent(id))
      .then(renderDetail)
      .catch(function (error) {
        say("Could not open the proposal: " + error.message, true);
      });
  }

  function renderDetail(p) {
    var box = els.detail;
    box.textContent = "";
    box.hidden = false;
    var heading = el("h3", { id: "proposal-title", tabindex: "-1" }, p.title);
    box.appendChild(heading);
    var meta = "Status: " + p.status + " · revision " + p.revision + " · drafted " + when(p.drafted_at);
    if (p.decided_by) meta += " · decided by " + p.decided_by;
    box.appendChild(el("p", { class: "proposal-meta" }, meta));
    if (p.reason) box.appendChild(el("p", { class: "proposal-reason" }, "Rejected: " + p.reason));
    if (p.document_id) {
      box.appendChild(el("p", {}, "Ingested as document " + p.document_id + "."));
    }
    if (p.draft) box.appendChild(draftLine(p.draft));
    if (p.affected_article_url) {
      var affected = el("p", {}, "Closest existing article: ");
      affected.appendChild(safeLink(p.affected_article_url, p.affected_article_title));
      box.appendChild(affected);
    }

    box.appendChild(el("h4", {}, "Questions asked (" + p.questions.length + ")"));
    var questions = el("ul", { class: "proposal-questions" });
    p.questions.forEach(function (q) {
      questions.appendChild(el("li", {}, q.text + " — " + (SIGNALS[q.signal] || q.signal)));
    });
    box.appendChild(questions);

    box.appendChild(el("h4", {}, "Sources"));
    var sources = el("ul", { class: "proposal-sources" });
    if (!p.sources.length) sources.appendChild(el("li", {}, "none"));
    p.sources.forEach(function (s) {
      var item = el("li");
      if (s.kind === "ticket") item.textContent = "Ticket " + s.ref + ": " + s.title;
      else item.appendChild(safeLink(s.ref, s.title));
      sources.appendChild(item);
    });
    box.appendChild(sources);

    box.appendChild(el("h4", {}, "Proposed article (Markdown)"));
    box.appendChild(el("pre", { class: "proposal-article", tabindex: "0" }, p.article_markdown));

    var actions = el("div", { class: "range proposal-actions" });
    var exportButton = el("button", { type: "button", class: "secondary" }, "Export Markdown");
    exportButton.addEventListener("click", function () {
      exportMarkdown(p);
    });
    var copyButton = el("button", { type: "button", class: "secondary" }, "Copy Markdown");
    copyButton.addEventListener("click", function () {
      if (navigator.clipboard) {
        navigator.clipboard.writeText(p.article_markdown).then(
          function () { say("Markdown copied."); },
          function () { say("Copying is not allowed here; use Export.", true); }
        );
      }
    });
    actions.appendChild(exportButton);
    actions.appendChild(copyButton);
    if (p.status === "pending") {
      var target = targetPicker("proposal-target", "Also write as a draft into");
      actions.appendChild(target.label);
      var approve = el("button", { type: "button", id: "proposal-approve" }, "Approve and ingest");
      approve.addEventListener("click", function () {
        decide(p.id, "approve", target.select.value ? { target: target.select.value } : undefined, approve);
      });
      actions.appendChild(approve);
      var form = el("form", { class: "range", id: "proposal-reject" });
      var label = el("label", { for: "proposal-reason" }, "Reason to reject");
      var reason = el("input", { id: "proposal-reason", name: "reason", required: "", maxlength: "500" });
      label.appendChild(reason);
      form.appendChild(label);
      form.appendChild(el("button", { type: "submit", class: "secondary" }, "Reject"));
      form.addEventListener("submit", function (event) {
        event.preventDefault();
        var text = reason.value.trim();
        if (!text) {
          say("Say why the proposal is rejected.", true);
          reason.focus();
          return;
        }
        decide(p.id, "reject", { reason: text }, form.querySelector("button"));
      });
      actions.appendChild(form);
    }
    var drafting = p.draft && (p.draft.status === "requested" || p.draft.status === "created");
    if (p.status === "approved" && !drafting) {
      var again = targetPicker("proposal-draft-target", "Write as a draft into");
      var write = el("button", { type: "button", id: "proposal-draft", class: "secondary" }, "Write draft");
      write.addEventListener("click", function () {
        if (!again.select.value) {
          say("Pick the source to write the draft into.", true);
          return;
        }
        decide(p.id, "draft", { target: again.select.value }, write);
      });
      actions.appendChild(again.label);
      actions.appendChild(write);
    }
    box.appendChild(actions);
    heading.focus();
  }

  // The proposal's draft in a knowledge source: never published by Deskpilot; a person opens
  // the link, reviews and publishes it.
  function draftLine(draft) {
    var line = el("p", { class: "proposal-draft", id: "proposal-draft-status" });
    if (draft.status === "created" && draft.url) {
      line.appendChild(document.createTextNode("Draft in " + draft.source + " (not published): "));
      line.appendChild(safeLink(draft.url, "open the draft"));
    } else if (draft.status === "failed") {
      var text = "Draft in " + draft.source + " failed: " + (draft.error || "no reason given");
      if (draft.missing_permission) text += " (missing permission: " + draft.missing_permission + ")";
      line.textContent = text;
      line.classList.add("error");
    } else {
      line.textContent = "Draft in " + draft.source + ": being written…";
    }
    return line;
  }

  // A choice among the configured knowledge sources (GET /api/admin/sources), filled in when
  // the list arrives; the empty choice means "no draft".
  function targetPicker(id, text) {
    var label = el("label", { for: id }, text + " ");
    var select = el("select", { id: id, name: "target" });
    select.appendChild(el("option", { value: "" }, "no source"));
    label.appendChild(select);
    call("GET", "/api/admin/sources").then(
      function (sources) {
        sources.forEach(function (source) {
          select.appendChild(el("option", { value: source.name }, source.name + " (" + source.kind + ")"));
        });
      },
      function () { /* no sources listed: only the knowledge base */ }
    );
    return { label: label, select: select };
  }

  function decide(id, action, body, button) {
    button.disabled = true;
    return call("POST", API + "/" + encodeURIComponent(id) + "/" + action, body)
      .then(function (p) {
        var said = { approve: "Approved: the article is being ingested.", reject: "Rejected.",
          draft: "The draft is being written." };
        say(said[action]);
        renderDetail(p);
        loadList();
      })
      .catch(function (error) {
        button.disabled = false;
        say("Could not " + action + ": " + error.message, true);
        if (error.status === 409) openProposal(id);
      });
  }

  function exportMarkdown(p) {
    fetch(API + "/" + encodeURIComponent(p.id) + "/export", { headers: headers({ Accept: "text/markdown" }) })
      .then(function (response) {
        if (!response.ok) throw new Error("HTTP " + response.status);
        var disposition = response.headers.get("content-disposition") || "";
        var match = /filename="([^"]+)"/.exec(disposition);
        return response.blob().then(function (blob) {
          var url = URL.createObjectURL(blob);
          var link = el("a", { href: url, download: match ? match[1] : "proposal.md" });
          document.body.appendChild(link);
          link.click();
          link.remove();
          setTimeout(function () { URL.revokeObjectURL(url); }, 1000);
          say("Markdown exported.");
        });
      })
      .catch(function (error) {
        say("Could not export: " + error.message, true);
      });
  }

  // -- shell ----------------------------------------------------------------------------------

  function build() {
    panel = document.getElementById("tab-proposals");
    if (!panel) return false;
    panel.textContent = "";
    panel.appendChild(el("h2", {}, "Knowledge-base update proposals"));
    panel.appendChild(
      el(
        "p",
        { class: "definition" },
        "Drafted from recurring gaps: similar questions that went unanswered, were escalated " +
          "or rated 1–2. Approve to add the article to the knowledge base; reject with a reason."
      )
    );
    var controls = el("div", { class: "range" });
    var label = el("label", { for: "proposal-filter" }, "Show");
    var select = el("select", { id: "proposal-filter" });
    STATUSES.forEach(function (status) {
      var option = el("option", { value: status }, status || "all");
      if (status === state.status) option.selected = true;
      select.appendChild(option);
    });
    select.addEventListener("change", function () {
      state.status = select.value;
      loadList();
    });
    label.appendChild(select);
    controls.appendChild(label);
    var refresh = el("button", { type: "button", class: "secondary" }, "Refresh");
    refresh.addEventListener("click", loadList);
    controls.appendChild(refresh);
    panel.appendChild(controls);
    els.status = el("p", { class: "status", role: "status", "aria-live": "polite" });
    panel.appendChild(els.status);
    els.list = el("div", { id: "proposal-list" });
    panel.appendChild(els.list);
    els.detail = el("section", { id: "proposal-detail", "aria-labelledby": "proposal-title" });
    els.detail.hidden = true;
    panel.appendChild(els.detail);
    return true;
  }

  function show() {
    if (!panel && !build()) return;
    state.loaded = true;
    loadList();
  }

  document.addEventListener("deskpilot:admin-tab", function (event) {
    if (event.detail === "tab-proposals") show();
  });
  document.addEventListener("deskpilot:admin-token", function () {
    if (state.loaded) loadList();
  });
  document.addEventListener("DOMContentLoaded", function () {
    var current = document.getElementById("tab-proposals");
    if (current && !current.hidden) show();
  });
})();
