/* Deskpilot chat page.
 *
 * Plain ES2020, no dependencies. Talks to the gateway over:
 *   - WebSocket  /ws/chat[?conversation_id=<id>]
 *   - POST       /api/feedback        {"turn_id", "score"}
 *   - GET        /api/turns/<turn_id> {"status":"pending"} | {"status":"done","answer":{...}}
 *
 * Safety rule for this file: untrusted text (answers, citations, error details, the user's own
 * text) only ever reaches the DOM through textContent / createElement / setAttribute of
 * checked URLs. Nothing is ever assigned to innerHTML.
 */
(() => {
  'use strict';

  // ---------------------------------------------------------------------------------------------
  // Configuration

  const STORAGE_KEY = 'deskpilot.conversation_id';
  // The gateway's limit is in UTF-8 bytes (GATEWAY_MAX_MESSAGE_BYTES, 8 KiB by default).
  const MAX_BYTES = 8192;
  const COUNTER_FROM = 7000;            // show the size counter from this many bytes on
  const utf8Bytes = (s) => new TextEncoder().encode(s).length;
  const BACKOFF_BASE_MS = 500;
  const BACKOFF_MAX_MS = 10000;
  const POLL_INTERVAL_MS = 1500;
  const POLL_MAX_ATTEMPTS = 40;
  const TURN_WATCHDOG_MS = 60000;       // no frame for an accepted turn this long -> ask /api/turns

  const STAGE_LABELS = {
    redacting: 'Checking your message…',
    searching: 'Searching the knowledge base…',
    composing: 'Writing the answer…',
  };

  const EXAMPLES = [
    'How do I reset my VPN password?',
    'How do I connect to the office Wi-Fi?',
    "My headset isn't recognised in Teams",
  ];

  // ---------------------------------------------------------------------------------------------
  // Small DOM helpers

  const $ = (id) => document.getElementById(id);

  function h(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function srOnly(text) {
    return h('span', 'visually-hidden', text);
  }

  /** Returns a URL safe to put in href (http, https or relative to this page), or null. */
  function safeUrl(raw) {
    if (typeof raw !== 'string') return null;
    const trimmed = raw.trim();
    if (!trimmed) return null;
    let parsed;
    try {
      // Resolving against the page lets the URL parser apply the same normalisation the browser
      // would (stripping tabs/newlines etc.), so "java\tscript:" cannot sneak through.
      parsed = new URL(trimmed, document.baseURI);
    } catch (_) {
      return null;
    }
    if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') return null;
    return parsed.href;
  }

  function externalLink(href, text) {
    const a = h('a', null, text);
    a.href = href;
    a.target = '_blank';
    a.rel = 'noopener noreferrer';
    return a;
  }

  function storageGet() {
    try { return window.localStorage.getItem(STORAGE_KEY); } catch (_) { return null; }
  }
  function storageSet(value) {
    try {
      if (value) window.localStorage.setItem(STORAGE_KEY, value);
      else window.localStorage.removeItem(STORAGE_KEY);
    } catch (_) { /* storage disabled: the id just lives for this page */ }
  }

  // ---------------------------------------------------------------------------------------------
  // Elements

  const messagesEl = $('messages');
  const form = $('composer');
  const input = $('chat-input');
  const sendBtn = $('send-btn');
  const counterEl = $('char-counter');
  const bannerEl = $('conn-banner');
  const bannerText = $('conn-text');
  const newChatBtn = $('new-chat');

  // ---------------------------------------------------------------------------------------------
  // State

  let conversationId = storageGet();
  let ws = null;
  let ready = false;                 // "ready" frame received on the current socket
  let everConnected = false;
  let reconnectAttempt = 0;
  let reconnectTimer = null;
  let turnSeq = 0;

  /** Turns typed while offline, sent when the socket is ready. */
  const outbox = [];
  /** Turns sent on the current socket that have no "accepted" yet (server answers in order). */
  const awaitingAccept = [];
  /** Accepted turns without an answer, by server turn_id. */
  const inFlight = new Map();

  // ---------------------------------------------------------------------------------------------
  // Scrolling: follow new content only when the reader is already at the bottom.

  function nearBottom() {
    return messagesEl.scrollHeight - messagesEl.scrollTop - messagesEl.clientHeight < 80;
  }
  function scrollToBottom() {
    messagesEl.scrollTop = messagesEl.scrollHeight;
  }
  /** Runs a DOM mutation and keeps the log pinned to the bottom if it was pinned before. */
  function mutate(fn, force) {
    const stick = force || nearBottom();
    fn();
    if (stick) scrollToBottom();
  }
  /** Like mutate, but a long new message is shown from its start rather than its end. */
  function mutateShowingStart(wrap, fn) {
    const stick = nearBottom();
    fn();
    if (!stick) return;
    scrollToBottom();
    const top = wrap.offsetTop - 12; // .messages is the offsetParent (position: relative)
    if (top < messagesEl.scrollTop) messagesEl.scrollTop = Math.max(0, top);
  }

  // ---------------------------------------------------------------------------------------------
  // Message skeletons

  function botMessage(extraClass) {
    const wrap = h('div', 'msg msg-bot' + (extraClass ? ' ' + extraClass : ''));
    const avatar = h('div', 'avatar');
    avatar.setAttribute('aria-hidden', 'true');
    avatar.textContent = 'DP';
    const bubble = h('div', 'bubble');
    wrap.append(avatar, bubble);
    return { wrap, bubble };
  }

  function renderWelcome() {
    const { wrap, bubble } = botMessage('msg-welcome');
    bubble.append(srOnly('Deskpilot says: '));
    bubble.append(h('p', 'welcome-title', 'Hi, I’m Deskpilot.'));
    bubble.append(h('p', null,
      'I can help with accounts, passwords, VPN, Wi-Fi, devices and the apps you use at work. ' +
      'Describe your problem, or try one of these:'));
    const chips = h('div', 'chips');
    chips.setAttribute('role', 'group');
    chips.setAttribute('aria-label', 'Example questions');
    for (const q of EXAMPLES) {
      const chip = h('button', 'chip', q);
      chip.type = 'button';
      chip.addEventListener('click', () => {
        submitText(q);
        input.focus();
      });
      chips.append(chip);
    }
    bubble.append(chips);
    messagesEl.append(wrap);
  }

  function renderUser(text) {
    const wrap = h('div', 'msg msg-user');
    const bubble = h('div', 'bubble');
    bubble.append(srOnly('You said: '));
    bubble.append(h('span', 'user-text', text));
    wrap.append(bubble);
    messagesEl.append(wrap);
    return wrap;
  }

  /** Fills a bubble with the animated indicator and a status line; returns the label node. */
  function fillPending(bubble, text) {
    const status = h('div', 'progress');
    const dots = h('span', 'typing');
    dots.setAttribute('aria-hidden', 'true');
    dots.append(h('span'), h('span'), h('span'));
    const label = h('span', 'progress-label', text);
    status.append(dots, label);
    bubble.replaceChildren(status);
    return label;
  }

  /** Assistant placeholder shown while a turn is on its way. */
  function renderPending(turn) {
    const { wrap, bubble } = botMessage('msg-pending');
    turn.statusLabel = fillPending(bubble, 'Sending…');
    messagesEl.append(wrap);
    turn.botWrap = wrap;
    turn.bubble = bubble;
  }

  function setStatus(turn, text) {
    if (turn.statusLabel && turn.statusLabel.isConnected) {
      mutate(() => { turn.statusLabel.textContent = text; });
    }
  }

  function stageLabel(stage) {
    if (typeof stage !== 'string' || !stage) return 'Working on it…';
    return Object.prototype.hasOwnProperty.call(STAGE_LABELS, stage) ? STAGE_LABELS[stage] : stage;
  }

  // ---------------------------------------------------------------------------------------------
  // Markdown subset -> DOM (paragraphs, ordered/unordered lists, fenced code, inline code,
  // **bold**, [text](url), bare http(s) URLs and [n] citation markers).

  // Groups: 1-2 inline code, 3 bold, 4-5 link, 6 citation numbers, 7 bare url, 8 emphasis.
  const INLINE_RE = new RegExp([
    '(`+)([^`]|[^`][\\s\\S]*?[^`])\\1(?!`)',
    '\\*\\*(?=\\S)([\\s\\S]*?\\S)\\*\\*',
    '\\[([^\\]\\n]+)\\]\\(([^)\\s]+)\\)',
    '\\[(\\d{1,3}(?:\\s*,\\s*\\d{1,3})*)\\]',
    '(https?:\\/\\/[^\\s<>"\'`\\[\\]]+)',
    '(?<![\\w*])\\*(?=[^\\s*])([^*\\n]*?[^\\s*])\\*(?![\\w*])',
  ].join('|'), 'g');

  function appendInline(parent, text, ctx, depth = 0) {
    const re = new RegExp(INLINE_RE.source, 'g');
    let last = 0;
    let m;
    while ((m = re.exec(text)) !== null) {
      if (m.index > last) parent.append(document.createTextNode(text.slice(last, m.index)));
      last = re.lastIndex;
      if (m[1] !== undefined) {
        let code = m[2];
        // CommonMark: one leading/trailing space is stripped if both are present.
        if (code.length > 2 && code.startsWith(' ') && code.endsWith(' ')) code = code.slice(1, -1);
        parent.append(h('code', 'inline-code', code));
      } else if (m[3] !== undefined) {
        const strong = h('strong');
        if (depth < 3) appendInline(strong, m[3], ctx, depth + 1);
        else strong.textContent = m[3];
        parent.append(strong);
      } else if (m[4] !== undefined) {
        const href = safeUrl(m[5]);
        parent.append(href ? externalLink(href, m[4]) : document.createTextNode(m[0]));
      } else if (m[6] !== undefined) {
        for (const part of m[6].split(',')) appendCitationRef(parent, parseInt(part, 10), ctx);
      } else if (m[7] !== undefined) {
        // Keep trailing punctuation out of the link ("see https://x.y/z." -> link + ".").
        const raw = m[7];
        const url = raw.replace(/[.,;:!?)'"]+$/, '');
        const href = safeUrl(url);
        parent.append(href ? externalLink(href, url) : document.createTextNode(url));
        if (url.length < raw.length) parent.append(document.createTextNode(raw.slice(url.length)));
      } else if (m[8] !== undefined) {
        const em = h('em');
        if (depth < 3) appendInline(em, m[8], ctx, depth + 1);
        else em.textContent = m[8];
        parent.append(em);
      }
    }
    if (last < text.length) parent.append(document.createTextNode(text.slice(last)));
  }

  function appendCitationRef(parent, n, ctx) {
    const cite = ctx.citations.get(n);
    const sup = h('sup', 'cite-ref');
    if (!cite) {
      sup.classList.add('cite-missing');
      sup.textContent = `[${n}]`;
      parent.append(sup);
      return;
    }
    const title = cite.title || `Source ${n}`;
    const href = safeUrl(cite.url);
    let a;
    if (href) {
      a = externalLink(href, String(n));
    } else {
      // Unsafe/missing URL: point at the entry in the sources list instead.
      a = h('a', null, String(n));
      a.href = `#${ctx.idPrefix}-src-${n}`;
    }
    a.setAttribute('aria-label', `Source ${n}: ${title}`);
    a.title = title;
    sup.append(a);
    parent.append(sup);
  }

  function appendLines(parent, lines, ctx) {
    lines.forEach((line, i) => {
      if (i > 0) parent.append(h('br'));
      appendInline(parent, line, ctx);
    });
  }

  function copyText(text) {
    if (navigator.clipboard && window.isSecureContext) {
      return navigator.clipboard.writeText(text);
    }
    // Fallback for plain-http deployments where the async clipboard API is unavailable.
    return new Promise((resolve, reject) => {
      const ta = h('textarea');
      ta.value = text;
      ta.setAttribute('readonly', '');
      ta.style.position = 'fixed';
      ta.style.top = '-1000px';
      document.body.append(ta);
      ta.select();
      let ok = false;
      try { ok = document.execCommand('copy'); } catch (_) { ok = false; }
      ta.remove();
      if (ok) resolve(); else reject(new Error('copy failed'));
    });
  }

  function codeBlock(code, lang) {
    const box = h('div', 'code-block');
    const head = h('div', 'code-head');
    head.append(h('span', 'code-lang', lang || 'code'));
    const btn = h('button', 'btn-copy', 'Copy');
    btn.type = 'button';
    btn.setAttribute('aria-label', lang ? `Copy ${lang} code` : 'Copy code');
    let resetTimer = null;
    btn.addEventListener('click', () => {
      const done = (label) => {
        btn.textContent = label;
        clearTimeout(resetTimer);
        resetTimer = setTimeout(() => { btn.textContent = 'Copy'; }, 2000);
      };
      copyText(code).then(() => done('Copied'), () => done('Copy failed'));
    });
    head.append(btn);
    const pre = h('pre');
    pre.tabIndex = 0; // scrollable region must be reachable by keyboard
    pre.append(h('code', null, code));
    box.append(head, pre);
    return box;
  }

  function renderMarkdown(source, ctx) {
    const frag = document.createDocumentFragment();
    const lines = String(source == null ? '' : source).replace(/\r\n?/g, '\n').split('\n');
    let para = null;        // array of lines
    let list = null;        // { type, el, li, indent, sub: { type, el, li } | null }

    const flushPara = () => {
      if (!para) return;
      const p = h('p');
      appendLines(p, para, ctx);
      frag.append(p);
      para = null;
    };
    const closeList = () => { list = null; };

    for (let i = 0; i < lines.length; i++) {
      const line = lines[i];

      // Fenced code block (``` or ~~~), possibly a one-liner ```cmd```.
      const fence = /^(\s{0,3})(`{3,}|~{3,})(.*)$/.exec(line);
      if (fence) {
        flushPara();
        const marker = fence[2];
        const rest = fence[3];
        const oneLiner = rest.indexOf(marker) !== -1 ? new RegExp(`^(.*?)${marker}\\s*$`).exec(rest) : null;
        if (oneLiner && oneLiner[1].trim()) {
          const block = codeBlock(oneLiner[1].trim(), '');
          if (list && list.li && fence[1].length > list.indent) list.li.append(block);
          else { closeList(); frag.append(block); }
          continue;
        }
        const lang = rest.trim().split(/\s+/)[0].replace(/[^\w+#.-]/g, '').slice(0, 24);
        const indent = fence[1].length;
        const body = [];
        const closeRe = new RegExp(`^\\s{0,3}${marker[0] === '`' ? '`' : '~'}{${marker.length},}\\s*$`);
        i++;
        while (i < lines.length && !closeRe.test(lines[i])) {
          // Drop the fence's own indentation from the content lines.
          body.push(indent ? lines[i].replace(new RegExp(`^ {0,${indent}}`), '') : lines[i]);
          i++;
        }
        const block = codeBlock(body.join('\n').replace(/\n+$/, ''), lang);
        // A fence indented under a list item belongs to that item.
        if (list && list.li && indent > list.indent) list.li.append(block);
        else { closeList(); frag.append(block); }
        continue;
      }

      if (/^\s*$/.test(line)) {
        flushPara();
        continue; // a list may continue after a blank line ("1. a\n\n2. b")
      }

      const item = /^(\s*)(?:(\d{1,9})[.)]|([-*+•]))\s+(.*)$/.exec(line);
      if (item) {
        flushPara();
        const indent = item[1].length;
        const type = item[2] !== undefined ? 'ol' : 'ul';
        const content = item[4];
        if (list && indent >= list.indent + 2 && list.li) {
          // One level of nesting under the current item.
          if (!list.sub || list.sub.type !== type) {
            const subEl = h(type);
            if (type === 'ol' && item[2] !== '1') subEl.start = parseInt(item[2], 10);
            list.li.append(subEl);
            list.sub = { type, el: subEl, li: null };
          }
          const li = h('li');
          appendInline(li, content, ctx);
          list.sub.el.append(li);
          list.sub.li = li;
          continue;
        }
        if (!list || list.type !== type) {
          const listEl = h(type);
          if (type === 'ol' && item[2] !== '1') listEl.start = parseInt(item[2], 10);
          frag.append(listEl);
          list = { type, el: listEl, li: null, indent, sub: null };
        }
        const li = h('li');
        appendInline(li, content, ctx);
        list.el.append(li);
        list.li = li;
        list.sub = null;
        continue;
      }

      // Indented text right under a list item continues that item.
      if (list && list.li && /^\s{2,}\S/.test(line) && !para) {
        const target = list.sub && list.sub.li ? list.sub.li : list.li;
        target.append(h('br'));
        appendInline(target, line.trim(), ctx);
        continue;
      }

      const heading = /^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
      if (heading) {
        flushPara();
        closeList();
        const p = h('p', 'md-heading');
        const strong = h('strong');
        appendInline(strong, heading[1], ctx);
        p.append(strong);
        frag.append(p);
        continue;
      }

      closeList();
      (para || (para = [])).push(line);
    }
    flushPara();
    return frag;
  }

  // ---------------------------------------------------------------------------------------------
  // Answer rendering

  function renderAnswer(turn, data) {
    clearWatchdog(turn);
    stopPolling(turn);
    if (turn.turnId) inFlight.delete(turn.turnId);
    turn.state = 'done';

    const action = typeof data.action === 'string' ? data.action : 'answer';
    const citations = new Map();
    const citeList = Array.isArray(data.citations) ? data.citations : [];
    citeList.forEach((c, i) => {
      if (!c || typeof c !== 'object') return;
      const n = Number.isInteger(c.n) ? c.n : parseInt(c.n, 10) || i + 1;
      if (!citations.has(n)) citations.set(n, c);
    });
    const ctx = { citations, idPrefix: `t${turn.localId}` };

    mutateShowingStart(turn.botWrap, () => {
      turn.botWrap.classList.remove('msg-pending', 'msg-error');
      turn.botWrap.dataset.action = action;
      if (data.trace_id) turn.botWrap.dataset.traceId = String(data.trace_id);
      if (action === 'no_answer') turn.botWrap.classList.add('msg-notice');
      const bubble = turn.bubble;
      bubble.replaceChildren();
      bubble.append(srOnly(action === 'no_answer' ? 'Deskpilot (no confirmed answer): ' : 'Deskpilot says: '));

      const body = h('div', 'answer');
      const text = typeof data.answer === 'string' && data.answer.trim()
        ? data.answer
        : 'Sorry, I don’t have an answer for that.';
      body.append(renderMarkdown(text, ctx));
      if (action === 'no_answer') {
        const row = h('div', 'notice-row');
        const icon = h('span', 'notice-icon', 'i');
        icon.setAttribute('aria-hidden', 'true');
        row.append(icon, body);
        bubble.append(row);
      } else {
        bubble.append(body);
      }

      if (citations.size) bubble.append(renderSources(citations, ctx));
      if (typeof data.redaction_notice === 'string' && data.redaction_notice.trim()) {
        // Plain text (h sets textContent): what the redactor removed, never the value itself.
        const notice = h('p', 'redaction-notice', data.redaction_notice);
        notice.setAttribute('role', 'note');
        bubble.append(notice);
      }
      const turnId = data.turn_id || turn.turnId;
      if (turnId) bubble.append(renderFeedback(String(turnId)));
    });

    if (data.conversation_id && typeof data.conversation_id === 'string') {
      conversationId = data.conversation_id;
      storageSet(conversationId);
    }
  }

  function renderSources(citations, ctx) {
    const box = h('div', 'sources');
    const headingId = `${ctx.idPrefix}-sources`;
    const heading = h('p', 'sources-title', 'Sources');
    heading.id = headingId;
    const ol = h('ol', 'citations');
    ol.setAttribute('aria-labelledby', headingId);
    for (const [n, c] of citations) {
      const li = h('li', 'citation');
      li.id = `${ctx.idPrefix}-src-${n}`;
      li.value = n;
      const num = h('span', 'citation-n', String(n));
      const main = h('div', 'citation-main');
      const title = (typeof c.title === 'string' && c.title.trim()) || (typeof c.url === 'string' && c.url) || `Source ${n}`;
      const href = safeUrl(c.url);
      if (href) {
        const a = externalLink(href, title);
        a.className = 'citation-link';
        a.append(srOnly(' (opens in a new tab)'));
        main.append(a);
      } else {
        main.append(h('span', 'citation-title', title));
      }
      if (typeof c.snippet === 'string' && c.snippet.trim()) {
        const snippet = c.snippet.trim();
        main.title = snippet;
        main.append(h('span', 'citation-snippet', snippet));
      }
      li.append(num, main);
      ol.append(li);
    }
    box.append(heading, ol);
    return box;
  }

  function renderFeedback(turnId) {
    const box = h('div', 'feedback');
    const group = h('div', 'rating');
    group.setAttribute('role', 'group');
    group.setAttribute('aria-label', 'Rate this answer from 1 (not helpful) to 5 (very helpful)');
    const label = h('span', 'rating-label', 'Was this helpful?');
    label.setAttribute('aria-hidden', 'true');
    const buttons = h('div', 'rating-buttons');
    const status = h('p', 'feedback-status');
    status.tabIndex = -1;
    status.hidden = true;
    const btns = [];
    for (let score = 1; score <= 5; score++) {
      const b = h('button', 'rate-btn', String(score));
      b.type = 'button';
      b.setAttribute('aria-label', `Rate ${score} of 5`);
      b.setAttribute('aria-pressed', 'false');
      b.addEventListener('click', () => sendFeedback(turnId, score, btns, box, group, status));
      btns.push(b);
      buttons.append(b);
    }
    const scale = h('span', 'rating-scale', '1 = not helpful · 5 = very helpful');
    scale.setAttribute('aria-hidden', 'true');
    group.append(label, buttons, scale);
    box.append(group, status);
    return box;
  }

  async function sendFeedback(turnId, score, btns, box, group, status) {
    btns.forEach((b, i) => {
      b.disabled = true;
      b.setAttribute('aria-pressed', String(i + 1 === score));
    });
    box.classList.add('is-busy');
    let message;
    let ok = false;
    try {
      const res = await fetch('/api/feedback', {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Accept: 'application/json' },
        body: JSON.stringify({ turn_id: turnId, score }),
        credentials: 'same-origin',
      });
      if (res.ok) {
        ok = true;
        message = 'Thanks for the feedback';
      } else {
        message = await errorDetail(res);
      }
    } catch (_) {
      message = 'Could not send your rating. Check your connection and try again.';
    }
    box.classList.remove('is-busy');
    mutate(() => {
      status.textContent = message;
      status.hidden = false;
      status.classList.toggle('is-error', !ok);
      if (ok) {
        group.remove();
      } else {
        btns.forEach((b) => { b.disabled = false; b.setAttribute('aria-pressed', 'false'); });
      }
    });
    // The focused rating button may have disappeared; keep keyboard users in place.
    if (ok || !box.contains(document.activeElement)) status.focus({ preventScroll: true });
  }

  /** Turns a FastAPI-style error body into a human sentence. */
  async function errorDetail(res) {
    let detail = null;
    try {
      const body = await res.json();
      detail = body && body.detail;
    } catch (_) { /* not JSON */ }
    if (typeof detail === 'string' && detail.trim()) return detail;
    if (Array.isArray(detail)) {
      // FastAPI validation errors: [{loc, msg, type}, ...]
      const msgs = detail.map((d) => (d && typeof d.msg === 'string' ? d.msg : '')).filter(Boolean);
      if (msgs.length) return msgs.join('; ');
    }
    return `Something went wrong (HTTP ${res.status}). Please try again.`;
  }

  function renderError(turn, frame) {
    clearWatchdog(turn);
    stopPolling(turn);
    if (turn.turnId) inFlight.delete(turn.turnId);
    turn.state = 'failed';
    const detail = (typeof frame.detail === 'string' && frame.detail.trim())
      ? frame.detail
      : (frame.error_code ? `Error: ${frame.error_code}` : 'Something went wrong.');
    mutate(() => {
      turn.botWrap.classList.remove('msg-pending');
      turn.botWrap.classList.add('msg-error');
      if (frame.error_code) turn.botWrap.dataset.errorCode = String(frame.error_code);
      turn.bubble.replaceChildren(
        srOnly('Deskpilot error: '),
        h('p', 'error-title', 'Sorry — I couldn’t process that message.'),
        h('p', 'error-detail', detail),
      );
    });
  }

  /** A turn whose outcome we could not learn: offer to ask again or check again. */
  function renderStuck(turn, text, canCheckAgain) {
    clearWatchdog(turn);
    turn.stuck = true;           // no automatic polling until the user asks for it
    mutate(() => {
      turn.botWrap.classList.remove('msg-pending');
      turn.botWrap.classList.add('msg-error');
      const actions = h('div', 'stuck-actions');
      if (canCheckAgain && turn.turnId) {
        const again = h('button', 'btn-secondary', 'Check again');
        again.type = 'button';
        again.addEventListener('click', () => {
          turn.stuck = false;
          showPendingAgain(turn, 'Checking for the answer…');
          startPolling(turn);
          input.focus();
        });
        actions.append(again);
      }
      const retry = h('button', 'btn-secondary', 'Ask again');
      retry.type = 'button';
      retry.addEventListener('click', () => {
        if (turn.turnId) inFlight.delete(turn.turnId);
        stopPolling(turn);
        turn.state = 'retired';
        turn.botWrap.remove();
        turn.userWrap.remove();
        submitText(turn.text);
        input.focus();
      });
      actions.append(retry);
      turn.bubble.replaceChildren(srOnly('Deskpilot: '), h('p', 'error-detail', text), actions);
    });
  }

  function showPendingAgain(turn, label) {
    mutate(() => {
      turn.botWrap.classList.remove('msg-error', 'msg-notice');
      turn.botWrap.classList.add('msg-pending');
      turn.statusLabel = fillPending(turn.bubble, label);
    });
  }

  // ---------------------------------------------------------------------------------------------
  // Turns

  function submitText(raw) {
    const text = raw.replace(/\s+$/, '').replace(/^\s*\n/, '');
    if (!text.trim()) return false;
    if (utf8Bytes(text) > MAX_BYTES) return false;
    const turn = {
      localId: ++turnSeq,
      text,
      turnId: null,
      state: 'new',
      pollTimer: null,
      pollAttempts: 0,
      pollGen: 0,
      polling: false,
      stuck: false,
      watchdog: null,
    };
    mutate(() => {
      turn.userWrap = renderUser(text);
      renderPending(turn);
    }, true);
    dispatch(turn);
    return true;
  }

  function dispatch(turn) {
    // One unacknowledged message at a time: "accepted" frames carry no reference to the message
    // they acknowledge, so they are matched by order, which only holds if sends are serialised.
    const connected = ws && ready && ws.readyState === WebSocket.OPEN;
    if (connected && awaitingAccept.length === 0) {
      try {
        ws.send(JSON.stringify({ type: 'message', text: turn.text }));
        turn.state = 'sent';
        awaitingAccept.push(turn);
        setStatus(turn, 'Sending…');
        return;
      } catch (_) { /* fall through to queue */ }
    }
    turn.state = 'queued';
    outbox.push(turn);
    setStatus(turn, connected ? 'Sending…' : 'Waiting for the connection…');
  }

  function flushOutbox() {
    // Snapshot: dispatch() re-queues a turn if the socket turns out not to be writable.
    for (const turn of outbox.splice(0)) {
      if (turn.state === 'queued') dispatch(turn);
    }
  }

  function armWatchdog(turn) {
    clearWatchdog(turn);
    turn.watchdog = setTimeout(() => {
      turn.watchdog = null;
      if (turn.state === 'accepted' && !turn.polling && !turn.stuck) startPolling(turn);
    }, TURN_WATCHDOG_MS);
  }
  function clearWatchdog(turn) {
    if (turn.watchdog) clearTimeout(turn.watchdog);
    turn.watchdog = null;
  }

  // --- Recovery through GET /api/turns/<turn_id> -------------------------------------------------

  function startPolling(turn) {
    stopPolling(turn);
    turn.pollAttempts = 0;
    turn.state = 'accepted';
    turn.polling = true;
    inFlight.set(turn.turnId, turn);
    pollOnce(turn, turn.pollGen);
  }

  /** Stops the current polling chain; a fetch still under way is ignored when it returns. */
  function stopPolling(turn) {
    if (turn.pollTimer) clearTimeout(turn.pollTimer);
    turn.pollTimer = null;
    turn.polling = false;
    turn.pollGen = (turn.pollGen || 0) + 1;
  }

  async function pollOnce(turn, gen) {
    turn.pollTimer = null;
    if (gen !== turn.pollGen || turn.state !== 'accepted') return;
    turn.pollAttempts++;
    let result = null;
    try {
      const res = await fetch(`/api/turns/${encodeURIComponent(turn.turnId)}`, {
        headers: { Accept: 'application/json' },
        credentials: 'same-origin',
        cache: 'no-store',
      });
      if (res.ok) {
        result = await res.json();
      } else if (res.status === 404 || res.status === 410) {
        result = { status: 'gone', detail: await errorDetail(res) };
      }
      // other statuses (5xx, 429…) count as a failed attempt and we try again
    } catch (_) { /* network error: try again */ }

    if (gen !== turn.pollGen || turn.state !== 'accepted') return; // answered meanwhile, or cancelled

    if (result && result.status === 'done' && result.answer && typeof result.answer === 'object') {
      renderAnswer(turn, result.answer);
      return;
    }
    if (result && result.status === 'gone') {
      inFlight.delete(turn.turnId);
      turn.state = 'failed';
      stopPolling(turn);
      renderStuck(turn, 'The answer to this message is no longer available. Please ask again.', false);
      return;
    }
    if (result && result.status && result.status !== 'pending' && result.status !== 'done') {
      // e.g. {"status":"failed","detail":"..."}: treat as a final error for this turn.
      renderError(turn, { error_code: result.error_code || result.status, detail: result.detail });
      return;
    }
    if (turn.pollAttempts >= POLL_MAX_ATTEMPTS) {
      stopPolling(turn);
      // Keep the turn in inFlight: if the socket still delivers the answer, we render it.
      renderStuck(turn, 'This is taking longer than expected. You can check again in a moment or ask again.', true);
      return;
    }
    turn.pollTimer = setTimeout(() => pollOnce(turn, gen), POLL_INTERVAL_MS);
  }

  // ---------------------------------------------------------------------------------------------
  // Socket

  function socketUrl() {
    const proto = window.location.protocol === 'https:' ? 'wss:' : 'ws:';
    let url = `${proto}//${window.location.host}/ws/chat`;
    if (conversationId) url += `?conversation_id=${encodeURIComponent(conversationId)}`;
    return url;
  }

  function showBanner(text) {
    if (text) {
      bannerText.textContent = text;
      bannerEl.hidden = false;
    } else {
      bannerEl.hidden = true;
    }
  }

  function connect() {
    clearTimeout(reconnectTimer);
    reconnectTimer = null;
    ready = false;
    let sock;
    try {
      sock = new WebSocket(socketUrl());
    } catch (_) {
      scheduleReconnect();
      return;
    }
    ws = sock;
    showBanner(everConnected ? 'Reconnecting…' : 'Connecting…');

    sock.addEventListener('message', (ev) => {
      if (sock !== ws) return;
      let frame;
      try { frame = JSON.parse(ev.data); } catch (_) { return; }
      if (frame && typeof frame === 'object') handleFrame(frame);
    });
    sock.addEventListener('close', () => {
      if (sock !== ws) return; // a socket we already abandoned (e.g. "New conversation")
      ws = null;
      ready = false;
      onConnectionLost();
      scheduleReconnect();
    });
    // "error" is always followed by "close", which does the work.
  }

  function scheduleReconnect() {
    if (reconnectTimer) return;
    const exp = Math.min(BACKOFF_MAX_MS, BACKOFF_BASE_MS * 2 ** reconnectAttempt);
    const delay = Math.round(exp * (0.75 + Math.random() * 0.25)); // a little jitter
    reconnectAttempt++;
    showBanner(everConnected ? 'Reconnecting…' : 'Connecting…');
    reconnectTimer = setTimeout(() => { reconnectTimer = null; connect(); }, delay);
  }

  function reconnectNow() {
    if (ws || !reconnectTimer) return;
    clearTimeout(reconnectTimer);
    reconnectTimer = null;
    connect();
  }

  function onConnectionLost() {
    // Sent but never acknowledged: we cannot know whether the server got it, so resending
    // automatically could duplicate the turn. Let the user decide.
    while (awaitingAccept.length) {
      const turn = awaitingAccept.shift();
      if (turn.state !== 'sent') continue;
      turn.state = 'failed';
      renderStuck(turn, 'The connection dropped before your message was confirmed.', false);
    }
    for (const turn of inFlight.values()) {
      if (turn.state === 'accepted' && !turn.polling) {
        clearWatchdog(turn);
        setStatus(turn, 'Connection lost — reconnecting…');
      }
    }
  }

  function onReady(frame) {
    ready = true;
    everConnected = true;
    reconnectAttempt = 0;
    showBanner(null);
    if (typeof frame.conversation_id === 'string' && frame.conversation_id) {
      conversationId = frame.conversation_id;
      storageSet(conversationId);
    }
    // Turns accepted on a previous socket: their answer may have been sent while we were away.
    for (const turn of inFlight.values()) {
      if (turn.state === 'accepted' && !turn.polling && !turn.stuck) {
        setStatus(turn, 'Reconnected — fetching the answer…');
        startPolling(turn);
      }
    }
    flushOutbox();
  }

  function turnFor(frame) {
    const id = frame.turn_id != null ? String(frame.turn_id) : null;
    if (id && inFlight.has(id)) return inFlight.get(id);
    return null;
  }

  function handleFrame(frame) {
    switch (frame.type) {
      case 'ready':
        onReady(frame);
        break;

      case 'accepted': {
        const turn = awaitingAccept.shift();
        if (!turn || frame.turn_id == null) break;
        turn.turnId = String(frame.turn_id);
        turn.state = 'accepted';
        turn.botWrap.dataset.turnId = turn.turnId;
        inFlight.set(turn.turnId, turn);
        setStatus(turn, 'Working on it…');
        armWatchdog(turn);
        flushOutbox();
        break;
      }

      case 'progress': {
        const turn = turnFor(frame);
        if (!turn) break;
        setStatus(turn, stageLabel(frame.stage));
        if (!turn.polling) armWatchdog(turn);
        break;
      }

      case 'answer': {
        let turn = turnFor(frame);
        // An answer with no prior "accepted" (should not happen, but be forgiving).
        if (!turn && awaitingAccept.length && frame.turn_id != null) {
          turn = awaitingAccept.shift();
          turn.turnId = String(frame.turn_id);
        }
        if (!turn || turn.state === 'done') break;
        renderAnswer(turn, frame);
        break;
      }

      case 'error': {
        // Errors are for bad input, i.e. the oldest message not yet accepted. An error naming a
        // known turn_id is attached to that turn; anything else is shown as a general notice.
        let turn = turnFor(frame);
        if (!turn && awaitingAccept.length) turn = awaitingAccept.shift();
        if (turn) {
          renderError(turn, frame);
          // Rejected input: give the text back so it can be fixed rather than retyped.
          if (!turn.turnId && !input.value) {
            input.value = turn.text;
            updateComposer();
          }
        } else {
          renderSystemNotice(frame);
        }
        flushOutbox();
        break;
      }

      default:
        break; // unknown frame types are ignored (forward compatibility)
    }
  }

  function renderSystemNotice(frame) {
    const text = (typeof frame.detail === 'string' && frame.detail) || frame.error_code || 'Something went wrong.';
    mutate(() => {
      const { wrap, bubble } = botMessage('msg-error');
      bubble.append(srOnly('Deskpilot error: '), h('p', 'error-detail', String(text)));
      messagesEl.append(wrap);
    });
  }

  function newConversation() {
    // Abandon the current socket; its late frames are ignored because sock !== ws.
    const old = ws;
    ws = null;
    ready = false;
    if (old) { try { old.close(1000, 'new conversation'); } catch (_) { /* ignore */ } }
    for (const turn of inFlight.values()) { stopPolling(turn); clearWatchdog(turn); turn.state = 'retired'; }
    for (const turn of awaitingAccept) turn.state = 'retired';
    for (const turn of outbox) turn.state = 'retired';
    inFlight.clear();
    awaitingAccept.length = 0;
    outbox.length = 0;
    conversationId = null;
    storageSet(null);
    messagesEl.replaceChildren();
    renderWelcome();
    clearTimeout(reconnectTimer);
    reconnectTimer = null;
    reconnectAttempt = 0;
    connect();
    input.focus();
  }

  // ---------------------------------------------------------------------------------------------
  // Composer

  function autoGrow() {
    input.style.height = 'auto';
    const max = Math.round(window.innerHeight * 0.35);
    input.style.height = `${Math.min(input.scrollHeight + 2, Math.max(max, 96))}px`;
  }

  function updateComposer() {
    const len = utf8Bytes(input.value);
    sendBtn.disabled = !input.value.trim() || len > MAX_BYTES;
    if (len >= COUNTER_FROM) {
      counterEl.hidden = false;
      counterEl.textContent = `${len.toLocaleString()} / ${MAX_BYTES.toLocaleString()} bytes`;
      counterEl.classList.toggle('is-limit', len >= MAX_BYTES);
    } else {
      counterEl.hidden = true;
      counterEl.textContent = '';
    }
    autoGrow();
  }

  function sendFromInput() {
    if (sendBtn.disabled) return;
    if (submitText(input.value)) {
      input.value = '';
      updateComposer();
    }
  }

  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    sendFromInput();
  });

  input.addEventListener('keydown', (ev) => {
    if (ev.key !== 'Enter' || ev.shiftKey || ev.isComposing || ev.keyCode === 229) return;
    if (ev.altKey || ev.ctrlKey || ev.metaKey) return;
    ev.preventDefault();
    sendFromInput();
  });

  input.addEventListener('input', updateComposer);
  window.addEventListener('resize', autoGrow);
  newChatBtn.addEventListener('click', newConversation);
  const skip = document.querySelector('.skip-link');
  if (skip) skip.addEventListener('click', (ev) => { ev.preventDefault(); input.focus(); });
  window.addEventListener('online', reconnectNow);
  document.addEventListener('visibilitychange', () => {
    if (document.visibilityState === 'visible') reconnectNow();
  });

  // ---------------------------------------------------------------------------------------------
  // Start

  renderWelcome();
  updateComposer();
  connect();
})();
