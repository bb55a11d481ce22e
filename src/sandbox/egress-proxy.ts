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
 */
import { rmSync } from 'node:fs'
import http from 'node:http'
import https from 'node:https'
import net from 'node:net'
import type { Logger } from 'pino'
import type { SandboxRefusal } from '../metrics/sink.js'
import type { HeldCredentials } from './api-credentials.js'
import { allowedApiPath } from './api-paths.js'
import { type Destination, destinationText, parseDestination } from './destinations.js'
import { relayHttp } from './http-relay.js'

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
}

const REFUSED = 'egress not allowed by the gateway sandbox\n'

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
  readonly #api: EgressProxyOptions['api']
  readonly #onRefused: (kind: SandboxRefusal) => void
  /** Keeps the connection to the API open between the CLI's requests (no TLS handshake per model call). */
  readonly #apiAgent: http.Agent | null
  #closed: Promise<void> | null = null

  constructor (options: EgressProxyOptions) {
    this.socketPath = options.socketPath
    this.#allow = new Set(options.allow.map(destinationText))
    this.#log = options.logger.child({ session: options.sessionId })
    this.#api = options.api
    this.#onRefused = options.onRefused ?? (() => {})
    const held = options.api?.held
    this.#apiAgent = held === undefined
      ? null
      : held.upstream.protocol === 'https:' ? new https.Agent({ keepAlive: true, ...held.tls }) : new http.Agent({ keepAlive: true })
    this.#server = http.createServer((req, res) => this.#forward(req, res))
    this.#server.on('connect', (req: http.IncomingMessage, socket: net.Socket, head: Buffer) => this.#tunnel(req, socket, head))
    this.#server.on('connection', (socket: net.Socket) => this.#track(socket))
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

  #track (socket: net.Socket): void {
    this.#sockets.add(socket)
    socket.once('close', () => this.#sockets.delete(socket))
    socket.on('error', () => socket.destroy())
  }

  #allowed (d: Destination | null, what: string): d is Destination {
    if (d !== null && this.#allow.has(destinationText(d))) return true
    this.#log.warn({ destination: d === null ? what : destinationText(d) }, 'sandbox egress refused (not in SANDBOX_EGRESS)')
    this.#onRefused('egress')
    return false
  }

  #tunnel (req: http.IncomingMessage, socket: net.Socket, head: Buffer): void {
    this.#track(socket)
    const target = req.url ?? ''
    const d = parseDestination(target, 0)
    if (!this.#allowed(d, target)) {
      socket.end(`HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nContent-Length: ${REFUSED.length}\r\nConnection: close\r\n\r\n${REFUSED}`)
      return
    }
    const upstream = net.connect({ host: d.host, port: d.port })
    this.#track(upstream)
    upstream.once('connect', () => {
      socket.write('HTTP/1.1 200 Connection Established\r\n\r\n')
      if (head.length > 0) upstream.write(head)
      socket.pipe(upstream)
      upstream.pipe(socket)
    })
    upstream.once('error', (err) => {
      this.#log.info({ err, destination: target }, 'sandbox egress connect failed')
      if (socket.writable) socket.end('HTTP/1.1 502 Bad Gateway\r\nConnection: close\r\n\r\n')
    })
    socket.once('close', () => upstream.destroy())
    upstream.once('close', () => socket.destroy())
  }

  #forward (req: http.IncomingMessage, res: http.ServerResponse): void {
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
      res.writeHead(403, { 'content-type': 'text/plain', 'content-length': REFUSED.length, connection: 'close' }).end(REFUSED)
      return
    }
    url.username = ''
    url.password = ''
    relayHttp(req, res, { url, label: destinationText(d) }, this.#log)
  }

  /** `path` (with its query) on the real API, the held credential in place of the placeholder. */
  #toApi (req: http.IncomingMessage, res: http.ServerResponse, held: HeldCredentials, path: string): void {
    const url = new URL(held.upstream.href)
    url.pathname = url.pathname.replace(/\/+$/, '') + path.replace(/\?.*$/s, '')
    url.search = path.includes('?') ? path.slice(path.indexOf('?')) : ''
    relayHttp(req, res, {
      url,
      drop: CREDENTIAL_HEADERS,
      set: { host: url.host, ...held.headers() },
      agent: this.#apiAgent ?? undefined,
      label: held.upstream.host
    }, this.#log)
  }
}
