/**
 * Every REST method of GatewayClient takes `{ signal }`: against an HTTP
 * server that never answers (a gateway stuck behind a dead node, a proxy
 * holding the request), aborting must reject the call with the signal's
 * reason and close the request's connection, so nothing is left waiting on
 * either side.
 */
import assert from 'node:assert/strict'
import { createServer, type IncomingMessage } from 'node:http'
import type { AddressInfo } from 'node:net'
import { describe, it, type TestContext } from 'node:test'
import { GatewayClient } from '../../src/client/index.js'
import { Waiters, within } from '../support/waiters.js'

/** An HTTP server that reads each request and never answers it; records when the client lets go of it. */
async function silentServer (t: TestContext): Promise<{ url: string, requests: Array<{ method: string, url: string, closed: boolean }>, until: <T>(check: () => T | undefined | false, what: string) => Promise<T> }> {
  const requests: Array<{ method: string, url: string, closed: boolean }> = []
  const waiters = new Waiters()
  const server = createServer((req: IncomingMessage) => {
    const entry = { method: req.method ?? '', url: req.url ?? '', closed: false }
    requests.push(entry)
    req.resume()
    req.socket.on('close', () => { entry.closed = true; waiters.wake() })
    waiters.wake()
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.after(() => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()) }))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    until: (check, what) => waiters.until(check, 5_000, what, () => JSON.stringify(requests))
  }
}

type Call = (client: GatewayClient, signal: AbortSignal) => Promise<unknown>

const CALLS: Array<[string, string, Call]> = [
  ['createSession', 'POST /v1/sessions', (c, signal) => c.createSession({}, { signal })],
  ['listSessions', 'GET /v1/sessions', (c, signal) => c.listSessions({}, { signal })],
  ['getSession', 'GET /v1/sessions/s1', (c, signal) => c.getSession('s1', { signal })],
  ['stopSession', 'DELETE /v1/sessions/s1', (c, signal) => c.stopSession('s1', { signal })],
  ['history', 'GET /v1/sessions/s1/events', (c, signal) => c.history('s1', {}, { signal })],
  ['historyAll', 'GET /v1/sessions/s1/events?after=0&limit=1000', async (c, signal) => { for await (const frame of c.historyAll('s1', 0, 1000, { signal })) void frame }],
  ['pendingPermissions', 'GET /v1/permissions', (c, signal) => c.pendingPermissions({ signal })],
  ['pendingRequests', 'GET /v1/sessions/s1/permissions', (c, signal) => c.pendingRequests('s1', { signal })],
  ['answerPermission', 'POST /v1/sessions/s1/permissions/r1', (c, signal) => c.answerPermission('s1', 'r1', { behavior: 'allow' }, { signal })],
  ['createTicket', 'POST /v1/sessions/s1/ws-ticket', (c, signal) => c.createTicket('s1', { signal })]
]

describe('client: every REST method takes an AbortSignal', () => {
  for (const [name, request, call] of CALLS) {
    it(`${name}: aborting rejects with the signal's reason and closes the request`, async (t) => {
      const server = await silentServer(t)
      const client = new GatewayClient({ url: server.url, token: 'tok' })
      const controller = new AbortController()
      const settled = call(client, controller.signal)
      const seen = await server.until(() => server.requests[0], 'the request to reach the server')
      assert.equal(`${seen.method} ${seen.url}`, request)
      const reason = new Error(`gave up on ${name}`)
      controller.abort(reason)
      await assert.rejects(within(settled, 5_000, `${name} to reject after the abort`), (err) => err === reason)
      await server.until(() => seen.closed, 'the request\'s connection to close')
      assert.equal(server.requests.length, 1)
    })
  }

  it('a signal aborted before the call rejects at once with its reason; nothing is sent', async (t) => {
    const server = await silentServer(t)
    const client = new GatewayClient({ url: server.url, token: 'tok' })
    const reason = new Error('already aborted')
    await assert.rejects(within(client.listSessions({}, { signal: AbortSignal.abort(reason) }), 5_000, 'the rejection'), (err) => err === reason)
    // A request that would reach the server proves the first one was never sent.
    const later = new AbortController()
    const probe = client.pendingPermissions({ signal: later.signal })
    const first = await server.until(() => server.requests[0], 'the probe')
    assert.equal(first.url, '/v1/permissions')
    later.abort(new Error('done'))
    await assert.rejects(probe)
  })
})
