/*
 * Deskpilot admin page: the Configuration tab (renders into #tab-config when the page has one).
 *
 * GET /api/admin/config gives every editable setting with its value in force, its default, its
 * bounds and whether an admin overrode it; the form is built from that. Save sends only what was
 * changed (PUT with the version read; a reset sends null, which restores the service's default).
 * The services apply a saved change within a few seconds, without a restart. 422 messages are
 * shown next to their field, a 409 (someone saved first) reloads the form. The history comes from
 * the audit log (GET /api/admin/config/history). Text from the API is set with textContent only.
 */
(function () {
  "use strict";

  var TOKEN_KEY = "deskpilot.adminToken";
  var API = "/api/admin/config";
  var SECTIONS = [
    {
      service: "orchestrator",
      title: "Answers, clarification, escalation and crawl budget",
    },
    { service: "crawler", title: "Crawler politeness (per host, whole fleet)" },
  ];
  var LABELS = {
    crawl_seed_urls: "Help-site seed URLs",
    crawl_allowed_domains: "Allowed domains",
    top_k: "Chunks retrieved (top_k)",
    relevance_threshold: "Relevance threshold",
    crawl_max_depth: "Crawl depth",
    crawl_max_pages: "Crawl pages",
    crawl_deadline_s: "Crawl deadline (seconds)",
    crawl_concurrency: "Pages fetched at once",
    domain_requests_per_s: "Requests per second per host",
    domain_concurrency: "Requests in flight per host",
    max_crawl_delay_s: "Longest robots.txt crawl-delay (seconds)",
    clarify_cap: "Clarification cap (rounds)",
    escalation_anger_threshold: "Escalation (anger) threshold",
    category_queues: "Category → technician queue",
  };

  // -- API ----------------------------------------------------------------------------------

  function headers() {
    if (window.DeskpilotAdmin) return window.DeskpilotAdmin.headers();
    var t = "";
    try {
      t = sessionStorage.getItem(TOKEN_KEY) || "";
    } catch (e) {
      t = "";
    }
    return t ? { Authorization: "Bearer " + t } : {};
  }

  function request(method, path, body) {
    var init = { method: method, headers: Object.assign({ Accept: "application/json" }, headers()) };
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
          error.body = data || {};
          throw error;
        }
        return data;
      });
    });
  }

  // -- DOM helpers --------------------------------------------------------------------------

  function el(tag, attrs, text) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (name) {
      if (name === "className") node.className = attrs[name];
      else node.setAttribute(name, attrs[name]);
    });
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function shown(value) {
    if (value === null || value === undefined) return "unknown (service not started)";
    if (Array.isArray(value)) return value.length ? value.join(", ") : "none";
    if (typeof value === "object") {
      return Object.keys(value)
        .map(function (k) {
          return k + " → " + value[k];
        })
        .join("; ");
    }
    return String(value);
  }

  function same(a, b) {
    return JSON.stringify(a) === JSON.stringify(b);
  }

  // -- state --------------------------------------------------------------------------------

  var panel = null;
  var state = { config: null, controls: {} };

  function setStatus(text, isError) {
    var node = panel && panel.querySelector(".config-status");
    if (!node) return;
    node.textContent = text;
    node.classList.toggle("error", Boolean(isError));
  }

  // -- the form -----------------------------------------------------------------------------

  function fieldControl(field, idBase) {
    var kind = field.kind;
    var control = { field: field, reset: null, error: null, read: null, inputs: [] };
    var wrap = el("div", { className: "config-input" });
    if (kind === "int" || kind === "float") {
      var input = el("input", {
        id: idBase,
        name: field.name,
        type: "number",
        inputmode: kind === "int" ? "numeric" : "decimal",
        step: kind === "int" ? "1" : "any",
      });
      if (field.minimum !== null) input.min = String(field.minimum);
      if (field.maximum !== null) input.max = String(field.maximum);
      input.value = field.value === null ? "" : String(field.value);
      wrap.appendChild(input);
      control.inputs.push(input);
      control.read = function () {
        if (input.value.trim() === "") return field.value;
        return kind === "int" ? parseInt(input.value, 10) : parseFloat(input.value);
      };
    } else if (kind === "urls" || kind === "domains") {
      var area = el("textarea", {
        id: idBase,
        name: field.name,
        rows: "3",
        spellcheck: "false",
        placeholder: kind === "urls" ? "https://help.example.com/ (one per line)" : "help.example.com (one per line)",
      });
      area.value = (field.value || []).join("\n");
      wrap.appendChild(area);
      control.inputs.push(area);
      control.read = function () {
        return area.value
          .split(/[\n,]/)
          .map(function (s) {
            return s.trim();
          })
          .filter(Boolean);
      };
    } else if (kind === "queues") {
      var table = el("table", { id: idBase });
      var head = el("tr");
      head.appendChild(el("th", { scope: "col" }, "Category"));
      head.appendChild(el("th", { scope: "col" }, "Queue"));
      var thead = el("thead");
      thead.appendChild(head);
      table.appendChild(thead);
      var tbody = el("tbody");
      var value = field.value || {};
      var inputs = {};
      Object.keys(value).forEach(function (category) {
        var row = el("tr");
        var inputId = idBase + "-" + category;
        var th = el("th", { scope: "row" });
        th.appendChild(el("label", { for: inputId }, category.replace(/_/g, " ")));
        row.appendChild(th);
        var td = el("td");
        var queue = el("input", { id: inputId, type: "text", maxlength: "100" });
        queue.value = value[category];
        td.appendChild(queue);
        row.appendChild(td);
        tbody.appendChild(row);
        inputs[category] = queue;
        control.inputs.push(queue);
      });
      table.appendChild(tbody);
      wrap.appendChild(table);
      control.read = function () {
        var out = {};
        Object.keys(inputs).forEach(function (category) {
          out[category] = inputs[category].value.trim();
        });
        return out;
      };
    }
    control.wrap = wrap;
    return control;
  }

  function renderField(field) {
    var idBase = "config-" + field.name;
    var control = fieldControl(field, idBase);
    var box = el("div", { className: "config-field" });
    box.style.margin = "0 0 1rem";
    var label = el(field.kind === "queues" ? "p" : "label", {}, LABELS[field.name] || field.name);
    if (field.kind !== "queues") label.setAttribute("for", idBase);
    label.style.fontWeight = "600";
    label.style.margin = "0 0 .25rem";
    box.appendChild(label);
    var helpId = idBase + "-help";
    var help = el("p", { id: helpId, className: "help" }, field.description);
    var note = "Default: " + shown(field.default) + (field.overridden ? " · overridden" : "");
    var noteEl = el("p", { className: "help", id: idBase + "-default" }, note);
    var errorEl = el("p", { id: idBase + "-error", className: "status error", "aria-live": "polite" });
    control.inputs.forEach(function (input) {
      input.setAttribute(
        "aria-describedby",
        [helpId, idBase + "-default", idBase + "-error"].join(" ")
      );
    });
    box.appendChild(control.wrap);
    box.appendChild(help);
    box.appendChild(noteEl);
    if (field.overridden) {
      var resetId = idBase + "-reset";
      var resetLine = el("p", {});
      var reset = el("input", { id: resetId, type: "checkbox" });
      resetLine.appendChild(reset);
      resetLine.appendChild(el("label", { for: resetId }, " Restore the default"));
      box.appendChild(resetLine);
      control.reset = reset;
    }
    box.appendChild(errorEl);
    control.error = errorEl;
    state.controls[field.name] = control;
    return box;
  }

  function changes() {
    var out = {};
    Object.keys(state.controls).forEach(function (name) {
      var control = state.controls[name];
      if (control.reset && control.reset.checked) {
        out[name] = null;
        return;
      }
      var value = control.read();
      if (!same(value, control.field.value)) out[name] = value;
    });
    return out;
  }

  function clearErrors() {
    Object.keys(state.controls).forEach(function (name) {
      var control = state.controls[name];
      control.error.textContent = "";
      control.inputs.forEach(function (input) {
        input.removeAttribute("aria-invalid");
      });
    });
  }

  // "changes.top_k: Input should be ...; crawl_deadline_s: must be ..." -> per field.
  function showErrors(detail) {
    var general = [];
    String(detail || "")
      .split("; ")
      .forEach(function (part) {
        var match = /^(?:changes\.)?([a-z_]+)(?:\.[^:]*)?: (.*)$/.exec(part);
        var control = match && state.controls[match[1]];
        if (!control) {
          general.push(part);
          return;
        }
        control.error.textContent = (control.error.textContent ? control.error.textContent + " " : "") + match[2];
        control.inputs.forEach(function (input) {
          input.setAttribute("aria-invalid", "true");
        });
      });
    var first = panel.querySelector('[aria-invalid="true"]');
    if (first) first.focus();
    setStatus(general.length ? general.join("; ") : "Not saved: see the messages by the fields.", true);
  }

  function render(config) {
    state.config = config;
    state.controls = {};
    var form = panel.querySelector("form.config-form");
    form.textContent = "";
    var meta = el(
      "p",
      { className: "help" },
      config.version
        ? "Version " + config.version + ", last changed by " + (config.updated_by || "unknown") +
            (config.updated_at ? " on " + new Date(config.updated_at).toLocaleString() : "") + "."
        : "Version 0: every setting has its default (from the services' environment)."
    );
    form.appendChild(meta);
    SECTIONS.forEach(function (section) {
      var fieldset = el("fieldset");
      fieldset.style.margin = "0 0 1rem";
      fieldset.appendChild(el("legend", {}, section.title));
      config.fields
        .filter(function (f) {
          return f.service === section.service;
        })
        .forEach(function (f) {
          fieldset.appendChild(renderField(f));
        });
      form.appendChild(fieldset);
    });
    var save = el("button", { type: "submit" }, "Save changes");
    form.appendChild(save);
  }

  var loading = null;

  // One load at a time, so a form being edited is never rebuilt under the admin's hands by a
  // second, overlapping load (the tab shown and the token set fire together).
  function load() {
    if (!panel) return Promise.resolve();
    if (loading) return loading;
    setStatus("Loading the configuration…");
    loading = request("GET", API)
      .then(function (config) {
        render(config);
        setStatus("");
        return loadHistory();
      })
      .catch(function (error) {
        if (error.status === 401 || error.status === 403) {
          setStatus("Sign in with an admin token to see the configuration.", true);
        } else {
          setStatus("The configuration could not be loaded: " + error.message, true);
        }
      })
      .then(function () {
        loading = null;
      });
    return loading;
  }

  function submit(event) {
    event.preventDefault();
    if (!state.config) return;
    clearErrors();
    var form = event.target;
    if (form.reportValidity && !form.reportValidity()) {
      setStatus("Not saved: some values are out of range.", true);
      return;
    }
    var body = { version: state.config.version, changes: changes() };
    if (!Object.keys(body.changes).length) {
      setStatus("Nothing changed.");
      return;
    }
    setStatus("Saving…");
    request("PUT", API, body)
      .then(function (config) {
        render(config);
        setStatus(
          "Saved as version " + config.version + ". The services apply it within a few seconds, " +
            "without a restart."
        );
        return loadHistory();
      })
      .catch(function (error) {
        if (error.status === 422) {
          showErrors(error.body.detail);
        } else if (error.status === 409) {
          load().then(function () {
            setStatus(
              "Someone else saved a change first; the form now shows it. Make your change again.",
              true
            );
          });
        } else {
          setStatus("Not saved: " + error.message, true);
        }
      });
  }

  // -- history ------------------------------------------------------------------------------

  function loadHistory() {
    return request("GET", API + "/history?limit=50")
      .then(function (history) {
        var box = panel.querySelector(".config-history");
        box.textContent = "";
        var records = (history.records || []).slice().reverse(); // newest first
        if (!records.length) {
          box.appendChild(el("p", { className: "help" }, "No change recorded yet."));
          return;
        }
        var table = el("table");
        table.appendChild(el("caption", {}, "Changes, newest first (from the audit log)"));
        var head = el("tr");
        ["When", "Who", "Version", "What changed"].forEach(function (title) {
          head.appendChild(el("th", { scope: "col" }, title));
        });
        var thead = el("thead");
        thead.appendChild(head);
        table.appendChild(thead);
        var tbody = el("tbody");
        records.forEach(function (record) {
          var details = record.details || {};
          var row = el("tr");
          row.appendChild(el("td", {}, new Date(record.occurred_at).toLocaleString()));
          row.appendChild(el("td", {}, details.changed_by || ""));
          row.appendChild(el("td", { className: "num" }, details.version));
          var what = el("td");
          var list = el("ul");
          Object.keys(details)
            .filter(function (k) {
              return k !== "changed_by" && k !== "version";
            })
            .forEach(function (k) {
              list.appendChild(el("li", {}, (LABELS[k] || k) + ": " + details[k]));
            });
          what.appendChild(list);
          row.appendChild(what);
          tbody.appendChild(row);
        });
        table.appendChild(tbody);
        var wrap = el("div", { className: "table-wrap" });
        wrap.appendChild(table);
        box.appendChild(wrap);
      })
      .catch(function () {
        var box = panel.querySelector(".config-history");
        box.textContent = "";
        box.appendChild(el("p", { className: "help" }, "The history could not be loaded."));
      });
  }

  // -- start --------------------------------------------------------------------------------

  function start() {
    panel = document.getElementById("tab-config");
    if (!panel) return;
    panel.textContent = "";
    panel.appendChild(el("h2", {}, "Configuration"));
    panel.appendChild(
      el(
        "p",
        { className: "help" },
        "Changes take effect in every service within a few seconds, without a restart, and are " +
          "recorded in the audit log with who made them."
      )
    );
    panel.appendChild(el("p", { className: "status config-status", role: "status", "aria-live": "polite" }));
    var form = el("form", { className: "config-form", "aria-label": "Runtime configuration" });
    form.addEventListener("submit", submit);
    panel.appendChild(form);
    panel.appendChild(el("h3", {}, "History"));
    panel.appendChild(el("div", { className: "config-history" }));
    document.addEventListener("deskpilot:admin-token", load);
    document.addEventListener("deskpilot:admin-tab", function (event) {
      if (event.detail === "tab-config" && !state.config) load();
    });
    load();
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
