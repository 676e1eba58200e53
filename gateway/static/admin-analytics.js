/*
 * Deskpilot admin page: the shell (admin token, tabs) and the Analytics tab.
 *
 * No build step and no libraries: charts are inline SVG drawn here. Every text that comes from
 * the API (questions, URLs, names) is set with textContent, never as markup.
 *
 * For the other tabs' scripts: window.DeskpilotAdmin = {token(), headers(), fetchJson(path,
 * init)}; "deskpilot:admin-token" fires on document when the token changes, and
 * "deskpilot:admin-tab" (detail: the panel id) when a tab is shown.
 */
(function () {
  "use strict";

  var TOKEN_KEY = "deskpilot.adminToken";
  var SVG = "http://www.w3.org/2000/svg";

  // -- shell: token -----------------------------------------------------------------------------

  function token() {
    try {
      return sessionStorage.getItem(TOKEN_KEY) || "";
    } catch (e) {
      return "";
    }
  }

  function setToken(value) {
    try {
      if (value) sessionStorage.setItem(TOKEN_KEY, value);
      else sessionStorage.removeItem(TOKEN_KEY);
    } catch (e) {
      /* storage disabled: the token lives as long as the page */
    }
    memoryToken = value;
    document.dispatchEvent(new CustomEvent("deskpilot:admin-token"));
  }

  var memoryToken = "";

  function currentToken() {
    return token() || memoryToken;
  }

  function headers() {
    var t = currentToken();
    return t ? { Authorization: "Bearer " + t } : {};
  }

  function ApiError(status, body) {
    this.status = status;
    this.body = body || {};
    this.message = (body && body.detail) || "HTTP " + status;
  }

  function fetchJson(path, init) {
    init = init || {};
    var merged = Object.assign({}, init.headers || {}, headers());
    return fetch(path, Object.assign({}, init, { headers: merged })).then(function (response) {
      return response.text().then(function (text) {
        var body = null;
        try {
          body = text ? JSON.parse(text) : null;
        } catch (e) {
          body = null;
        }
        if (!response.ok) throw new ApiError(response.status, body);
        return body;
      });
    });
  }

  window.DeskpilotAdmin = { token: currentToken, headers: headers, fetchJson: fetchJson };

  function status(text, isError) {
    var el = document.getElementById("admin-status");
    if (!el) return;
    el.textContent = text;
    el.classList.toggle("error", Boolean(isError));
  }

  function setupSignin() {
    var form = document.getElementById("signin");
    var input = document.getElementById("admin-token");
    var signout = document.getElementById("signout");
    if (!form || !input || !signout) return;
    function reflect() {
      var signedIn = Boolean(currentToken());
      signout.hidden = !signedIn;
      input.placeholder = signedIn ? "signed in" : "";
      input.required = !signedIn;
    }
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      var value = input.value.trim();
      if (!value) return;
      input.value = "";
      setToken(value);
      reflect();
      status("Signed in.");
    });
    signout.addEventListener("click", function () {
      setToken("");
      reflect();
      status("Signed out.");
      input.focus();
    });
    reflect();
  }

  // -- shell: tabs (WAI-ARIA tabs pattern, automatic activation) --------------------------------

  function setupTabs() {
    var tabs = Array.prototype.slice.call(document.querySelectorAll('[role="tab"]'));
    function show(tab, focus) {
      tabs.forEach(function (other) {
        var selected = other === tab;
        other.setAttribute("aria-selected", selected ? "true" : "false");
        other.tabIndex = selected ? 0 : -1;
        var panel = document.getElementById(other.getAttribute("aria-controls"));
        if (panel) panel.hidden = !selected;
      });
      if (focus) tab.focus();
      var id = tab.getAttribute("aria-controls");
      if (history.replaceState) history.replaceState(null, "", "#" + id);
      document.dispatchEvent(new CustomEvent("deskpilot:admin-tab", { detail: id }));
    }
    tabs.forEach(function (tab, index) {
      tab.addEventListener("click", function () {
        show(tab, false);
      });
      tab.addEventListener("keydown", function (event) {
        var next = null;
        if (event.key === "ArrowRight") next = tabs[(index + 1) % tabs.length];
        else if (event.key === "ArrowLeft") next = tabs[(index - 1 + tabs.length) % tabs.length];
        else if (event.key === "Home") next = tabs[0];
        else if (event.key === "End") next = tabs[tabs.length - 1];
        if (next) {
          event.preventDefault();
          show(next, true);
        }
      });
    });
    var wanted = tabs.filter(function (tab) {
      return "#" + tab.getAttribute("aria-controls") === location.hash;
    })[0];
    if (wanted) show(wanted, false);
  }

  // -- small DOM helpers --------------------------------------------------------------------------

  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (name) {
      if (name === "text") node.textContent = attrs[name];
      else if (name === "className") node.className = attrs[name];
      else node.setAttribute(name, attrs[name]);
    });
    (children || []).forEach(function (child) {
      if (child) node.appendChild(child);
    });
    return node;
  }

  function svgEl(tag, attrs, text) {
    var node = document.createElementNS(SVG, tag);
    Object.keys(attrs || {}).forEach(function (name) {
      node.setAttribute(name, String(attrs[name]));
    });
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function pct(value) {
    return value === null || value === undefined ? "–" : (value * 100).toFixed(1) + " %";
  }

  function ms(value) {
    if (value === null || value === undefined) return "–";
    return value >= 1000 ? (value / 1000).toFixed(2) + " s" : Math.round(value) + " ms";
  }

  function num(value) {
    return value === null || value === undefined ? "–" : String(value);
  }

  function table(caption, columns, rows) {
    var head = el("tr", {}, columns.map(function (c) {
      return el("th", { scope: "col", className: c.num ? "num" : "", text: c.label });
    }));
    var body = rows.length
      ? rows.map(function (row) {
          return el("tr", {}, columns.map(function (c) {
            var value = c.value(row);
            var cls = (c.num ? "num" : "") + (c.warn && c.warn(row) ? " warn" : "");
            return el("td", { className: cls.trim(), text: value });
          }));
        })
      : [el("tr", {}, [el("td", { colspan: String(columns.length), className: "placeholder", text: "Nothing in this period." })])];
    return el("div", { className: "table-wrap" }, [
      el("table", {}, [el("caption", { className: "sr-caption", text: caption }), el("thead", {}, [head]), el("tbody", {}, body)]),
    ]);
  }

  // -- charts ---------------------------------------------------------------------------------------

  var W = 520;
  var H = 220;
  var PAD = { left: 52, right: 28, top: 12, bottom: 34 };
  var TICKS = 4;

  /** The top of a y axis with TICKS round steps (1, 2 or 5 times a power of ten) above value. */
  function niceMax(value) {
    if (value <= 0) return TICKS;
    var raw = value / TICKS;
    var power = Math.pow(10, Math.floor(Math.log10(raw)));
    var steps = [1, 2, 5, 10];
    for (var i = 0; i < steps.length; i++) {
      if (steps[i] * power >= raw) return steps[i] * power * TICKS;
    }
    return 10 * power * TICKS;
  }

  function figure(title, summary, svg, legend, dataTable) {
    var fig = el("figure", { className: "chart" });
    fig.appendChild(el("figcaption", { text: title }));
    if (legend) fig.appendChild(legend);
    svg.setAttribute("role", "img");
    svg.setAttribute("aria-label", title + ". " + summary);
    fig.appendChild(svg);
    if (dataTable) {
      var details = el("details", { className: "data" }, [el("summary", { text: "Data" }), dataTable]);
      fig.appendChild(details);
    }
    return fig;
  }

  function legendOf(names) {
    return el("div", { className: "legend" }, names.map(function (name, i) {
      return el("span", {}, [el("span", { className: "swatch s" + i, "aria-hidden": "true" }), document.createTextNode(name)]);
    }));
  }

  /** A line chart of one or two daily series; format(value) labels the y axis. */
  function lineChart(title, days, series, format, fixedMax) {
    var svg = svgEl("svg", { viewBox: "0 0 " + W + " " + H, preserveAspectRatio: "xMidYMid meet" });
    var values = [];
    series.forEach(function (s) {
      s.values.forEach(function (v) {
        if (v !== null && v !== undefined) values.push(v);
      });
    });
    var max = fixedMax || niceMax(Math.max.apply(null, values.concat([0])));
    var innerW = W - PAD.left - PAD.right;
    var innerH = H - PAD.top - PAD.bottom;
    var x = function (i) {
      return PAD.left + (days.length > 1 ? (i * innerW) / (days.length - 1) : innerW / 2);
    };
    var y = function (v) {
      return PAD.top + innerH - (v / max) * innerH;
    };
    for (var g = 0; g <= TICKS; g++) {
      var gv = (max * g) / TICKS;
      svg.appendChild(svgEl("line", { x1: PAD.left, x2: W - PAD.right, y1: y(gv), y2: y(gv), class: g ? "grid" : "axis" }));
      svg.appendChild(svgEl("text", { x: PAD.left - 6, y: y(gv) + 4, "text-anchor": "end", class: "tick" }, format(gv)));
    }
    var every = Math.max(1, Math.ceil(days.length / 7));
    days.forEach(function (day, i) {
      if (i % every === 0 || i === days.length - 1) {
        svg.appendChild(svgEl("text", { x: x(i), y: H - PAD.bottom + 18, "text-anchor": "middle", class: "tick" }, day.slice(5)));
      }
    });
    if (!values.length) {
      svg.appendChild(svgEl("text", { x: W / 2, y: H / 2, "text-anchor": "middle", class: "empty" }, "No data in this period"));
    }
    var dots = [];
    series.forEach(function (s, index) {
      var points = [];
      s.values.forEach(function (v, i) {
        if (v === null || v === undefined) return;
        points.push(x(i).toFixed(1) + "," + y(v).toFixed(1));
        var dot = svgEl("circle", { cx: x(i), cy: y(v), r: 3.5, class: "s" + index });
        dot.appendChild(svgEl("title", {}, days[i] + ": " + s.name + " " + format(v)));
        dots.push(dot);
      });
      if (points.length > 1) {
        svg.appendChild(svgEl("polyline", { points: points.join(" "), class: "line s" + index }));
      }
    });
    dots.forEach(function (dot) {
      svg.appendChild(dot);
    });
    var last = series.map(function (s) {
      var v = s.values[s.values.length - 1];
      return s.name + " on " + (days[days.length - 1] || "the last day") + ": " + (v === null || v === undefined ? "none" : format(v));
    }).join("; ");
    var rows = days.map(function (day, i) {
      return { day: day, values: series.map(function (s) { return s.values[i]; }) };
    });
    var data = table(title, [{ label: "Day", value: function (r) { return r.day; } }].concat(series.map(function (s, k) {
      return { label: s.name, num: true, value: function (r) { return r.values[k] === null || r.values[k] === undefined ? "–" : format(r.values[k]); } };
    })), rows);
    return figure(title, days.length + " days. " + last + ".", svg, series.length > 1 ? legendOf(series.map(function (s) { return s.name; })) : null, data);
  }

  /** A horizontal bar chart of named counts. */
  function barChart(title, items) {
    var rowH = 26;
    var height = Math.max(60, items.length * rowH + 16);
    var svg = svgEl("svg", { viewBox: "0 0 " + W + " " + height, preserveAspectRatio: "xMidYMid meet" });
    var labelW = 170;
    var max = Math.max.apply(null, items.map(function (i) { return i.count; }).concat([1]));
    if (!items.length) {
      svg.appendChild(svgEl("text", { x: W / 2, y: height / 2, "text-anchor": "middle", class: "empty" }, "No data in this period"));
    }
    items.forEach(function (item, i) {
      var y0 = 8 + i * rowH;
      var width = ((W - labelW - 60) * item.count) / max;
      svg.appendChild(svgEl("text", { x: labelW - 8, y: y0 + 15, "text-anchor": "end", class: "bar-label" }, item.name));
      var bar = svgEl("rect", { x: labelW, y: y0 + 2, width: Math.max(width, 1), height: rowH - 8, rx: 3, class: "s0" });
      bar.appendChild(svgEl("title", {}, item.name + ": " + item.count));
      svg.appendChild(bar);
      svg.appendChild(svgEl("text", { x: labelW + width + 6, y: y0 + 15, class: "bar-label" }, String(item.count)));
    });
    var summary = items.length
      ? items.map(function (i) { return i.name + " " + i.count; }).join(", ")
      : "no data";
    return figure(title, summary + ".", svg, null, null);
  }

  // -- the Analytics tab --------------------------------------------------------------------------

  var panel = null;
  var content = null;
  var fromInput = null;
  var toInput = null;

  function isoDay(date) {
    return date.toISOString().slice(0, 10);
  }

  function buildForm() {
    var today = new Date();
    var weekAgo = new Date(today.getTime() - 6 * 86400000);
    fromInput = el("input", { type: "date", id: "analytics-from", name: "from", value: isoDay(weekAgo) });
    toInput = el("input", { type: "date", id: "analytics-to", name: "to", value: isoDay(today) });
    var form = el("form", { className: "range", "aria-label": "Period" }, [
      el("label", { for: "analytics-from" }, [document.createTextNode("From (UTC)"), fromInput]),
      el("label", { for: "analytics-to" }, [document.createTextNode("To (UTC)"), toInput]),
      el("button", { type: "submit", text: "Show" }),
    ]);
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      load();
    });
    return form;
  }

  function kpi(label, value, note) {
    return el("div", { className: "kpi" }, [
      el("div", { className: "label", text: label }),
      el("div", { className: "value", text: value }),
      note ? el("div", { className: "note", text: note }) : null,
    ]);
  }

  function render(data) {
    content.textContent = "";
    var days = data.daily.map(function (d) { return d.day; });
    content.appendChild(el("h2", { text: "Summary, " + data.from + " to " + data.to + " (UTC)" }));
    content.appendChild(el("div", { className: "kpis" }, [
      kpi("Deflection rate", pct(data.deflection.rate), data.deflection.deflected + " of " + data.deflection.support_turns + " support turns"),
      kpi("Escalation rate", pct(data.escalation.rate), data.escalation.escalated + " escalated"),
      kpi("CSAT", data.csat.average === null ? "–" : data.csat.average.toFixed(2) + " / 5", data.csat.ratings + " ratings"),
      kpi("Latency p50", ms(data.latency.p50_ms), data.latency.answers + " answers"),
      kpi("Latency p95", ms(data.latency.p95_ms), null),
      kpi("Crawl hit rate", pct(data.crawl.hit_rate), data.crawl.jobs + " jobs, " + data.crawl.pages + " pages"),
      kpi("Dead letters", num(data.bus.dead_letter_total), "messages waiting for an operator"),
    ]));
    content.appendChild(el("p", { className: "definition", id: "deflection-definition", text: data.deflection.definition }));

    content.appendChild(el("h2", { text: "Trends" }));
    content.appendChild(el("div", { className: "charts" }, [
      lineChart("Support turns and deflected turns per day", days, [
        { name: "Support turns", values: data.daily.map(function (d) { return d.support_turns; }) },
        { name: "Deflected", values: data.daily.map(function (d) { return d.deflected; }) },
      ], function (v) { return String(Math.round(v)); }),
      lineChart("Deflection rate per day", days, [
        { name: "Deflection rate", values: data.daily.map(function (d) { return d.deflection_rate; }) },
      ], function (v) { return Math.round(v * 100) + "%"; }, 1),
      lineChart("Answer latency per day", days, [
        { name: "p50", values: data.daily.map(function (d) { return d.p50_ms; }) },
        { name: "p95", values: data.daily.map(function (d) { return d.p95_ms; }) },
      ], ms),
      lineChart("Average rating per day", days, [
        { name: "CSAT", values: data.daily.map(function (d) { return d.csat_average; }) },
      ], function (v) { return v.toFixed(2).replace(/\.?0+$/, ""); }, 5),
    ]));

    content.appendChild(el("h2", { text: "Breakdowns" }));
    var distribution = ["1", "2", "3", "4", "5"].map(function (s) {
      return { name: s + (s === "1" ? " star" : " stars"), count: data.csat.distribution[s] || 0 };
    });
    content.appendChild(el("div", { className: "charts" }, [
      barChart("Ratings (CSAT distribution)", distribution),
      barChart("Top intents (what the assistant did)", data.intents),
      barChart("Top categories", data.categories),
      barChart("Escalation reasons", data.escalation.reasons),
    ]));

    content.appendChild(el("h2", { text: "Top unanswered topics" }));
    content.appendChild(table("Top unanswered topics", [
      { label: "Topic", value: function (r) { return r.topic; } },
      { label: "Questions", num: true, value: function (r) { return String(r.count); } },
      { label: "Latest question (redacted)", value: function (r) { return r.example; } },
    ], data.unanswered));

    content.appendChild(el("h2", { text: "Most cited documents" }));
    content.appendChild(table("Most cited documents", [
      { label: "Document", value: function (r) { return r.url; } },
      { label: "Cited", num: true, value: function (r) { return String(r.cited); } },
      { label: "Ratings", num: true, value: function (r) { return String(r.ratings); } },
      { label: "Average rating", num: true, value: function (r) { return r.average === null ? "–" : r.average.toFixed(2); }, warn: function (r) { return r.average !== null && r.average < 3; } },
    ], data.documents));

    content.appendChild(el("h2", { text: "Crawls" }));
    content.appendChild(table("Crawl statistics", [
      { label: "Jobs", num: true, value: function (r) { return String(r.jobs); } },
      { label: "Pages", num: true, value: function (r) { return String(r.pages); } },
      { label: "Turns that crawled", num: true, value: function (r) { return String(r.crawl_turns); } },
      { label: "Then answered", num: true, value: function (r) { return String(r.answered); } },
      { label: "Hit rate", num: true, value: function (r) { return pct(r.hit_rate); } },
      { label: "Endings", value: function (r) { return r.endings.map(function (e) { return e.name + " " + e.count; }).join(", ") || "–"; } },
    ], [data.crawl]));

    content.appendChild(el("h2", { text: "Message bus" }));
    var rows = [];
    data.bus.streams.forEach(function (s) {
      if (!s.groups.length) rows.push({ stream: s.stream, length: s.length, group: "(no group)", lag: null, pending: 0, consumers: 0 });
      s.groups.forEach(function (g) {
        rows.push({ stream: s.stream, length: s.length, group: g.group, lag: g.lag, pending: g.pending, consumers: g.consumers });
      });
    });
    content.appendChild(table("Consumer lag per stream and group", [
      { label: "Stream", value: function (r) { return r.stream; } },
      { label: "Group", value: function (r) { return r.group; } },
      { label: "Entries", num: true, value: function (r) { return String(r.length); } },
      { label: "Lag", num: true, value: function (r) { return num(r.lag); }, warn: function (r) { return r.lag > 100; } },
      { label: "Pending", num: true, value: function (r) { return String(r.pending); } },
      { label: "Consumers", num: true, value: function (r) { return String(r.consumers); } },
    ], rows));
    content.appendChild(el("h3", { text: "Dead letters" }));
    content.appendChild(table("Dead-letter streams", [
      { label: "Stream", value: function (r) { return r.stream; } },
      { label: "Messages", num: true, value: function (r) { return String(r.depth); }, warn: function () { return true; } },
    ], data.bus.dead_letters));

    content.appendChild(el("h2", { text: "Definitions" }));
    var list = el("dl", { className: "definitions" });
    Object.keys(data.definitions).forEach(function (name) {
      list.appendChild(el("dt", { text: name.replace(/_/g, " ") }));
      list.appendChild(el("dd", { text: data.definitions[name] }));
    });
    content.appendChild(list);
  }

  function load() {
    if (!panel) return;
    if (!currentToken()) {
      content.textContent = "";
      content.appendChild(el("p", { className: "placeholder", text: "Sign in with the admin token to see the analytics." }));
      return;
    }
    var params = new URLSearchParams();
    if (fromInput.value) params.set("from", fromInput.value);
    if (toInput.value) params.set("to", toInput.value);
    panel.setAttribute("aria-busy", "true");
    status("Loading analytics…");
    fetchJson("/api/admin/analytics?" + params.toString())
      .then(function (data) {
        render(data);
        status("Analytics updated " + new Date().toLocaleTimeString() + ".");
      })
      .catch(function (error) {
        if (error.status === 401 || error.status === 403) {
          status("The admin token was refused. Sign in again.", true);
        } else {
          status("Could not load the analytics: " + (error.message || "network error") + ".", true);
        }
      })
      .then(function () {
        panel.removeAttribute("aria-busy");
      });
  }

  function setupAnalytics() {
    panel = document.getElementById("tab-analytics");
    if (!panel) return;
    panel.appendChild(el("h2", { text: "Analytics" }));
    panel.appendChild(buildForm());
    content = el("div", { id: "analytics-content" });
    panel.appendChild(content);
    document.addEventListener("deskpilot:admin-token", load);
    load();
  }

  function start() {
    setupSignin();
    setupTabs();
    setupAnalytics();
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
