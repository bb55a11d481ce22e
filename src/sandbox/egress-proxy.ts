/**
 * The only way out of a sandbox's network namespace: an HTTP proxy on a Unix
 * socket, one per running CLI, bound into its sandbox (a socat inside turns
 * it into 127.0.0.1:<port> for HTTPS_PROXY). It tunnels `CONNECT host:port`
 * and forwards absolute-form plain-HTTP requests, but only to the allowed
 * destinations; anything else gets 403 and a log line naming the session.
 * The gateway connects on the sandbox's behalf, so Redis, the gateway's own
 * ports and the rest of the host network stay out of reach.
 *
 * With credentials held (SANDBOX_CREDENTIALS=proxy, api-credentials.ts) it
 * is also the CLI's API: requests addressed to the proxy itself (origin form,
 * or absolute form to 127.0.0.1/localhost:<its port>) go to the real API,
 * their credential headers replaced by the real ones, if their path is one
 * the CLI may call (SANDBOX_API_PATHS, api-paths.ts).
 *
 * Every connection the tool opens here and every one the proxy opens for it
 * takes a slot of its tenant's (`slots`): past the tenant's share, the next
 * is answered 503, so no tenant holds the descriptors the others need.
 */
import { rmSync } from 'node:fs'
import http from 'node:http'
import https from 'node:https'
import net from 'node:net'
import type { Logger } from 'pino'
import type { SandboxRefusal } from '../metrics/sink.js'
import { ADDRESS_NOT_ALLOWED, guardedLookup } from '../net/guarded-lookup.js'
import type { HeldCredentials } from './api-credentials.js'
import { allowedApiPath } from './api-paths.js'
import { type Destination, destinationText, parseDestination } from './destinations.js'
import { type RelayTarget, relayHttp, whenAnswerDone } from './http-relay.js'

export interface EgressProxyOptions {
  socketPath: string
  allow: readonly Destination[]
  logger: Logger
  sessionId: string
  /**
   * The API credential the gateway holds for this CLI, the port the proxy
   * has inside the sandbox, and the API paths it may be used on.
   */
  api?: { held: HeldCredentials, port: number, paths: readonly string[] } | undefined
  /** Told of each refusal (the gateway's metrics). */
  onRefused?: ((kind: SandboxRefusal) => void) | undefined
  /** Takes one of the tenant's connection slots (its release), or null when the tenant holds its share; default: unlimited. */
  slots?: (() => (() => void) | null) | undefined
}

const REFUSED = 'egress not allowed by the gateway sandbox\n'
const BUSY = 'too many connections from this tenant\'s sandboxes\n'
const BUSY_ANSWER = `HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nContent-Length: ${BUSY.length}\r\nConnection: close\r\n\r\n${BUSY}`
/** Idle upstream connections kept per proxy: enough for the CLI's next calls, never a pile a tool built up. */
const FREE_API_SOCKETS = 4

/** The credential headers a CLI with a placeholder sends: never passed on, the held ones replace them (Host is set anew). */
const CREDENTIAL_HEADERS = new Set(['x-api-key', 'authorization'])
/** Names the proxy has inside its sandbox. */
const SELF_HOSTS = new Set(['127.0.0.1', 'localhost', '[::1]'])

export class EgressProxy {
  readonly socketPath: string
  readonly #server: http.Server
  readonly #allow: Set<string>
  readonly #log: Logger
  readonly #sockets = new Set<net.Socket>()
  /** Connections refused at accept: a request already on its way in them is dropped, never passed on. */
  readonly #turnedAway = new WeakSet<net.Socket>()
  readonly #api: EgressProxyOptions['api']
  readonly #onRefused: (kind: SandboxRefusal) => void
  readonly #slots: () => (() => void) | null
  /** Keeps the connection to the API open between the CLI's requests (no TLS handshake per model call). */
  readonly #apiAgent: http.Agent | null
  #closed: Promise<void> | null = null

  constructor (options: EgressProxyOptions) {
    this.socketPath = options.socketPath
    this.#allow = new Set(options.allow.map(destinationText))
    this.#log = options.logger.child({ session: options.sessionId })
    this.#api = options.api
    this.#onRefused = options.onRefused ?? (() => {})
    this.#slots = options.slots ?? (() => () => {})
    const held = options.api?.held
    this.#apiAgent = held === undefined
      ? null
      : held.upstream.protocol === 'https:'
        ? new https.Agent({ keepAlive: true, maxFreeSockets: FREE_API_SOCKETS, ...held.tls })
        : new http.Agent({ keepAlive: true, maxFreeSockets: FREE_API_SOCKETS })
    this.#server = http.createServer((req, res) => this.#forward(req, res))
    this.#server.on('connect', (req: http.IncomingMessage, socket: net.Socket, head: Buffer) => this.#tunnel(req, socket, head))
    this.#server.on('connection', (socket: net.Socket) => this.#accept(socket))
    this.#server.on('error', (err) => this.#log.error({ err, socket: this.socketPath }, 'egress proxy error'))
    rmSync(this.socketPath, { force: true })
    // Bound and listening once this returns (a Unix socket binds synchronously), before the sandbox starts.
    this.#server.listen(this.socketPath)
  }

  /** Stops listening and ends every connection still open (the CLI is gone). */
  close (): Promise<void> {
    this.#closed ??= new Promise((resolve) => {
      this.#server.close(() => resolve())
      for (const s of this.#sockets) s.destroy()
      this.#apiAgent?.destroy()
    })
    return this.#closed
  }

  /** A connection from the sandbox: it holds a slot until it closes, or is refused with 503 when there is none. */
  #accept (socket: net.Socket): void {
    this.#track(socket)
    const release = this.#take()
    if (release === null) {
      this.#turnedAway.add(socket)
      closeWith(socket, BUSY_ANSWER)
      return
    }
    socket.once('close', release)
  }

  #track (socket: net.Socket): void {
    if (this.#sockets.has(socket)) return
    this.#sockets.add(socket)
    socket.once('close', () => this.#sockets.delete(socket))
    socket.on('error', () => socket.destroy())
  }

  #refusedAddress (d: Destination, err: Error): void {
    this.#log.warn({ destination: destinationText(d), reason: err.message }, 'sandbox egress refused (an allowed name resolves to a loopback or link-local address)')
    this.#onRefused('egress')
  }

  /** A slot of the tenant's, or null (logged) when it holds its share. */
  #take (): (() => void) | null {
    const release = this.#slots()
    if (release === null) {
      this.#log.warn('sandbox egress refused: the tenant holds its share of relay connections')
      this.#onRefused('connections')
    }
    return release
  }

  #allowed (d: Destination | null, what: string): d is Destination {
    if (d !== null && this.#allow.has(destinationText(d))) return true
    this.#log.warn({ destination: d === null ? what : destinationText(d) }, 'sandbox egress refused (not in SANDBOX_EGRESS)')
    this.#onRefused('egress')
    return false
  }

  #tunnel (req: http.IncomingMessage, socket: net.Socket, head: Buffer): void {
    if (this.#turnedAway.has(socket)) return
    this.#track(socket)
    const target = req.url ?? ''
    const d = parseDestination(target, 0)
    if (!this.#allowed(d, target)) {
      closeWith(socket, `HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nContent-Length: ${REFUSED.length}\r\nConnection: close\r\n\r\n${REFUSED}`)
      return
    }
    const release = this.#take()
    if (release === null) {
      closeWith(socket, BUSY_ANSWER)
      return
    }
    const upstream = net.connect({ host: d.host, port: d.port, ...lookupFor(d) })
    this.#track(upstream)
    upstream.once('close', release)
    upstream.once('connect', () => {
      socket.write('HTTP/1.1 200 Connection Established\r\n\r\n')
      if (head.length > 0) upstream.write(head)
      socket.pipe(upstream)
      upstream.pipe(socket)
    })
    upstream.once('error', (err: NodeJS.ErrnoException) => {
      if (err.code === ADDRESS_NOT_ALLOWED) {
        this.#refusedAddress(d, err)
        if (socket.writable) closeWith(socket, `HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nContent-Length: ${REFUSED.length}\r\nConnection: close\r\n\r\n${REFUSED}`)
        return
      }
      this.#log.info({ err, destination: target }, 'sandbox egress connect failed')
      if (socket.writable) socket.end('HTTP/1.1 502 Bad Gateway\r\nConnection: close\r\n\r\n')
    })
    socket.once('close', () => upstream.destroy())
    upstream.once('close', () => socket.destroy())
  }

  #forward (req: http.IncomingMessage, res: http.ServerResponse): void {
    if (this.#turnedAway.has(req.socket)) {
      req.socket.destroy()
      return
    }
    const target = req.url ?? ''
    let url: URL | null = null
    try { url = new URL(target) } catch { /* origin form: addressed to the proxy itself */ }
    if (this.#api !== undefined && (url === null ? target.startsWith('/') : SELF_HOSTS.has(url.hostname) && Number(url.port) === this.#api.port)) {
      const method = req.method ?? 'GET'
      const path = allowedApiPath(method, url === null ? target : url.pathname + url.search, this.#api.paths)
      if (path === null) {
        this.#log.warn({ method, path: target }, 'sandbox API request refused: not a path the CLI may call with the held credential (SANDBOX_API_PATHS)')
        this.#onRefused('api_path')
        const body = JSON.stringify({
          type: 'error',
          error: { type: 'permission_error', message: `claude-gateway: ${method} on this path is not allowed from a sandbox (SANDBOX_API_PATHS)` }
        })
        res.writeHead(403, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }).end(body)
        req.resume()
        return
      }
      this.#toApi(req, res, this.#api.held, path)
      return
    }
    const port = url === null ? 0 : url.port === '' ? 80 : Number(url.port)
    const d = url?.protocol === 'http:' ? parseDestination(`${url.hostname}:${port}`) : null
    if (!this.#allowed(d, target) || url === null) {
      // The connection stays: the answers of requests pipelined after this one still come, in order.
      res.writeHead(403, { 'content-type': 'text/plain', 'content-length': REFUSED.length }).end(REFUSED)
      req.resume()
      return
    }
    url.username = ''
    url.password = ''
    // The request goes where its target says, so its Host says so too (RFC 9112 §3.2.2), whatever the tool put there.
    this.#relay(req, res, { url, set: { host: url.host }, label: destinationText(d), ...lookupFor(d), onRefused: (err) => this.#refusedAddress(d, err) })
  }

  /** One request upstream, holding a slot of the tenant's until its answer is done: pipelined requests each take one. */
  #relay (req: http.IncomingMessage, res: http.ServerResponse, target: RelayTarget): void {
    const release = this.#take()
    if (release === null) {
      res.writeHead(503, { 'content-type': 'text/plain', 'content-length': BUSY.length }).end(BUSY)
      req.resume()
      return
    }
    whenAnswerDone(req, res, release)
    relayHttp(req, res, target, this.#log)
  }

  /** `path` (with its query) on the real API, the held credential in place of the placeholder. */
  #toApi (req: http.IncomingMessage, res: http.ServerResponse, held: HeldCredentials, path: string): void {
    const url = new URL(held.upstream.href)
    url.pathname = url.pathname.replace(/\/+$/, '') + path.replace(/\?.*$/s, '')
    url.search = path.includes('?') ? path.slice(path.indexOf('?')) : ''
    this.#relay(req, res, {
      url,
      drop: CREDENTIAL_HEADERS,
      set: { host: url.host, ...held.headers() },
      agent: this.#apiAgent ?? undefined,
      label: held.upstream.host
    })
  }
}

/** An allowed name is resolved through the guard; `localhost` means loopback by itself, and IP literals are never looked up. */
function lookupFor (d: Destination): { lookup?: net.LookupFunction } {
  return d.host === 'localhost' ? {} : { lookup: guardedLookup }
}

/** Answers `text` and closes: a sandbox that never closes its side must not keep the connection (the server allows half-open ones). */
function closeWith (socket: net.Socket, text: string): void {
  socket.end(text, () => socket.destroy())
}
