/**
 * The few REST calls claude-remote makes: create a session, read one (to
 * check `--resume` options), delete one (which stops its CLI). A 401 is
 * tried once more when the token file holds a newer token.
 */
import type { RemoteEnv } from './remote-env.js'

export class GatewayHttpError extends Error {
  constructor (readonly status: number, readonly code: string, message: string) {
    super(message)
  }
}

export class GatewayApi {
  readonly #env: RemoteEnv

  constructor (env: RemoteEnv) {
    this.#env = env
  }

  createSession (options: Record<string, unknown>): Promise<Record<string, unknown>> {
    return this.#call('POST', '/v1/sessions', options)
  }

  getSession (id: string): Promise<Record<string, unknown>> {
    return this.#call('GET', `/v1/sessions/${encodeURIComponent(id)}`)
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
      throw new GatewayHttpError(0, 'unreachable', `${method} ${path}: the gateway at ${this.#env.httpUrl} did not answer (${cause})`)
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
      throw new GatewayHttpError(res.status, code, `${method} ${path}: ${res.status} ${code}: ${message}`)
    }
    return parsed
  }
}
