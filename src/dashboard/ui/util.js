// util.js - building the DOM (as text, never as markup) and formatting figures.

// An element: el('td', {class: 'x', title: 't'}, child, 'text', ...). Strings
// become text nodes: nothing the API returns is ever parsed as HTML.
export function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

export function $(id) {
  return document.getElementById(id);
}

export function clear(node) {
  while (node.firstChild) node.removeChild(node.firstChild);
}

export function fmtBytes(n) {
  if (n === undefined || n === null) return '–';
  const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (Math.abs(n) >= 1024 && i < u.length - 1) {
    n /= 1024;
    i++;
  }
  return (i ? n.toFixed(n < 10 ? 1 : 0) : String(n)) + ' ' + u[i];
}

export function fmtSeconds(s) {
  if (s === undefined || s === null || !isFinite(s)) return '–';
  const neg = s < 0;
  s = Math.abs(Math.round(s));
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const x = s % 60;
  const t = h ? `${h}h${String(m).padStart(2, '0')}m` : m ? `${m}m${String(x).padStart(2, '0')}s` : `${x}s`;
  return neg ? '-' + t : t;
}

export function fmtNs(ns) {
  return fmtSeconds(ns / 1e9);
}

// Seconds from now until the RFC 3339 time `ts` (negative: past); NaN when none.
export function secondsUntil(ts) {
  if (!ts) return NaN;
  return (Date.parse(ts) - Date.now()) / 1000;
}

export function fmtTime(ts) {
  if (!ts) return '';
  const i = ts.indexOf('T');
  return i < 0 ? ts : ts.slice(i + 1, i + 13);
}

export function short(id) {
  return id ? String(id).slice(-12) : '';
}

// Debounce: fn runs once, `ms` after the last call.
export function debounce(fn, ms) {
  let t = null;
  return (...a) => {
    clearTimeout(t);
    t = setTimeout(() => fn(...a), ms);
  };
}

// A "k=v" text: [k, v], or null.
export function splitLabel(s) {
  const i = s.indexOf('=');
  return i > 0 ? [s.slice(0, i), s.slice(i + 1)] : null;
}
