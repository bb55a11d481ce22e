/**
 * The few REST calls claude-remote makes: create a session, read one (to
 * check `--resume` options), list them (to find a create whose answer was
 * lost), delete one (which stops its CLI). A 401 is tried once more when the
 * token file holds a newer token.
 */
import type { RemoteEnv } from './remote-env.js'

/** How long a create's answer is waited for. */
const CREATE_TIMEOUT_MS = 30_000

/** Failures that happen before a request's first byte leaves: the gateway never saw it. */
const NOT_SENT = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'EADDRNOTAVAIL'])

export class GatewayHttpError extends Error {
  /** `maybeArrived`: no answer came, but the request may have reached the gateway (a timeout, a connection cut mid-call). */
  constructor (readonly status: number, readonly code: string, message: string, readonly maybeArrived = false) {
    super(message)
  }
}

export class GatewayApi {
  readonly #env: RemoteEnv

  constructor (env: RemoteEnv) {
    this.#env = env
  }

  /** `timeoutMs`: how long the answer is waited for (CREATE_TIMEOUT_MS unless a test shortens it). */
  createSession (options: Record<string, unknown>, timeoutMs = CREATE_TIMEOUT_MS): Promise<Record<string, unknown>> {
    return this.#call('POST', '/v1/sessions', options, timeoutMs)
  }

  getSession (id: string): Promise<Record<string, unknown>> {
    return this.#call('GET', `/v1/sessions/${encodeURIComponent(id)}`)
  }

  /** One page of the caller's sessions, newest first. */
  listSessions (cursor: string | null, timeoutMs: number): Promise<Record<string, unknown>> {
    const query = cursor === null ? '' : `&cursor=${encodeURIComponent(cursor)}`
    return this.#call('GET', `/v1/sessions?limit=100${query}`, undefined, timeoutMs)
  }

  deleteSession (id: string, timeoutMs: number): Promise<Record<string, unknown>> {
    return this.#call('DELETE', `/v1/sessions/${encodeURIComponent(id)}`, undefined, timeoutMs)
  }

  async #call (method: string, path: string, body?: unknown, timeoutMs = 30_000, again = false): Promise<Record<string, unknown>> {
    let res: Response
    try {
      res = await fetch(this.#env.httpUrl + path, {
        method,
        headers: { authorization: `Bearer ${this.#env.token.value}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(timeoutMs)
      })
    } catch (err) {
      const cause = (err as { cause?: { code?: string } }).cause?.code ?? (err as Error).name
      throw new GatewayHttpError(0, 'unreachable', `${method} ${path}: the gateway at ${this.#env.httpUrl} did not answer (${cause})`, !NOT_SENT.has(cause))
    }
    const text = await res.text()
    // A token file renewed since it was read (an expired JWT): once more with what it holds now.
    if (res.status === 401 && !again && this.#env.token.reread()) return await this.#call(method, path, body, timeoutMs, true)
    let parsed: Record<string, unknown> = {}
    try {
      parsed = text === '' ? {} : JSON.parse(text) as Record<string, unknown>
    } catch {
      // Not the gateway (a proxy's HTML page): reported by status below.
    }
    if (!res.ok) {
      const code = typeof parsed.code === 'string' ? parsed.code : `http_${res.status}`
      const message = typeof parsed.message === 'string' ? parsed.message : text.slice(0, 200)
      // A 5xx that is not the gateway's own error (a proxy that gave up waiting for it): the request may have arrived.
      const fromProxy = res.status >= 500 && typeof parsed.code !== 'string'
      throw new GatewayHttpError(res.status, code, `${method} ${path}: ${res.status} ${code}: ${message}`, fromProxy)
    }
    return parsed
  }
}
