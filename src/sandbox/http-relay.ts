/**
 * One HTTP request passed on by a sandbox's egress proxy: to an allowed
 * plain-HTTP destination, or to the real API with the credential the
 * gateway holds (api-credentials.ts). Bodies stream both ways (the API
 * answers in server-sent events); the upstream request is dropped when the
 * CLI goes away mid-answer (an interrupt), and a failed upstream is a 502.
 */
import http from 'node:http'
import https from 'node:https'
import type { LookupFunction } from 'node:net'
import type { Logger } from 'pino'
import { ADDRESS_NOT_ALLOWED } from '../net/guarded-lookup.js'

/** Headers that concern one hop, never the next. */
const HOP_HEADERS = new Set(['proxy-connection', 'proxy-authorization', 'connection', 'keep-alive', 'te', 'trailer', 'upgrade'])

export interface RelayTarget {
  url: URL
  /** Request headers left out (lower case), besides the hop headers. */
  drop?: ReadonlySet<string>
  /** Set on the request after the copy. */
  set?: Record<string, string>
  /** http(s).Agent for the upstream connection; default: a new connection, closed after the answer. */
  agent?: http.Agent
  /** Names the upstream in the log line of a failure. */
  label: string
  /** Resolves the upstream's name (default: the system's). */
  lookup?: LookupFunction
  /** Told when `lookup` refused every address of the name (guarded-lookup.ts): the answer is then 403, not 502. */
  onRefused?: (err: Error) => void
}

export function relayHttp (req: http.IncomingMessage, res: http.ServerResponse, target: RelayTarget, log: Logger): void {
  const headers: http.OutgoingHttpHeaders = {}
  for (const [name, value] of Object.entries(req.headers)) {
    if (!HOP_HEADERS.has(name) && target.drop?.has(name) !== true && value !== undefined) headers[name] = value
  }
  Object.assign(headers, target.set)
  const { url } = target
  const request = url.protocol === 'https:' ? https.request : http.request
  const upstream = request(url, { method: req.method, headers, agent: target.agent ?? false, ...(target.lookup === undefined ? {} : { lookup: target.lookup }) }, (answer) => {
    const back: http.OutgoingHttpHeaders = {}
    for (const [name, value] of Object.entries(answer.headers)) if (!HOP_HEADERS.has(name) && value !== undefined) back[name] = value
    res.writeHead(answer.statusCode ?? 502, back)
    answer.pipe(res)
  })
  upstream.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code === ADDRESS_NOT_ALLOWED && target.onRefused !== undefined) {
      target.onRefused(err)
      if (!res.headersSent) res.writeHead(403, { 'content-type': 'text/plain', connection: 'close' })
      res.end('egress not allowed by the gateway sandbox\n')
      return
    }
    log.info({ err, destination: target.label }, 'sandbox egress request failed')
    if (!res.headersSent) res.writeHead(502, { connection: 'close' })
    res.end()
  })
  res.once('close', () => upstream.destroy())
  req.pipe(upstream)
}
