/**
 * One HTTP request passed on by a sandbox's egress proxy: to an allowed
 * plain-HTTP destination, or to the real API with the credential the
 * gateway holds (api-credentials.ts). Bodies stream both ways (the API
 * answers in server-sent events); the upstream request is dropped when the
 * CLI goes away mid-answer (an interrupt), and a failed upstream is a 502.
 * A refusal or a 502 keeps the connection: the answers of requests the tool
 * pipelined behind it still come, in order. An upstream that fails once its
 * answer has begun cuts the tool's connection instead.
 */
import http from 'node:http'
import https from 'node:https'
import type { LookupFunction, Socket } from 'node:net'
import { pipeline } from 'node:stream'
import type { Logger } from 'pino'
import { ADDRESS_NOT_ALLOWED } from '../net/guarded-lookup.js'

const REFUSED = 'egress not allowed by the gateway sandbox\n'

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

/** Per connection from the sandbox: the callbacks of its answers not yet done, run if it closes first. */
const unfinished = new WeakMap<Socket, Set<() => void>>()

/**
 * Calls `done` once, when `res` closes or its connection does. Node holds
 * the answer of a pipelined request until those before it are sent, and
 * never closes a held one when the connection goes: waiting on `res` alone
 * would keep its upstream request and its tenant's slot for good.
 */
export function whenAnswerDone (req: http.IncomingMessage, res: http.ServerResponse, done: () => void): void {
  const socket = req.socket
  if (socket.destroyed) {
    done()
    return
  }
  let pending = unfinished.get(socket)
  if (pending === undefined) {
    const created = new Set<() => void>()
    unfinished.set(socket, created)
    // One listener a connection, however many requests are pipelined on it.
    socket.once('close', () => { for (const f of created) f() })
    pending = created
  }
  const waiting = pending
  const once = (): void => {
    if (!waiting.delete(once)) return
    done()
  }
  waiting.add(once)
  res.once('close', once)
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
    // pipe() would leave `res` neither ended nor cut when the upstream dies mid-body, and the tool (with all it
    // pipelined behind) waiting for good. Cutting the tool's connection short of the declared length or the last
    // chunk lets it tell the body is truncated; what it pipelined behind goes too, as nothing can follow on it.
    pipeline(answer, res, (err) => {
      if (err === undefined || gone) return
      log.info({ err, destination: target.label }, 'sandbox egress answer cut: the upstream failed partway through it')
      res.destroy()
    })
  })
  let gone = false
  upstream.on('error', (err: NodeJS.ErrnoException) => {
    // Ended by us (the tool went away): nothing failed, nobody to answer.
    if (gone) return
    if (err.code === ADDRESS_NOT_ALLOWED && target.onRefused !== undefined) {
      target.onRefused(err)
      answerWith(res, 403, REFUSED)
      return
    }
    log.info({ err, destination: target.label }, 'sandbox egress request failed')
    answerWith(res, 502, '')
  })
  whenAnswerDone(req, res, () => {
    gone = true
    upstream.destroy()
  })
  req.pipe(upstream)
}

/**
 * A whole answer of the proxy's own, framed so the connection can carry the
 * next one; an answer already begun is cut instead (ending it would pass a
 * truncated body off as complete).
 */
function answerWith (res: http.ServerResponse, status: number, text: string): void {
  if (res.headersSent) {
    res.destroy()
    return
  }
  res.writeHead(status, { 'content-type': 'text/plain', 'content-length': Buffer.byteLength(text) }).end(text)
}
