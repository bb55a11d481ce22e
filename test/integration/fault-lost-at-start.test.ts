/**
 * A gateway process ends without stopping its sessions (a crash): their
 * records still say a CLI runs. The next gateway on that store records each
 * one as ended the way any other end is recorded: a status frame (`stopped`,
 * `exit.reason: "lost"`) in the session's own log, then the record. So
 * history readers, event-stream followers and resuming WebSocket clients all
 * learn it, not only REST readers of the record.
 *
 * A permission prompt pending at the crash ends there too: its
 * `permission_resolved` (`cancelled`, by nobody) comes just before the lost
 * status, as a CLI's exit ends its prompts, so no client, stream or
 * webhook keeps it open.
 *
 * The crash: gateway 1 is left running (its CLI too) while gateway 2 starts
 * on the same store with its own data dir, exactly what a restarted process
 * finds when the old one died: records saying `running`, logs ending mid-life.
 */
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import http from 'node:http'
import { after, describe, it } from 'node:test'
import { isHello, isPrompt } from '../support/frames.js'
import { TOKEN_A, gateway, suiteScope } from '../support/gateway.js'
import { REDIS_URL, deleteKeys } from '../support/redis-server.js'
import { readHistory, turn } from './resume-helpers.js'

const PREFIX = `lost-${randomUUID().slice(0, 8)}:`
// Both gateways must read each other's signed records.
const ENV = { REDIS_URL, REDIS_PREFIX: PREFIX, STORE_SECRET: 'lost-at-start-test-secret-0123456789abcdef' }

const isLost = (f: any): boolean => f.type === 'gateway' && f.subtype === 'status' && f.status === 'stopped' && f.exit?.reason === 'lost'

/** Data lines of an event stream until `done` holds for a parsed frame (or the deadline passes). */
function followStream (url: string, done: (frame: any) => boolean, timeoutMs = 10_000): Promise<any[]> {
  return new Promise((resolve, reject) => {
    const frames: any[] = []
    let buffer = ''
    const req = http.get(url, { headers: { authorization: `Bearer ${TOKEN_A}`, accept: 'text/event-stream' } }, (res) => {
      if (res.statusCode !== 200) {
        req.destroy()
        reject(new Error(`event stream answered ${String(res.statusCode)}`))
        return
      }
      res.setEncoding('utf8')
      res.on('data', (chunk: string) => {
        buffer += chunk
        const blocks = buffer.split('\n\n')
        buffer = blocks.pop() as string
        for (const block of blocks) {
          const data = block.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5).replace(/^ /, '')).join('\n')
          if (data === '') continue
          const frame = JSON.parse(data)
          frames.push(frame)
          if (done(frame)) {
            clearTimeout(timer)
            req.destroy()
            resolve(frames)
            return
          }
        }
      })
    })
    const timer = setTimeout(() => { req.destroy(); reject(new Error(`no matching frame within ${timeoutMs} ms; got ${JSON.stringify(frames).slice(0, 1000)}`)) }, timeoutMs)
    req.on('error', (err) => { clearTimeout(timer); reject(err) })
  })
}

describe('sessions found running at start', () => {
  const scope = suiteScope()
  after(async () => {
    await deleteKeys(REDIS_URL, PREFIX)
  })

  it('are recorded as lost with a status frame in their own log, which followers and resuming clients get', async () => {
    const first = await gateway(scope, { env: ENV })
    const { id } = await first.createSession()
    const holder = await first.connect(id, 'after=0')
    const end = await turn(first, id, holder, 'echo before the crash')
    assert.notEqual((await first.request('GET', `/v1/sessions/${id}`)).body.status, 'stopped')

    // Gateway 2 starts on the same store; its recovery finds the record saying a CLI runs.
    const second = await gateway(scope, { env: ENV })

    const record = await second.request('GET', `/v1/sessions/${id}`)
    assert.equal(record.status, 200)
    assert.equal(record.body.status, 'stopped')
    assert.equal(record.body.exit.reason, 'lost')
    assert.equal(record.body.last_seq, end + 1)

    const history = await readHistory(second, id)
    const last = history.at(-1)
    assert.ok(isLost(last), `history ends with the lost status frame: ${JSON.stringify(last)}`)
    assert.equal(last.seq, end + 1)
    assert.equal(history.filter(isLost).length, 1)
    assert.deepEqual(history.slice(0, end).map((f) => f.seq), Array.from({ length: end }, (_, i) => i + 1), 'what came before is intact')

    // A WebSocket client resuming from where it was gets it in its replay.
    const resumed = await second.connect(id, `after=${end}&role=observer`)
    const hello = await resumed.waitFor(isHello)
    assert.equal(hello.resume, 'ok')
    const replayed = await resumed.waitFor(isLost)
    assert.deepEqual(replayed, last)

    // So does an event-stream follower.
    const streamed = await followStream(`${second.url}/v1/sessions/${id}/events/stream?after=${end}`, isLost)
    assert.deepEqual(streamed.at(-1), last)

    // Loading it again (another lookup, the listing) adds nothing.
    const listed = await second.request('GET', '/v1/sessions')
    const entry = listed.body.sessions.find((s: any) => s.id === id)
    assert.equal(entry.status, 'stopped')
    assert.equal(entry.exit.reason, 'lost')
    assert.equal((await readHistory(second, id)).filter(isLost).length, 1)
  })

  it('end the prompts their CLI left pending: permission_resolved cancelled, just before the lost status', async () => {
    const first = await gateway(scope, { env: ENV })
    const { id } = await first.createSession()
    const holder = await first.connect(id, 'after=0')
    await holder.waitFor(isHello)
    holder.sendUser('ask')
    const prompt = await holder.waitFor(isPrompt)

    const second = await gateway(scope, { env: ENV })
    assert.equal((await second.request('GET', `/v1/sessions/${id}`)).body.exit.reason, 'lost')
    const history = await readHistory(second, id)
    const asked = history.findIndex((f) => f.type === 'control_request' && f.request_id === prompt.request_id)
    assert.ok(asked >= 0, 'the prompt is in history')
    const ended = history.filter((f) => f.type === 'gateway' && f.subtype === 'permission_resolved' && f.request_id === prompt.request_id)
    assert.equal(ended.length, 1, `the prompt ends once in history: ${JSON.stringify(history.slice(-3))}`)
    assert.deepEqual([ended[0].decision, ended[0].by, ended[0].request_subtype], ['cancelled', null, 'can_use_tool'])
    assert.ok(isLost(history.at(-1)), 'then the lost status')
    assert.equal(history.at(-2), ended[0])
    // A client attaching now is told of no pending request, and HTTP lists none.
    const again = await second.connect(id, 'role=observer')
    assert.deepEqual((await again.waitFor(isHello)).pending_requests, [])
    assert.deepEqual((await second.request('GET', `/v1/sessions/${id}/permissions`)).body.requests, [])
  })
})
