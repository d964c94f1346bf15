// endpointCheck.ts - asks an OpenAI-compatible server which models it serves (GET /v1/models)
// before "K3: Choose … Backend" saves its endpoint, so a typo or a server that is down is
// said at once, in the user's words, and nothing is saved. It reads the listing only as far
// as the model ids; the language server's own check (server/remote/) does the rest once the
// setting is saved. No `vscode` here, so unit tests drive it with a fake fetch.

/** What the check found. */
export type EndpointCheck = { ok: true; models: string[] } | { ok: false; message: string };

/** Most bytes of a listing read here (the server's check allows the same). */
const MAX_LISTING_BYTES = 4 * 1024 ** 2;

/** `endpoint`'s `/v1/models` URL (`/v1` added unless the path ends with it), or why not. */
export function modelsUrl(endpoint: string): URL | string {
  let url: URL;
  try {
    url = new URL(endpoint.trim());
  } catch {
    return `${JSON.stringify(endpoint)} is not a URL (e.g. http://127.0.0.1:8080)`;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return `the endpoint must be an http:// or https:// URL, not ${url.protocol}`;
  url.search = '';
  url.hash = '';
  const p = url.pathname.replace(/\/+$/, '');
  url.pathname = `${p.endsWith('/v1') ? p : `${p}/v1`}/models`;
  return url;
}

/** Asks `endpoint` for its models with `apiKey` (if any), giving up after `timeoutMs`. */
/** Why a fetch failed, as a person reads it: fetch itself says only "fetch failed"; the
 * system's code is in its cause (or, for several addresses tried, in the cause's errors). */
export function networkReason(e: Error): string {
  const cause = (e as { cause?: unknown }).cause as { code?: unknown; errors?: unknown; message?: unknown } | undefined;
  const inner = Array.isArray(cause?.errors) ? (cause.errors[0] as { code?: unknown } | undefined) : undefined;
  const code = typeof cause?.code === 'string' ? cause.code : typeof inner?.code === 'string' ? inner.code : undefined;
  const plain: Record<string, string> = {
    ECONNREFUSED: 'connection refused (is the server running, and listening on that port?)',
    ENOTFOUND: 'no such host',
    EAI_AGAIN: 'the host name could not be resolved now',
    ECONNRESET: 'the connection was reset',
    EHOSTUNREACH: 'the host cannot be reached',
    ETIMEDOUT: 'the connection timed out',
  };
  if (code) return plain[code] ? `${plain[code]} [${code}]` : code;
  return typeof cause?.message === 'string' && cause.message ? cause.message : e.message;
}

export async function checkEndpoint(
  endpoint: string,
  apiKey: string | undefined,
  timeoutMs: number,
  fetchImpl: typeof fetch = fetch,
): Promise<EndpointCheck> {
  const url = modelsUrl(endpoint);
  if (typeof url === 'string') return { ok: false, message: url };
  const where = `GET ${url.href}`;
  let response: Response;
  try {
    response = await fetchImpl(url, {
      headers: apiKey ? { authorization: `Bearer ${apiKey}` } : {},
      signal: AbortSignal.timeout(timeoutMs),
    });
  } catch (e) {
    const err = e as Error;
    if (err.name === 'TimeoutError') return { ok: false, message: `${where} did not answer within ${timeoutMs / 1000} s` };
    return { ok: false, message: `${where} failed: ${networkReason(err)}` };
  }
  if (response.status === 401 || response.status === 403) {
    return { ok: false, message: `${where} refused the API key (HTTP ${response.status}); set it when asked, or with K3: Set Remote API Key` };
  }
  if (!response.ok) return { ok: false, message: `${where} answered HTTP ${response.status}: is this an OpenAI-compatible API?` };
  const text = await response.text();
  if (text.length > MAX_LISTING_BYTES) return { ok: false, message: `${where} sent ${text.length} bytes, more than a model listing holds` };
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return { ok: false, message: `${where} did not answer JSON: is this an OpenAI-compatible API?` };
  }
  const data = (body as { data?: unknown } | null)?.data;
  if (!Array.isArray(data)) return { ok: false, message: `${where} answered without a "data" list of models` };
  const models = data.map((m) => (m as { id?: unknown } | null)?.id).filter((id): id is string => typeof id === 'string' && id !== '');
  if (models.length === 0) return { ok: false, message: `${where} lists no model` };
  return { ok: true, models };
}
