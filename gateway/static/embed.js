/* Deskpilot embed: a floating "IT help" launcher that opens the chat in a panel on any page.
 *
 * One line on the host page (a SharePoint modern page through a Script Editor or Embed web part,
 * an intranet, any HTML page):
 *
 *   <script src="https://deskpilot.example.com/static/embed.js" data-deskpilot async></script>
 *
 * Optional attributes on that tag:
 *   data-label="IT help"        the launcher's text
 *   data-position="left"        bottom-left instead of bottom-right
 *   data-open                   open the panel at once
 *   data-token="<JWT>"          a signed user token (see GATEWAY_JWT_*); without one the chat is
 *                               anonymous. A page that gets its token later calls
 *                               window.Deskpilot.setToken(token), or posts
 *                               window.postMessage({type: "deskpilot:set-token", token}, location.origin).
 * window.Deskpilot also has open(), close() and toggle().
 *
 * Or, without a script, the chat as an iframe:
 *
 *   <iframe src="https://deskpilot.example.com/?embed=1" title="IT help chat"
 *           style="width:400px;height:640px;border:0"></iframe>
 *
 * Either way the host page's origin must be in GATEWAY_FRAME_ANCESTORS, which the gateway sends
 * as the CSP frame-ancestors of the chat.
 *
 * The launcher depends on nothing of the host page: it lives in a shadow root with its
 * own styles (a constructed stylesheet, so a host CSP without 'unsafe-inline' styles does not
 * block it), and the chat runs in an iframe on the gateway's origin. The token is only ever
 * posted to that origin.
 */
(() => {
  'use strict';

  if (window.Deskpilot && window.Deskpilot.version) return; // loaded twice: keep the first

  const script = document.currentScript || document.querySelector('script[data-deskpilot]');
  if (!script || !script.src) return;
  const chatOrigin = new URL(script.src, window.location.href).origin;
  const label = script.getAttribute('data-label') || 'IT help';
  const left = script.getAttribute('data-position') === 'left';
  let token = script.getAttribute('data-token') || null;

  const CSS = `
    :host { all: initial; }
    .launcher {
      position: fixed; bottom: 20px; ${left ? 'left' : 'right'}: 20px; z-index: 2147483000;
      display: inline-flex; align-items: center; gap: 8px;
      min-height: 48px; padding: 0 18px 0 14px; border: 0; border-radius: 999px;
      background: #1d4ed8; color: #fff; cursor: pointer;
      font: 600 15px/1 system-ui, -apple-system, "Segoe UI", Roboto, Arial, sans-serif;
      box-shadow: 0 6px 20px rgba(16, 24, 40, 0.25);
    }
    .launcher:hover { background: #1a43bb; }
    .launcher:focus-visible { outline: 3px solid #1d4ed8; outline-offset: 3px; }
    .launcher svg { width: 22px; height: 22px; }
    .panel {
      position: fixed; bottom: 80px; ${left ? 'left' : 'right'}: 20px; z-index: 2147483000;
      width: min(420px, calc(100vw - 24px)); height: min(680px, calc(100vh - 100px));
      border-radius: 16px; overflow: hidden; background: #fff;
      box-shadow: 0 12px 40px rgba(16, 24, 40, 0.3);
    }
    .panel[hidden] { display: none; }
    iframe { display: block; width: 100%; height: 100%; border: 0; }
    @media (max-width: 480px) {
      .panel { inset: 0; width: 100vw; height: 100vh; height: 100dvh; border-radius: 0; }
      .launcher.is-open { display: none; }
    }
  `;

  const host = document.createElement('div');
  host.setAttribute('data-deskpilot-embed', '');
  const root = host.attachShadow({ mode: 'open' });
  try {
    const sheet = new CSSStyleSheet();
    sheet.replaceSync(CSS);
    root.adoptedStyleSheets = [sheet];
  } catch (_) {
    const style = document.createElement('style');   // browsers without constructed sheets
    style.textContent = CSS;
    root.append(style);
  }

  const launcher = document.createElement('button');
  launcher.type = 'button';
  launcher.className = 'launcher';
  launcher.setAttribute('aria-expanded', 'false');
  launcher.setAttribute('aria-controls', 'deskpilot-panel');
  const svgNs = 'http://www.w3.org/2000/svg';
  const icon = document.createElementNS(svgNs, 'svg');
  icon.setAttribute('viewBox', '0 0 24 24');
  icon.setAttribute('aria-hidden', 'true');
  const path = document.createElementNS(svgNs, 'path');
  path.setAttribute('d', 'M4 5h16v11H9l-5 4V5z');
  path.setAttribute('fill', 'none');
  path.setAttribute('stroke', 'currentColor');
  path.setAttribute('stroke-width', '2');
  path.setAttribute('stroke-linejoin', 'round');
  icon.append(path);
  const text = document.createElement('span');
  text.textContent = label;
  launcher.append(icon, text);

  const panel = document.createElement('div');
  panel.className = 'panel';
  panel.id = 'deskpilot-panel';
  panel.hidden = true;
  panel.setAttribute('role', 'dialog');
  panel.setAttribute('aria-label', `${label} chat`);

  let frame = null;
  let frameReady = false;

  function chatUrl() {
    const url = new URL('/', chatOrigin);
    url.searchParams.set('embed', '1');
    if (token) url.searchParams.set('auth', '1');   // the chat waits for the token, not in the URL
    return url.href;
  }

  function postToken() {
    if (frame && frameReady && frame.contentWindow) {
      frame.contentWindow.postMessage({ type: 'deskpilot:token', token }, chatOrigin);
    }
  }

  function ensureFrame() {
    if (frame) return;
    frame = document.createElement('iframe');
    frame.src = chatUrl();
    frame.title = `${label} chat`;
    frame.setAttribute('allow', 'clipboard-write');
    frame.setAttribute('referrerpolicy', 'strict-origin-when-cross-origin');
    panel.append(frame);
  }

  function open() {
    ensureFrame();
    panel.hidden = false;
    launcher.classList.add('is-open');
    launcher.setAttribute('aria-expanded', 'true');
    if (frameReady) {
      frame.focus();
      frame.contentWindow.postMessage({ type: 'deskpilot:focus' }, chatOrigin);
    }
  }

  function close() {
    panel.hidden = true;
    launcher.classList.remove('is-open');
    launcher.setAttribute('aria-expanded', 'false');
    launcher.focus();
  }

  function toggle() {
    if (panel.hidden) open(); else close();
  }

  function setToken(next) {
    token = typeof next === 'string' && next ? next : null;
    postToken();
  }

  launcher.addEventListener('click', toggle);

  window.addEventListener('message', (ev) => {
    const data = ev.data;
    if (!data || typeof data !== 'object') return;
    if (frame && ev.source === frame.contentWindow && ev.origin === chatOrigin) {
      if (data.type === 'deskpilot:ready') {
        frameReady = true;
        postToken();
        if (!panel.hidden) frame.contentWindow.postMessage({ type: 'deskpilot:focus' }, chatOrigin);
      } else if (data.type === 'deskpilot:close') {
        close();
      }
    } else if (ev.source === window && ev.origin === window.location.origin
      && data.type === 'deskpilot:set-token') {
      setToken(data.token);
    }
  });

  root.append(launcher, panel);
  const mount = () => {
    document.body.append(host);
    if (script.hasAttribute('data-open')) open();
  };
  if (document.body) mount();
  else document.addEventListener('DOMContentLoaded', mount);

  window.Deskpilot = { version: 1, open, close, toggle, setToken };
})();
