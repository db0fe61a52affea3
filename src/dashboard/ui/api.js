// api.js - the REST API, with the operator's token.
//
// SECURITY: the token lives in this module's variable only: never in
// localStorage, sessionStorage, a cookie or the URL. A reload forgets it.
// Requests carry it in the Authorization header, send no cookie
// (credentials: 'omit') and are never cached.

let token = null;

export function setToken(t) {
  token = t;
}

export function signedIn() {
  return token !== null;
}

// An API error: status, the API's error code, field and message.
export class ApiError extends Error {
  constructor(status, code, field, message) {
    super(message);
    this.status = status;
    this.code = code;
    this.field = field;
  }
}

function headers(extra) {
  return Object.assign({ Authorization: 'Bearer ' + token }, extra || {});
}

async function failure(r) {
  const text = await r.text();
  let e = null;
  try {
    e = JSON.parse(text).error;
  } catch (_) {
    /* not the API's error object */
  }
  if (e && typeof e === 'object')
    return new ApiError(r.status, e.code || '', e.field || '', e.message || r.statusText);
  return new ApiError(r.status, '', '', `${r.status} ${r.statusText}`);
}

// METHOD PATH (under the page's own origin) with an optional JSON body: the parsed answer.
export async function api(method, path, body) {
  const init = { method, headers: headers(), credentials: 'omit', cache: 'no-store' };
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const r = await fetch(path, init);
  if (!r.ok) throw await failure(r);
  return r.json();
}

// A streamed GET: the Response, for the event stream's reader (sse.js).
export async function openStream(path, signal) {
  const r = await fetch(path, {
    headers: headers({ Accept: 'text/event-stream' }),
    credentials: 'omit',
    cache: 'no-store',
    signal,
  });
  if (!r.ok) throw await failure(r);
  return r;
}

// A query string from an object; arrays repeat their key, empty values are left out.
export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v === undefined || v === null || v === '') continue;
    for (const x of Array.isArray(v) ? v : [v]) q.append(k, String(x));
  }
  const s = q.toString();
  return s ? '?' + s : '';
}
