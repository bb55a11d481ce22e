/**
 * The only way out of a sandbox's network namespace: an HTTP proxy on a Unix
 * socket, one per running CLI, bound into its sandbox (a socat inside turns
 * it into 127.0.0.1:<port> for HTTPS_PROXY). It tunnels `CONNECT host:port`
 * and forwards absolute-form plain-HTTP requests, but only to the allowed
 * destinations; anything else gets 403 and a log line naming the session.
 * The gateway connects on the sandbox's behalf, so Redis, the gateway's own
 * ports and the rest of the host network stay out of reach.
 */
import { rmSync } from 'node:fs'
import http from 'node:http'
import net from 'node:net'
import type { Logger } from 'pino'
import { type Destination, destinationText, parseDestination } from './destinations.js'

export interface EgressProxyOptions {
  socketPath: string
  allow: readonly Destination[]
  logger: Logger
  sessionId: string
}

const REFUSED = 'egress not allowed by the gateway sandbox\n'

/** Request headers that concern the hop to the proxy, never the destination. */
const HOP_HEADERS = new Set(['proxy-connection', 'proxy-authorization', 'connection', 'keep-alive', 'te', 'trailer', 'upgrade'])

export class EgressProxy {
  readonly socketPath: string
  readonly #server: http.Server
  readonly #allow: Set<string>
  readonly #log: Logger
  readonly #sockets = new Set<net.Socket>()
  #closed: Promise<void> | null = null

  constructor (options: EgressProxyOptions) {
    this.socketPath = options.socketPath
    this.#allow = new Set(options.allow.map(destinationText))
    this.#log = options.logger.child({ session: options.sessionId })
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
    let url: URL | null = null
    try { url = new URL(req.url ?? '') } catch { /* origin-form: not a proxy request */ }
    const port = url === null ? 0 : url.port === '' ? 80 : Number(url.port)
    const d = url?.protocol === 'http:' ? parseDestination(`${url.hostname}:${port}`) : null
    if (url === null || !this.#allowed(d, req.url ?? '')) {
      res.writeHead(403, { 'content-type': 'text/plain', 'content-length': REFUSED.length, connection: 'close' }).end(REFUSED)
      return
    }
    const headers: http.OutgoingHttpHeaders = {}
    for (const [name, value] of Object.entries(req.headers)) if (!HOP_HEADERS.has(name) && value !== undefined) headers[name] = value
    const upstream = http.request({ host: d.host, port: d.port, method: req.method, path: url.pathname + url.search, headers, agent: false }, (answer) => {
      const back: http.OutgoingHttpHeaders = {}
      for (const [name, value] of Object.entries(answer.headers)) if (!HOP_HEADERS.has(name) && value !== undefined) back[name] = value
      res.writeHead(answer.statusCode ?? 502, back)
      answer.pipe(res)
    })
    upstream.on('error', (err) => {
      this.#log.info({ err, destination: destinationText(d) }, 'sandbox egress request failed')
      if (!res.headersSent) res.writeHead(502, { connection: 'close' })
      res.end()
    })
    res.once('close', () => upstream.destroy())
    req.pipe(upstream)
  }
}
