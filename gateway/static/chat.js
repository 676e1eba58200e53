/* Deskpilot chat page.
 *
 * Plain ES2020, no dependencies, no build step. Talks to the gateway over:
 *   - WebSocket  /ws/chat?conversation_id=&user=&token=   frames ready / accepted / progress /
 *                answer / error; sends {"type":"message", text, client_id, attachments,
 *                request_ticket}. `user` is the anonymous token the gateway gave this browser
 *                (the "ready" frame carries a new or renewed one); `token` a user token.
 *   - POST       /api/attachments   multipart file + conversation_id, with progress
 *   - GET        /api/attachments/<id>   while a large file is still being read
 *   - POST       /api/feedback      {"turn_id", "score", "comment"?}
 *   - GET        /api/turns/<id>    {"status":"pending"} | {"status":"done","answer":{...}}
 *
 * Embedded (?embed=1, see embed.js) it also listens to its parent window for a user token
 * ({"type": "deskpilot:token", "token"}) and asks it to close the panel on Escape.
 *
 * Safety rule for this file: untrusted text (answers, citations, cards, error details, file
 * names, the user's own text) only ever reaches the DOM through textContent / createElement /
 * setAttribute of checked URLs. Nothing is ever assigned to innerHTML.
 */
(() => {
  'use strict';

  // ---------------------------------------------------------------------------------------------
  // Configuration

  const CONVERSATION_KEY = 'deskpilot.conversation_id';
  const ANONYMOUS_KEY = 'deskpilot.anonymous_token';
  const LEGACY_USER_KEY = 'deskpilot.user_id';   // the self-chosen id of earlier versions
  const TRANSCRIPT_PREFIX = 'deskpilot.transcript.';
  const TRANSCRIPT_MAX_TURNS = 60;
  // The gateway's limit is in UTF-8 bytes (GATEWAY_MAX_MESSAGE_BYTES, 8 KiB by default).
  const MAX_BYTES = 8192;
  const COUNTER_FROM = 7000;            // show the size counter from this many bytes on
  const MAX_ATTACHMENTS = 5;            // per message, as the gateway allows
  const utf8Bytes = (s) => new TextEncoder().encode(s).length;
  const BACKOFF_BASE_MS = 500;
  const BACKOFF_MAX_MS = 10000;
  const POLL_INTERVAL_MS = 1500;
  const POLL_MAX_ATTEMPTS = 40;
  const TURN_WATCHDOG_MS = 60000;       // no frame for an accepted turn this long -> ask /api/turns
  const LONG_TURN_MS = 1500;            // after this, a pending turn shows a progress bar
  const TOKEN_WAIT_MS = 3000;           // embedded with a token: how long to wait for it

  const FIXED_TEXT = 'That fixed it';
  const STILL_BROKEN_TEXT = 'Done, still broken';
  const TICKET_LABEL = 'Talk to a person / create ticket';

  /** Each stage: what it says while it runs, and once it is done. */
  const STAGES = {
    redacting: ['Checking your message for personal data…', 'Checked your message'],
    searching: ['Searching the knowledge base…', 'Searched the knowledge base'],
    reading_attachment: ['Reading your attachment…', 'Read your attachment'],
    crawling: ['Reading the IT help site…', 'Read the IT help site'],
    indexed: ['Learning from the pages read…', 'Learned from the pages read'],
    creating_ticket: ['Creating your ticket…', 'Created the ticket'],
    checking_ticket: ['Checking your ticket…', 'Checked your ticket'],
    composing: ['Writing the answer…', 'Wrote the answer'],
    writing: ['Writing the answer…', 'Wrote the answer'],
  };

  const EXAMPLES = [
    'How do I reset my VPN password?',
    'How do I connect to the office Wi-Fi?',
    "My headset isn't recognised in Teams",
  ];

  const params = new URLSearchParams(window.location.search);
  const embedded = params.has('embed') && window.parent !== window;
  const expectToken = embedded && params.get('auth') === '1';

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

  function button(className, text, onClick) {
    const b = h('button', className, text);
    b.type = 'button';
    if (onClick) b.addEventListener('click', onClick);
    return b;
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

  const str = (value) => (typeof value === 'string' ? value : '');

  function formatBytes(n) {
    if (!Number.isFinite(n)) return '';
    if (n < 1024) return `${n} B`;
    if (n < 1024 * 1024) return `${(n / 1024).toFixed(n < 10240 ? 1 : 0)} KB`;
    return `${(n / 1024 / 1024).toFixed(1)} MB`;
  }

  function formatWhen(raw) {
    const date = new Date(str(raw));
    if (Number.isNaN(date.getTime())) return '';
    return date.toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'short' });
  }

  // ---------------------------------------------------------------------------------------------
  // Storage: the conversation id and the anonymous token the gateway issued this browser live
  // in localStorage; the transcript of the current conversation in sessionStorage (this tab,
  // survives a reload). Only the gateway names anonymous users: the token it signs is what
  // lets this browser back into its conversations, turns and attachments, and nobody else in.

  function localGet(key) {
    try { return window.localStorage.getItem(key); } catch (_) { return null; }
  }
  function localSet(key, value) {
    try {
      if (value) window.localStorage.setItem(key, value);
      else window.localStorage.removeItem(key);
    } catch (_) { /* storage disabled: the value just lives for this page */ }
  }

  function storedAnonymousToken() {
    localSet(LEGACY_USER_KEY, null);
    const stored = localGet(ANONYMOUS_KEY);
    // A JWT: three base64url parts. Anything else is dropped; the gateway issues a new one.
    return stored && /^[\w-]+\.[\w-]+\.[\w-]+$/.test(stored) && stored.length < 4096 ? stored : null;
  }

  const transcript = {
    load(conversation) {
      if (!conversation) return [];
      try {
        const raw = window.sessionStorage.getItem(TRANSCRIPT_PREFIX + conversation);
        const parsed = raw ? JSON.parse(raw) : [];
        return Array.isArray(parsed) ? parsed.filter((e) => e && typeof e === 'object') : [];
      } catch (_) {
        return [];
      }
    },
    save(conversation, entries) {
      if (!conversation) return;
      try {
        window.sessionStorage.setItem(
          TRANSCRIPT_PREFIX + conversation,
          JSON.stringify(entries.slice(-TRANSCRIPT_MAX_TURNS)),
        );
      } catch (_) { /* full or disabled: the page still works, it just won't redraw */ }
    },
    drop(conversation) {
      if (!conversation) return;
      try { window.sessionStorage.removeItem(TRANSCRIPT_PREFIX + conversation); } catch (_) { /* */ }
    },
  };

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
  const attachBtn = $('attach-btn');
  const fileInput = $('file-input');
  const attachmentsEl = $('attachments');
  const ticketBtn = $('ticket-btn');
  const dropZone = $('drop-zone');
  const appEl = document.querySelector('.app');

  // ---------------------------------------------------------------------------------------------
  // State

  let anonymousToken = storedAnonymousToken();   // from the gateway's "ready" frame
  let token = null;                  // a user token the host page gave us (embedded only)
  let conversationId = localGet(CONVERSATION_KEY);
  let ws = null;
  let ready = false;                 // "ready" frame received on the current socket
  let everConnected = false;
  let reconnectAttempt = 0;
  let reconnectTimer = null;
  let turnSeq = 0;
  let readyWaiters = [];             // resolved with the conversation id on the next "ready"

  /** Every turn of the conversation on screen, oldest first (what the transcript saves). */
  const turns = [];
  /** Turns typed while offline, sent when the socket is ready. */
  const outbox = [];
  /** Turns sent on the current socket that have no "accepted" yet (server answers in order). */
  const awaitingAccept = [];
  /** Accepted turns without an answer, by server turn_id. */
  const inFlight = new Map();
  /** Files attached to the next message: {localId, file, state, id, summary, xhr, ...}. */
  const uploads = [];
  let uploadSeq = 0;

  function authHeaders(extra) {
    const headers = { Accept: 'application/json', ...(extra || {}) };
    const credential = token || anonymousToken;
    if (credential) headers.Authorization = `Bearer ${credential}`;
    return headers;
  }

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
      'Describe your problem, attach a screenshot or log, or try one of these:'));
    const chips = h('div', 'chips');
    chips.setAttribute('role', 'group');
    chips.setAttribute('aria-label', 'Example questions');
    for (const q of EXAMPLES) {
      chips.append(button('chip', q, () => {
        submitText(q);
        input.focus();
      }));
    }
    bubble.append(chips);
    messagesEl.append(wrap);
  }

  function renderUser(turn) {
    const wrap = h('div', 'msg msg-user');
    const bubble = h('div', 'bubble');
    bubble.append(srOnly('You said: '));
    if (turn.sensitive) {
      bubble.classList.add('is-withheld');
      bubble.append(h('span', 'user-text',
        'Message not shown again: it contained something private, which was removed.'));
    } else if (turn.text) {
      bubble.append(h('span', 'user-text', turn.text));
    } else if (turn.label) {
      bubble.classList.add('is-action');
      bubble.append(h('span', 'user-text', turn.label));
    }
    if (turn.files && turn.files.length) {
      const list = h('ul', 'sent-files');
      list.setAttribute('aria-label', 'Attached files');
      for (const f of turn.files) {
        const li = h('li', 'sent-file');
        li.append(fileIcon(f.kind), h('span', 'sent-file-name', f.name || 'attachment'));
        list.append(li);
      }
      bubble.append(list);
    }
    wrap.append(bubble);
    messagesEl.append(wrap);
    return wrap;
  }

  function fileIcon(kind) {
    const icon = h('span', `file-icon file-icon-${kind === 'image' ? 'image' : 'log'}`);
    icon.setAttribute('aria-hidden', 'true');
    return icon;
  }

  // --- Progress: the stages of a turn as they happen, and a bar once it takes a while ----------

  function fillPending(turn, text) {
    const panel = h('div', 'progress-panel');
    const status = h('div', 'progress');
    const dots = h('span', 'typing');
    dots.setAttribute('aria-hidden', 'true');
    dots.append(h('span'), h('span'), h('span'));
    const label = h('span', 'progress-label', text);
    status.append(dots, label);
    const detail = h('div', 'progress-detail');
    detail.hidden = true;
    const bar = h('div', 'bar');
    bar.setAttribute('role', 'progressbar');
    bar.setAttribute('aria-label', 'Progress of this answer');
    bar.append(h('span', 'bar-fill'));
    bar.hidden = true;
    const stages = h('ol', 'stages');
    stages.setAttribute('aria-label', 'Done so far');
    const preview = h('div', 'answer answer-preview');
    preview.setAttribute('aria-hidden', 'true');   // the final answer is what gets announced
    preview.inert = true;                          // and what can be used (copy buttons)
    preview.hidden = true;
    panel.append(status, detail, bar, stages);
    turn.bubble.replaceChildren(panel, preview);
    turn.progress = { panel, label, detail, bar, stages, preview, stage: null, done: new Set() };
    clearTimeout(turn.longTimer);
    turn.longTimer = setTimeout(() => {
      if (turn.progress && turn.progress.bar.isConnected && turn.state !== 'done') {
        mutate(() => { turn.progress.bar.hidden = false; });
      }
    }, LONG_TURN_MS);
  }

  function renderPending(turn) {
    const { wrap, bubble } = botMessage('msg-pending');
    turn.botWrap = wrap;
    turn.bubble = bubble;
    fillPending(turn, 'Sending…');
    messagesEl.append(wrap);
  }

  function setStatus(turn, text) {
    if (turn.progress && turn.progress.label.isConnected) {
      mutate(() => { turn.progress.label.textContent = text; });
    }
  }

  function onProgress(turn, stage, detail) {
    const p = turn.progress;
    if (!p || !p.panel.isConnected) return;
    const known = Object.prototype.hasOwnProperty.call(STAGES, stage);
    const [running] = known ? STAGES[stage] : ['Working on it…'];
    mutate(() => {
      const same = p.stage === stage || (p.stage === 'composing' && stage === 'writing');
      if (p.stage && !same) {
        const doneLabel = Object.prototype.hasOwnProperty.call(STAGES, p.stage) ? STAGES[p.stage][1] : null;
        if (doneLabel && !p.done.has(doneLabel)) {
          p.done.add(doneLabel);
          const li = h('li', 'stage-done', doneLabel);
          p.stages.append(li);
        }
      }
      p.stage = stage;
      p.label.textContent = running;
      turn.botWrap.dataset.stage = stage;
      const text = str(detail);
      if (stage === 'writing') {
        // The answer written so far (not a delta): a preview the final answer replaces.
        p.detail.hidden = true;
        p.preview.hidden = !text;
        p.preview.replaceChildren(renderMarkdown(text, { citations: new Map(), idPrefix: `p${turn.localId}` }));
      } else {
        p.detail.hidden = !text;
        p.detail.textContent = text;
      }
      // Reading the help site takes seconds: the bar shows at once.
      if (stage === 'crawling' || stage === 'indexed') p.bar.hidden = false;
      const fraction = /^(\d+)\s*\/\s*(\d+)\s+pages?/.exec(text);
      if (fraction && Number(fraction[2]) > 0) {
        const value = Math.min(100, Math.round((100 * Number(fraction[1])) / Number(fraction[2])));
        p.bar.hidden = false;
        p.bar.classList.add('is-determinate');
        p.bar.setAttribute('aria-valuemin', '0');
        p.bar.setAttribute('aria-valuemax', '100');
        p.bar.setAttribute('aria-valuenow', String(value));
        p.bar.setAttribute('aria-valuetext', text);
        p.bar.firstChild.style.width = `${value}%`;
      } else if (stage !== 'crawling' && stage !== 'indexed') {
        p.bar.classList.remove('is-determinate');
        p.bar.removeAttribute('aria-valuenow');
        p.bar.removeAttribute('aria-valuetext');
        p.bar.firstChild.style.width = '';
      }
    });
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

  function finishTurn(turn) {
    clearWatchdog(turn);
    stopPolling(turn);
    clearTimeout(turn.longTimer);
    if (turn.turnId) inFlight.delete(turn.turnId);
  }

  function renderAnswer(turn, data, restoring) {
    finishTurn(turn);
    turn.state = 'done';
    turn.answer = data;

    const action = typeof data.action === 'string' ? data.action : 'answer';
    const citations = new Map();
    const citeList = Array.isArray(data.citations) ? data.citations : [];
    citeList.forEach((c, i) => {
      if (!c || typeof c !== 'object') return;
      const n = Number.isInteger(c.n) ? c.n : parseInt(c.n, 10) || i + 1;
      if (!citations.has(n)) citations.set(n, c);
    });
    const ctx = { citations, idPrefix: `t${turn.localId}` };

    const paint = () => {
      turn.botWrap.classList.remove('msg-pending', 'msg-error');
      turn.botWrap.dataset.action = action;
      delete turn.botWrap.dataset.stage;
      if (data.trace_id) turn.botWrap.dataset.traceId = String(data.trace_id);
      if (action === 'no_answer') turn.botWrap.classList.add('msg-notice');
      const bubble = turn.bubble;
      bubble.replaceChildren();
      turn.progress = null;
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

      const incident = incidentCard(data.incident);
      if (incident) bubble.append(incident);
      const checklist = checklistCard(turn, data.checklist, ctx);
      if (checklist) bubble.append(checklist);
      const ticket = ticketCard(data.ticket);
      if (ticket) bubble.append(ticket);
      if (citations.size) bubble.append(renderSources(citations, ctx));
      const similar = similarCasesCard(data.similar_cases, ctx);
      if (similar) bubble.append(similar);
      if (typeof data.redaction_notice === 'string' && data.redaction_notice.trim()) {
        // Plain text (h sets textContent): what the redactor removed, never the value itself.
        const notice = h('p', 'redaction-notice', data.redaction_notice);
        notice.setAttribute('role', 'note');
        bubble.append(notice);
      }
      const turnId = data.turn_id || turn.turnId;
      if (turnId) bubble.append(renderFeedback(turn, String(turnId)));
    };
    if (restoring) paint();
    else mutateShowingStart(turn.botWrap, paint);
    retireOldCardButtons();

    if (!restoring) {
      if (typeof data.redaction_notice === 'string' && data.redaction_notice.trim() && turn.text) {
        // Something private was in the message: it is not kept for the redraw after a reload.
        turn.sensitive = true;
      }
      saveTranscript();
    }
  }

  let cardSeq = 0;
  function card(kind, title) {
    const box = h('section', `card card-${kind}`);
    const heading = h('h2', 'card-title', title);
    heading.id = `card-${kind}-${++cardSeq}`;
    box.setAttribute('aria-labelledby', heading.id);
    box.append(heading);
    return box;
  }

  function checklistCard(turn, checklist, ctx) {
    if (!checklist || !Array.isArray(checklist.steps) || !checklist.steps.length) return null;
    const steps = checklist.steps.map(str);
    const current = Math.max(0, Math.min(steps.length - 1, Number(checklist.current) || 0));
    const box = card('checklist', `Step ${current + 1} of ${steps.length}`);
    const meter = h('div', 'checklist-meter');
    meter.setAttribute('aria-hidden', 'true');
    const fill = h('span', 'checklist-meter-fill');
    fill.style.width = `${Math.round((100 * (current + 1)) / steps.length)}%`;
    meter.append(fill);
    box.append(meter);
    const ol = h('ol', 'checklist-steps');
    steps.forEach((step, i) => {
      const li = h('li', 'checklist-step');
      const state = i < current ? 'tried' : i === current ? 'current' : 'next';
      li.classList.add(`is-${state}`);
      if (state === 'current') li.setAttribute('aria-current', 'step');
      const mark = h('span', 'step-mark', i < current ? '✓' : String(i + 1));
      mark.setAttribute('aria-hidden', 'true');
      const text = h('div', 'step-text');
      const prefix = state === 'tried' ? 'Tried: ' : state === 'current' ? 'Now: ' : '';
      if (prefix) text.append(srOnly(prefix));
      appendInline(text, step.split('\n')[0], ctx);
      li.append(mark, text);
      ol.append(li);
    });
    box.append(ol);
    const actions = h('div', 'card-actions');
    const broken = button('btn-secondary', STILL_BROKEN_TEXT, () => submitText(STILL_BROKEN_TEXT));
    const fixed = button('btn-primary', FIXED_TEXT, () => submitText(FIXED_TEXT));
    actions.append(fixed, broken);
    box.append(actions);
    turn.cardButtons = [broken, fixed];
    return box;
  }

  function ticketCard(ticket) {
    if (!ticket || typeof ticket !== 'object' || !str(ticket.key)) return null;
    const box = card('ticket', `Ticket ${ticket.key}`);
    const row = h('p', 'card-row');
    row.append(h('span', 'card-label', 'Status'), h('span', 'status-pill', str(ticket.status) || 'open'));
    box.append(row);
    const href = safeUrl(ticket.url);
    if (href) {
      const a = externalLink(href, 'Open the ticket');
      a.className = 'card-link';
      a.append(srOnly(` ${ticket.key} (opens in a new tab)`));
      box.append(a);
    }
    return box;
  }

  function incidentCard(incident) {
    if (!incident || typeof incident !== 'object' || !str(incident.title)) return null;
    const box = card('incident', 'Known incident');
    box.setAttribute('role', 'note');
    box.append(h('p', 'incident-title', incident.title));
    const facts = h('dl', 'card-facts');
    const fact = (label, value) => {
      if (!value) return;
      facts.append(h('dt', null, label), h('dd', null, value));
    };
    fact('Status', str(incident.status));
    fact('Since', formatWhen(incident.since));
    fact('Latest update', str(incident.latest_update));
    if (facts.childNodes.length) box.append(facts);
    const href = safeUrl(incident.url);
    if (href) {
      const a = externalLink(href, 'Follow the incident');
      a.className = 'card-link';
      a.append(srOnly(' (opens in a new tab)'));
      box.append(a);
    }
    return box;
  }

  function similarCasesCard(cases, ctx) {
    if (!Array.isArray(cases) || !cases.length) return null;
    const box = h('details', 'card card-similar');
    const summary = h('summary', 'card-title', `Similar resolved cases (${cases.length})`);
    box.append(summary);
    const ul = h('ul', 'similar-list');
    for (const c of cases) {
      if (!c || typeof c !== 'object') continue;
      const li = h('li', 'similar-case');
      const head = h('p', 'similar-head');
      head.append(h('span', 'similar-id', str(c.ticket_id)), document.createTextNode(' '));
      appendInline(head, str(c.summary), ctx);
      const res = h('p', 'similar-resolution');
      res.append(h('span', 'card-label', 'Resolution: '));
      appendInline(res, str(c.resolution), ctx);
      li.append(head, res);
      ul.append(li);
    }
    box.append(ul);
    return box;
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
      num.setAttribute('aria-hidden', 'true');
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

  // --- Rating: 1-5 and an optional comment ----------------------------------------------------

  function renderFeedback(turn, turnId) {
    const box = h('div', 'feedback');
    const status = h('p', 'feedback-status');
    status.tabIndex = -1;
    status.setAttribute('role', 'status');
    if (turn.rated) {
      status.textContent = `Thanks — you rated this ${turn.rated} of 5.`;
      box.append(status);
      return box;
    }
    status.hidden = true;
    const group = h('div', 'rating');
    group.setAttribute('role', 'group');
    group.setAttribute('aria-label', 'Rate this answer from 1 (not helpful) to 5 (very helpful)');
    const label = h('span', 'rating-label', 'Was this helpful?');
    label.setAttribute('aria-hidden', 'true');
    const buttons = h('div', 'rating-buttons');
    const btns = [];
    const more = h('div', 'feedback-more');
    more.hidden = true;
    const commentId = `comment-${turn.localId}`;
    const commentLabel = h('label', 'feedback-comment-label', 'Anything to add? (optional)');
    commentLabel.htmlFor = commentId;
    const comment = h('textarea', 'feedback-comment');
    comment.id = commentId;
    comment.rows = 2;
    comment.maxLength = 2000;
    const sendRating = button('btn-primary btn-small', 'Send rating');
    more.append(commentLabel, comment, sendRating);
    let score = 0;
    for (let s = 1; s <= 5; s++) {
      const b = button('rate-btn', String(s), () => {
        score = s;
        btns.forEach((other, i) => other.setAttribute('aria-pressed', String(i + 1 === s)));
        more.hidden = false;
        sendRating.textContent = `Send rating ${s} of 5`;
      });
      b.setAttribute('aria-label', `Rate ${s} of 5`);
      b.setAttribute('aria-pressed', 'false');
      btns.push(b);
      buttons.append(b);
    }
    const scale = h('span', 'rating-scale', '1 = not helpful · 5 = very helpful');
    scale.setAttribute('aria-hidden', 'true');
    group.append(label, buttons, scale);
    sendRating.addEventListener('click', () => {
      if (score) sendFeedback(turn, turnId, score, comment.value.trim(), { box, group, more, status, btns, sendRating });
    });
    comment.addEventListener('keydown', (ev) => {
      if (ev.key === 'Enter' && (ev.ctrlKey || ev.metaKey)) { ev.preventDefault(); sendRating.click(); }
    });
    box.append(group, more, status);
    return box;
  }

  async function sendFeedback(turn, turnId, score, comment, ui) {
    ui.btns.forEach((b) => { b.disabled = true; });
    ui.sendRating.disabled = true;
    ui.box.classList.add('is-busy');
    let message;
    let ok = false;
    try {
      const body = { turn_id: turnId, score };
      if (comment) body.comment = comment;
      const res = await fetch('/api/feedback', {
        method: 'POST',
        headers: authHeaders({ 'Content-Type': 'application/json' }),
        body: JSON.stringify(body),
        credentials: 'same-origin',
      });
      if (res.ok) {
        ok = true;
        message = `Thanks — you rated this ${score} of 5.`;
      } else {
        message = await errorDetail(res);
      }
    } catch (_) {
      message = 'Could not send your rating. Check your connection and try again.';
    }
    ui.box.classList.remove('is-busy');
    mutate(() => {
      ui.status.textContent = message;
      ui.status.hidden = false;
      ui.status.classList.toggle('is-error', !ok);
      if (ok) {
        ui.group.remove();
        ui.more.remove();
      } else {
        ui.btns.forEach((b) => { b.disabled = false; });
        ui.sendRating.disabled = false;
      }
    });
    if (ok) {
      turn.rated = score;
      saveTranscript();
    }
    // The focused control may have disappeared; keep keyboard users in place.
    if (ok || !ui.box.contains(document.activeElement)) ui.status.focus({ preventScroll: true });
  }

  /** Turns a gateway or FastAPI error body into a human sentence. */
  async function errorDetail(res) {
    let body = null;
    try { body = await res.json(); } catch (_) { /* not JSON */ }
    return detailOf(body, res.status);
  }

  function detailOf(body, status) {
    const detail = body && body.detail;
    if (typeof detail === 'string' && detail.trim()) return detail;
    if (Array.isArray(detail)) {
      // FastAPI validation errors: [{loc, msg, type}, ...]
      const msgs = detail.map((d) => (d && typeof d.msg === 'string' ? d.msg : '')).filter(Boolean);
      if (msgs.length) return msgs.join('; ');
    }
    return `Something went wrong (HTTP ${status}). Please try again.`;
  }

  function renderError(turn, frame) {
    finishTurn(turn);
    turn.state = 'failed';
    const detail = (typeof frame.detail === 'string' && frame.detail.trim())
      ? frame.detail
      : (frame.error_code ? `Error: ${frame.error_code}` : 'Something went wrong.');
    mutate(() => {
      turn.botWrap.classList.remove('msg-pending');
      turn.botWrap.classList.add('msg-error');
      delete turn.botWrap.dataset.stage;
      if (frame.error_code) turn.botWrap.dataset.errorCode = String(frame.error_code);
      turn.progress = null;
      turn.bubble.replaceChildren(
        srOnly('Deskpilot error: '),
        h('p', 'error-title', 'Sorry — I couldn’t process that message.'),
        h('p', 'error-detail', detail),
      );
    });
    forgetTurn(turn);
  }

  /** A turn whose outcome we could not learn: offer to ask again or check again. */
  function renderStuck(turn, text, canCheckAgain) {
    clearWatchdog(turn);
    clearTimeout(turn.longTimer);
    turn.stuck = true;           // no automatic polling until the user asks for it
    mutate(() => {
      turn.botWrap.classList.remove('msg-pending');
      turn.botWrap.classList.add('msg-error');
      delete turn.botWrap.dataset.stage;
      turn.progress = null;
      const actions = h('div', 'stuck-actions');
      if (canCheckAgain && turn.turnId) {
        actions.append(button('btn-secondary', 'Check again', () => {
          turn.stuck = false;
          showPendingAgain(turn, 'Checking for the answer…');
          startPolling(turn);
          input.focus();
        }));
      }
      actions.append(button('btn-secondary', 'Ask again', () => {
        if (turn.turnId) inFlight.delete(turn.turnId);
        stopPolling(turn);
        turn.state = 'retired';
        turn.botWrap.remove();
        if (turn.userWrap) turn.userWrap.remove();
        forgetTurn(turn);
        submitText(turn.text, { attachments: turn.attachmentIds, files: turn.files,
          requestTicket: turn.requestTicket, label: turn.label });
        input.focus();
      }));
      turn.bubble.replaceChildren(srOnly('Deskpilot: '), h('p', 'error-detail', text), actions);
    });
  }

  function showPendingAgain(turn, label) {
    mutate(() => {
      turn.botWrap.classList.remove('msg-error', 'msg-notice');
      turn.botWrap.classList.add('msg-pending');
      fillPending(turn, label);
    });
  }

  // ---------------------------------------------------------------------------------------------
  // Transcript: what redraws the conversation after a reload

  function saveTranscript() {
    const entries = [];
    for (const t of turns) {
      if (!t.turnId || t.state === 'retired' || t.state === 'failed') continue;
      entries.push({
        turn_id: t.turnId,
        text: t.sensitive ? '' : t.text,
        sensitive: Boolean(t.sensitive),
        label: t.label || null,
        files: t.files || [],
        answer: t.state === 'done' ? t.answer : null,
        rated: t.rated || 0,
      });
    }
    transcript.save(conversationId, entries);
  }

  function forgetTurn(turn) {
    const i = turns.indexOf(turn);
    if (i >= 0) turns.splice(i, 1);
    saveTranscript();
  }

  function restoreTranscript() {
    const entries = transcript.load(conversationId);
    for (const e of entries) {
      if (typeof e.turn_id !== 'string' || !e.turn_id) continue;
      const turn = newTurn(str(e.text), {
        label: str(e.label) || null,
        files: Array.isArray(e.files) ? e.files.filter((f) => f && typeof f === 'object') : [],
      });
      turn.sensitive = Boolean(e.sensitive);
      turn.turnId = e.turn_id;
      turn.rated = Number.isInteger(e.rated) ? e.rated : 0;
      turn.userWrap = renderUser(turn);
      renderPending(turn);
      turn.botWrap.dataset.turnId = turn.turnId;
      turns.push(turn);
      if (e.answer && typeof e.answer === 'object') {
        renderAnswer(turn, e.answer, true);
      } else {
        // Sent before the reload and not answered then: the answer may be waiting.
        turn.state = 'accepted';
        inFlight.set(turn.turnId, turn);
        setStatus(turn, 'Fetching the answer…');
        startPolling(turn);
      }
    }
    retireOldCardButtons();
    scrollToBottom();
  }

  /** Only the newest checklist's buttons act; older ones would report on a step long gone. */
  function retireOldCardButtons() {
    const last = turns[turns.length - 1];
    for (const t of turns) {
      if (t === last || !t.cardButtons) continue;
      t.cardButtons.forEach((b) => { b.disabled = true; });
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Turns

  function newTurn(text, opts) {
    const o = opts || {};
    return {
      localId: ++turnSeq,
      clientId: `c${turnSeq}-${Math.random().toString(36).slice(2, 10)}`,
      text,
      label: o.label || null,
      files: o.files || [],
      attachmentIds: o.attachments || [],
      requestTicket: Boolean(o.requestTicket),
      turnId: null,
      state: 'new',
      answer: null,
      rated: 0,
      sensitive: false,
      pollTimer: null,
      pollAttempts: 0,
      pollGen: 0,
      polling: false,
      stuck: false,
      watchdog: null,
      longTimer: null,
      progress: null,
      cardButtons: null,
    };
  }

  function submitText(raw, opts) {
    const o = opts || {};
    const text = String(raw || '').replace(/\s+$/, '').replace(/^\s*\n/, '');
    const attachments = o.attachments || [];
    if (!text.trim() && !attachments.length && !o.requestTicket) return false;
    if (utf8Bytes(text) > MAX_BYTES) return false;
    const turn = newTurn(text, o);
    turns.push(turn);
    retireOldCardButtons();
    mutate(() => {
      turn.userWrap = renderUser(turn);
      renderPending(turn);
    }, true);
    dispatch(turn);
    return true;
  }

  function dispatch(turn) {
    // One unacknowledged message at a time keeps the answers in the order they were asked;
    // client_id still tells which message an "accepted" or "error" frame is about.
    const connected = ws && ready && ws.readyState === WebSocket.OPEN;
    if (connected && awaitingAccept.length === 0) {
      const frame = { type: 'message', text: turn.text, client_id: turn.clientId };
      if (turn.attachmentIds.length) frame.attachments = turn.attachmentIds;
      if (turn.requestTicket) frame.request_ticket = true;
      try {
        ws.send(JSON.stringify(frame));
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
        headers: authHeaders(),
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
    const query = new URLSearchParams();
    if (conversationId) query.set('conversation_id', conversationId);
    if (token) query.set('token', token);
    else if (anonymousToken) query.set('user', anonymousToken);
    return `${proto}//${window.location.host}/ws/chat?${query.toString()}`;
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

  /** Drops the current socket on purpose (new token): reconnects at once. */
  function reconnectFresh() {
    const old = ws;
    ws = null;
    ready = false;
    if (old) {
      try { old.close(1000, 'reconnect'); } catch (_) { /* ignore */ }
      onConnectionLost();
    }
    connect();
  }

  function scheduleReconnect() {
    if (reconnectTimer) return;
    const exp = Math.min(BACKOFF_MAX_MS, BACKOFF_BASE_MS * 2 ** reconnectAttempt);
    const delay = Math.round(exp * (0.75 + Math.random() * 0.25)); // a little jitter
    reconnectAttempt++;
    showBanner(everConnected ? 'Connection lost — reconnecting…' : 'Connecting…');
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
    if (typeof frame.anonymous_token === 'string' && frame.anonymous_token) {
      anonymousToken = frame.anonymous_token;
      localSet(ANONYMOUS_KEY, anonymousToken);
    }
    if (typeof frame.conversation_id === 'string' && frame.conversation_id) {
      if (conversationId && frame.conversation_id !== conversationId) {
        // The gateway did not take our id (expired, purged, not ours): a new conversation.
        transcript.drop(conversationId);
      }
      conversationId = frame.conversation_id;
      localSet(CONVERSATION_KEY, conversationId);
      saveTranscript();
    }
    const waiters = readyWaiters;
    readyWaiters = [];
    waiters.forEach((resolve) => resolve(conversationId));
    // Turns accepted on a previous socket: their answer may have been sent while we were away.
    for (const turn of inFlight.values()) {
      if (turn.state === 'accepted' && !turn.polling && !turn.stuck) {
        setStatus(turn, 'Reconnected — fetching the answer…');
        startPolling(turn);
      }
    }
    flushOutbox();
  }

  /** The conversation id once the gateway confirmed it (attachments belong to it). */
  function conversationReady() {
    if (ready && conversationId) return Promise.resolve(conversationId);
    return new Promise((resolve) => { readyWaiters.push(resolve); });
  }

  function turnFor(frame) {
    const id = frame.turn_id != null ? String(frame.turn_id) : null;
    if (id && inFlight.has(id)) return inFlight.get(id);
    return null;
  }

  function awaitingFor(frame) {
    if (typeof frame.client_id === 'string') {
      const i = awaitingAccept.findIndex((t) => t.clientId === frame.client_id);
      if (i >= 0) return awaitingAccept.splice(i, 1)[0];
    }
    return awaitingAccept.shift();
  }

  function handleFrame(frame) {
    switch (frame.type) {
      case 'ready':
        onReady(frame);
        break;

      case 'accepted': {
        const turn = awaitingFor(frame);
        if (!turn || frame.turn_id == null) break;
        turn.turnId = String(frame.turn_id);
        turn.state = 'accepted';
        turn.botWrap.dataset.turnId = turn.turnId;
        inFlight.set(turn.turnId, turn);
        setStatus(turn, 'Working on it…');
        armWatchdog(turn);
        saveTranscript();
        flushOutbox();
        break;
      }

      case 'progress': {
        const turn = turnFor(frame);
        if (!turn) break;
        onProgress(turn, str(frame.stage), frame.detail);
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
        // An error names the message it is about (client_id) or the turn (turn_id); anything
        // else is about the oldest message not yet accepted, or shown as a general notice.
        let turn = turnFor(frame);
        if (!turn && awaitingAccept.length) turn = awaitingFor(frame);
        if (turn) {
          renderError(turn, frame);
          // Rejected input: give the text back so it can be fixed rather than retyped.
          if (!turn.turnId && !input.value && turn.text) {
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
    for (const turn of turns) {
      stopPolling(turn);
      clearWatchdog(turn);
      clearTimeout(turn.longTimer);
      turn.state = 'retired';
    }
    turns.length = 0;
    inFlight.clear();
    awaitingAccept.length = 0;
    outbox.length = 0;
    for (const u of uploads.splice(0)) if (u.xhr) u.xhr.abort();
    renderUploads();
    transcript.drop(conversationId);
    conversationId = null;
    localSet(CONVERSATION_KEY, null);
    messagesEl.replaceChildren();
    renderWelcome();
    clearTimeout(reconnectTimer);
    reconnectTimer = null;
    reconnectAttempt = 0;
    connect();
    input.focus();
  }

  // ---------------------------------------------------------------------------------------------
  // Attachments: button or drag and drop; upload progress, then the gateway reads the file

  function addFiles(fileList) {
    const files = Array.from(fileList || []);
    for (const file of files) {
      if (uploads.length >= MAX_ATTACHMENTS) {
        announceUploadError(`At most ${MAX_ATTACHMENTS} files per message.`);
        break;
      }
      const upload = { localId: ++uploadSeq, file, name: file.name || 'attachment', state: 'uploading',
        loaded: 0, total: file.size, id: null, summary: null, error: null, xhr: null };
      uploads.push(upload);
      startUpload(upload);
    }
    renderUploads();
  }

  function announceUploadError(text) {
    const upload = { localId: ++uploadSeq, name: '', state: 'error', error: text, file: null };
    uploads.push(upload);
    renderUploads();
  }

  async function startUpload(upload) {
    const conversation = await conversationReady();
    if (!uploads.includes(upload)) return;   // removed meanwhile
    const body = new FormData();
    body.append('file', upload.file, upload.name);
    body.append('conversation_id', conversation);
    const xhr = new XMLHttpRequest();
    upload.xhr = xhr;
    xhr.open('POST', '/api/attachments');
    const headers = authHeaders();
    for (const [k, v] of Object.entries(headers)) xhr.setRequestHeader(k, v);
    xhr.upload.addEventListener('progress', (ev) => {
      if (!ev.lengthComputable) return;
      upload.loaded = ev.loaded;
      upload.total = ev.total;
      updateUpload(upload);
    });
    xhr.upload.addEventListener('load', () => {
      upload.state = 'reading';
      updateUpload(upload);
    });
    xhr.addEventListener('load', () => {
      upload.xhr = null;
      let data = null;
      try { data = JSON.parse(xhr.responseText); } catch (_) { data = null; }
      if (xhr.status === 200 && data && data.id) {
        attachmentReady(upload, data);
      } else if (xhr.status === 504 && data && data.attachment_id) {
        upload.id = String(data.attachment_id);
        upload.state = 'reading';
        updateUpload(upload);
        pollAttachment(upload, 0);
      } else {
        upload.state = 'error';
        upload.error = uploadError(xhr.status, data);
        renderUploads();
      }
    });
    xhr.addEventListener('error', () => {
      upload.xhr = null;
      upload.state = 'error';
      upload.error = 'The upload failed. Check your connection and try again.';
      renderUploads();
    });
    xhr.send(body);
  }

  function uploadError(status, data) {
    const detail = detailOf(data, status);
    if (status === 413) return `Too large: ${detail}`;
    if (status === 415) return `Not a supported file: ${detail}`;
    if (status === 422) return `Could not read the file: ${detail}`;
    return detail;
  }

  async function pollAttachment(upload, attempt) {
    if (!uploads.includes(upload) || attempt > 60) {
      if (uploads.includes(upload)) {
        upload.state = 'error';
        upload.error = 'Reading the file took too long. Please try again.';
        renderUploads();
      }
      return;
    }
    try {
      const res = await fetch(`/api/attachments/${encodeURIComponent(upload.id)}`, {
        headers: authHeaders(), credentials: 'same-origin', cache: 'no-store',
      });
      if (res.ok) {
        const data = await res.json();
        if (data && data.status === 'ready') { attachmentReady(upload, data); return; }
      } else if (res.status !== 404 && res.status < 500) {
        upload.state = 'error';
        upload.error = uploadError(res.status, await res.json().catch(() => null));
        renderUploads();
        return;
      }
    } catch (_) { /* try again */ }
    setTimeout(() => pollAttachment(upload, attempt + 1), 2000);
  }

  function attachmentReady(upload, data) {
    upload.state = 'ready';
    upload.id = String(data.id);
    upload.summary = {
      kind: data.kind === 'image' ? 'image' : 'log',
      bytes: Number(data.bytes) || 0,
      signatures: Array.isArray(data.signatures) ? data.signatures.map(str).filter(Boolean) : [],
      excerpt: str(data.text_excerpt),
    };
    renderUploads();
  }

  function removeUpload(upload) {
    const i = uploads.indexOf(upload);
    if (i >= 0) uploads.splice(i, 1);
    if (upload.xhr) upload.xhr.abort();
    renderUploads();
    input.focus();
  }

  function uploadStatusText(u) {
    if (u.state === 'uploading') {
      const pct = u.total ? Math.round((100 * u.loaded) / u.total) : 0;
      return `Uploading… ${pct}%`;
    }
    if (u.state === 'reading') return u.file && u.file.type.startsWith('image/') ? 'Reading the text in the image…' : 'Reading the file…';
    if (u.state === 'ready') {
      const s = u.summary;
      const found = s.signatures.length
        ? `found ${s.signatures.slice(0, 3).join(', ')}${s.signatures.length > 3 ? '…' : ''}`
        : (s.kind === 'image' ? 'text read' : 'lines read');
      return `Ready · ${formatBytes(s.bytes)} · ${found}`;
    }
    return u.error || 'The upload failed.';
  }

  function renderUploads() {
    attachmentsEl.replaceChildren();
    attachmentsEl.hidden = uploads.length === 0;
    for (const u of uploads) {
      const chip = h('li', `upload upload-${u.state}`);
      chip.dataset.state = u.state;
      u.chip = chip;
      const head = h('div', 'upload-head');
      head.append(fileIcon(u.summary ? u.summary.kind : (u.file && u.file.type.startsWith('image/') ? 'image' : 'log')));
      if (u.name) head.append(h('span', 'upload-name', u.name));
      const remove = button('upload-remove', '×', () => removeUpload(u));
      remove.setAttribute('aria-label', u.name ? `Remove ${u.name}` : 'Dismiss');
      head.append(remove);
      const status = h('p', 'upload-status', uploadStatusText(u));
      if (u.state === 'error') status.setAttribute('role', 'alert');
      u.statusEl = status;
      chip.append(head);
      if (u.state === 'uploading' || u.state === 'reading') {
        const bar = h('div', 'bar upload-bar' + (u.state === 'uploading' ? ' is-determinate' : ''));
        bar.setAttribute('role', 'progressbar');
        bar.setAttribute('aria-label', `Upload of ${u.name}`);
        const fill = h('span', 'bar-fill');
        bar.append(fill);
        u.barEl = bar;
        chip.append(bar);
      }
      chip.append(status);
      attachmentsEl.append(chip);
      updateUpload(u, true);
    }
    updateComposer();
  }

  function updateUpload(u, inRender) {
    if (!inRender && (!u.chip || !u.chip.isConnected || u.chip.dataset.state !== u.state)) {
      renderUploads();
      return;
    }
    if (u.statusEl) u.statusEl.textContent = uploadStatusText(u);
    if (u.barEl && u.state === 'uploading') {
      const pct = u.total ? Math.round((100 * u.loaded) / u.total) : 0;
      u.barEl.setAttribute('aria-valuemin', '0');
      u.barEl.setAttribute('aria-valuemax', '100');
      u.barEl.setAttribute('aria-valuenow', String(pct));
      u.barEl.firstChild.style.width = `${pct}%`;
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Composer

  function autoGrow() {
    input.style.height = 'auto';
    const max = Math.round(window.innerHeight * 0.35);
    input.style.height = `${Math.min(input.scrollHeight + 2, Math.max(max, 96))}px`;
  }

  function uploadsBusy() {
    return uploads.some((u) => u.state === 'uploading' || u.state === 'reading');
  }

  function updateComposer() {
    const len = utf8Bytes(input.value);
    const withFiles = uploads.some((u) => u.state === 'ready');
    sendBtn.disabled = (!input.value.trim() && !withFiles) || len > MAX_BYTES || uploadsBusy();
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
    const done = uploads.filter((u) => u.state === 'ready');
    const opts = {
      attachments: done.map((u) => u.id),
      files: done.map((u) => ({ name: u.name, kind: u.summary.kind })),
    };
    if (submitText(input.value, opts)) {
      input.value = '';
      // Sent files leave the composer; failed ones stay until dismissed.
      for (const u of done) uploads.splice(uploads.indexOf(u), 1);
      renderUploads();
      updateComposer();
    }
  }

  function askForPerson() {
    submitText('', { requestTicket: true, label: TICKET_LABEL });
    input.focus();
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
  input.addEventListener('paste', (ev) => {
    // A screenshot pasted from the clipboard is attached like a chosen file.
    const files = ev.clipboardData ? Array.from(ev.clipboardData.files || []) : [];
    if (files.length) {
      ev.preventDefault();
      addFiles(files);
    }
  });
  window.addEventListener('resize', autoGrow);
  newChatBtn.addEventListener('click', newConversation);
  ticketBtn.addEventListener('click', askForPerson);
  attachBtn.addEventListener('click', () => fileInput.click());
  fileInput.addEventListener('change', () => {
    addFiles(fileInput.files);
    fileInput.value = '';
    input.focus();
  });

  // Drag and drop anywhere on the chat.
  let dragDepth = 0;
  const hasFiles = (ev) => ev.dataTransfer && Array.from(ev.dataTransfer.types || []).includes('Files');
  appEl.addEventListener('dragenter', (ev) => {
    if (!hasFiles(ev)) return;
    ev.preventDefault();
    dragDepth++;
    dropZone.hidden = false;
  });
  appEl.addEventListener('dragover', (ev) => {
    if (!hasFiles(ev)) return;
    ev.preventDefault();
    ev.dataTransfer.dropEffect = 'copy';
  });
  appEl.addEventListener('dragleave', () => {
    dragDepth = Math.max(0, dragDepth - 1);
    if (!dragDepth) dropZone.hidden = true;
  });
  appEl.addEventListener('drop', (ev) => {
    if (!hasFiles(ev)) return;
    ev.preventDefault();
    dragDepth = 0;
    dropZone.hidden = true;
    addFiles(ev.dataTransfer.files);
    input.focus();
  });

  const skip = document.querySelector('.skip-link');
  if (skip) skip.addEventListener('click', (ev) => { ev.preventDefault(); input.focus(); });
  window.addEventListener('online', reconnectNow);
  document.addEventListener('visibilitychange', () => {
    if (document.visibilityState === 'visible') reconnectNow();
  });

  // ---------------------------------------------------------------------------------------------
  // Embedded in a host page (embed.js): the token comes from the parent window

  let started = false;
  function start() {
    if (started) return;
    started = true;
    connect();
  }

  if (embedded) {
    document.documentElement.classList.add('is-embedded');
    const closeBtn = $('close-btn');
    closeBtn.hidden = false;
    closeBtn.addEventListener('click', () => window.parent.postMessage({ type: 'deskpilot:close' }, '*'));
    window.addEventListener('message', (ev) => {
      if (ev.source !== window.parent) return;
      const data = ev.data;
      if (!data || typeof data !== 'object') return;
      if (data.type === 'deskpilot:token') {
        const next = typeof data.token === 'string' && data.token.length < 8192 ? data.token : null;
        const changed = next !== token;
        token = next;
        if (!started) start();
        else if (changed) reconnectFresh();
      } else if (data.type === 'deskpilot:focus') {
        input.focus();
      }
    });
    document.addEventListener('keydown', (ev) => {
      if (ev.key === 'Escape' && !ev.defaultPrevented) {
        window.parent.postMessage({ type: 'deskpilot:close' }, '*');
      }
    });
    window.parent.postMessage({ type: 'deskpilot:ready' }, '*');
  }

  // ---------------------------------------------------------------------------------------------
  // Start

  renderWelcome();
  restoreTranscript();
  renderUploads();
  updateComposer();
  if (expectToken) setTimeout(start, TOKEN_WAIT_MS);   // the host page said a token will come
  else start();
})();
