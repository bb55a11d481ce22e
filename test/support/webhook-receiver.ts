/**
 * A real HTTP webhook receiver for tests of gateways (in process or in their
 * own processes): it records every request, answers `status` at once (200,
 * or a 503 while "its backend is down"), or holds the answer while `hang`
 * is set, and lets a test wait for what arrives.
 */
import { type IncomingMessage, type Server, type ServerResponse, createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { TestContext } from 'node:test'
import { Waiters } from './waiters.js'

const WAIT_MS = 10_000

export interface Received {
  headers: IncomingMessage['headers']
  body: string
  json: any
  res: ServerResponse
  /** The connection closed before an answer was sent. */
  cutOff: boolean
}

export class Receiver {
  readonly requests: Received[] = []
  readonly waiters = new Waiters()
  hang = false
  /** What every request not held is answered. */
  status = 200

  private constructor (readonly server: Server) {
    server.on('request', (req: IncomingMessage, res: ServerResponse) => {
      const chunks: Buffer[] = []
      req.on('data', (c: Buffer) => chunks.push(c))
      req.on('end', () => {
        const body = Buffer.concat(chunks).toString('utf8')
        const r: Received = { headers: req.headers, body, json: JSON.parse(body), res, cutOff: false }
        res.on('close', () => { if (!res.writableEnded) r.cutOff = true; this.waiters.wake() })
        this.requests.push(r)
        if (!this.hang) res.writeHead(this.status).end()
        this.waiters.wake()
      })
    })
  }

  static async start (t: TestContext, port = 0): Promise<Receiver> {
    const server = createServer()
    await new Promise<void>((resolve, reject) => server.once('error', reject).listen(port, '127.0.0.1', resolve))
    const receiver = new Receiver(server)
    t.after(async () => {
      server.closeAllConnections()
      await new Promise((resolve) => server.close(resolve))
    })
    return receiver
  }

  get port (): number {
    return (this.server.address() as AddressInfo).port
  }

  /** The events of the requests so far, in arrival order, retries included. */
  get types (): string[] {
    return this.requests.map((r) => r.json.type)
  }

  async until<T> (check: () => T | undefined | false, what: string, timeoutMs = WAIT_MS): Promise<T> {
    return await this.waiters.until(check, timeoutMs, what, () => `received: ${this.types.join(' ')}`)
  }

  /** Answers 200 to every held request and to all later ones. */
  release (): void {
    this.hang = false
    this.status = 200
    for (const r of this.requests) if (!r.res.headersSent) r.res.writeHead(200).end()
  }
}
