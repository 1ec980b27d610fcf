// The HTTP API as the dashboard calls it: the key entered once, kept for this browser tab
// (sessionStorage), sent as "Authorization: Bearer" exactly like any other client.
const KEY_NAME = "poolq.apiKey";

export class ApiError extends Error {
  constructor(status, detail) {
    super(detail);
    this.status = status;
  }
}

export function storedKey() {
  return sessionStorage.getItem(KEY_NAME);
}

export function keepKey(key) {
  sessionStorage.setItem(KEY_NAME, key);
}

export function forgetKey() {
  sessionStorage.removeItem(KEY_NAME);
}

// Paths are relative to the page (/ui), so the dashboard works behind a proxy's prefix too.
function url(path) {
  return new URL(path.replace(/^\//, ""), document.baseURI).toString();
}

async function call(method, path) {
  const response = await fetch(url(path), {
    method,
    headers: { Authorization: `Bearer ${storedKey() || ""}`, Accept: "application/json" },
    cache: "no-store",
  });
  const body = response.status === 204 ? null : await response.json().catch(() => null);
  if (!response.ok) {
    throw new ApiError(response.status, describe(body, response));
  }
  return body;
}

// 422s carry a list of {loc, msg}; every other error answer has a "detail" string, but for those of
// OpenAI's routes (GET /v1/models): {"error": {"message", ...}}.
function describe(body, response) {
  const detail = body && (body.detail || (body.error && body.error.message));
  if (Array.isArray(detail)) {
    return detail.map((item) => `${(item.loc || []).join(".")}: ${item.msg}`).join("; ");
  }
  return detail || `${response.status} ${response.statusText}`;
}

export const api = {
  jobs: (limit = 50, before = null) => call("GET", `v1/jobs?limit=${limit}${before ? `&before=${before}` : ""}`),
  job: (id) => call("GET", `v1/jobs/${encodeURIComponent(id)}`),
  spec: (id) => call("GET", `v1/jobs/${encodeURIComponent(id)}/spec`),
  results: (id) => call("GET", `v1/jobs/${encodeURIComponent(id)}/results`),
  errorSamples: (id) => call("GET", `v1/jobs/${encodeURIComponent(id)}/error-samples`),
  cancel: (id) => call("POST", `v1/jobs/${encodeURIComponent(id)}/cancel`),
  schedules: () => call("GET", "v1/schedules"),
  models: () => call("GET", "v1/models"),
};
