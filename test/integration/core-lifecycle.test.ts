// The CLI process over a session's life: crash and restart with --resume, a CLI that dies
// at start, DELETE (including a CLI that ignores SIGTERM and one that leaves a grandchild),
// the idle timeout, client disconnects, and gateway shutdown. Process state is read from
// the process table (/proc); everything else is awaited on real frames.
import assert from 'node:assert/strict'
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, it, type TestContext } from 'node:test'
import { isResult, isStatus } from '../support/frames.js'
import { type TestClient, type TestGateway, eventually, fakeCliPids, processAlive } from '../support/gateway.js'
import { gateway } from '../support/sessions.js'

/** Statuses announced to a client, in order. */
function statuses (c: TestClient): string[] {
  return c.frames.filter((f) => f.type === 'gateway' && f.subtype === 'status').map((f) => f.status as string)
}

/** Gone from the process table altogether: not running, and not left as a zombie either. */
function gone (pid: number): boolean {
  return !existsSync(`/proc/${pid}`)
}

/** A session (CLI_STOP_TIMEOUT_MS 300) whose CLI has started a grandchild; its pid is read from the fake's log. */
async function grandchildSession (t: TestContext): Promise<{ gw: TestGateway, s: any, c: TestClient, grandchild: number }> {
  const gw = await gateway(t, { env: { CLI_STOP_TIMEOUT_MS: '300' } })
  const s = await gw.createSession()
  const c = await gw.connect(s.id)
  c.sendUser('grandchild')
  await c.waitFor(isResult)
  const grandchild = Number(readFileSync(join(gw.fakeLogDir, `${s.id}.grandchild.pid`), 'utf8'))
  return { gw, s, c, grandchild }
}

describe('CLI lifecycle', () => {
  it('reports a crash with its exit code and stderr, then restarts the CLI with --resume on the next message', async (t) => {
    const gw = await gateway(t)
    const s = await gw.createSession()
    const c = await gw.connect(s.id, 'after=0')
    c.sendUser('crash')
    const exited = await c.waitFor(isStatus('exited'))
    assert.equal(exited.exit.code, 3)
    assert.equal(exited.exit.reason, 'exited')
    assert.ok(exited.exit.stderr_tail.includes('fake-claude: simulated crash (exit 3)'), JSON.stringify(exited.exit.stderr_tail))
    assert.ok(c.frames.some((f) => f.type === 'assistant' && f.message.content[0].text === 'about to crash'))
    assert.ok(!processAlive(s.pid))
    const after = await gw.request('GET', `/v1/sessions/${s.id}`)
    assert.equal(after.body.status, 'exited')
    assert.equal(after.body.pid, null)
    assert.equal(after.body.exit.code, 3)
    assert.equal(gw.argvDumps(s.id).length, 1, 'a crash alone does not restart the CLI')

    const mark = c.frames.length
    c.sendUser('hello again')
    const result = await c.waitFor(isResult, 10_000, mark)
    assert.equal(result.result, 'Echo: hello again')
    const dumps = gw.argvDumps(s.id)
    assert.equal(dumps.length, 2)
    const argv = dumps[1]!.argv
    assert.deepEqual(argv.slice(argv.indexOf('--resume'), argv.indexOf('--resume') + 2), ['--resume', s.id])
    assert.ok(!argv.includes('--session-id'))
    assert.notEqual(dumps[1]!.pid, s.pid)
    assert.ok(processAlive(dumps[1]!.pid))
    assert.deepEqual(statuses(c).slice(statuses(c).indexOf('exited')), ['exited', 'starting', 'running'])

    // The new CLI was initialised before it got the message.
    const stdin = gw.stdinLines(s.id)
    assert.deepEqual(stdin.map((l) => l.type === 'user' ? `user:${l.message.content}` : `${l.type}:${l.request?.subtype}`), [
      'control_request:initialize', 'user:crash', 'control_request:initialize', 'user:hello again'
    ])
  })

  it('reports a CLI that dies at start as exited with code 1 and does not restart it until the next message', async (t) => {
    const gw = await gateway(t, { cliArgs: ['--fake-mode', 'crash-at-start'], env: { KEEPALIVE_INTERVAL_MS: '100' } })
    const s = await gw.createSession()
    const c = await gw.connect(s.id, 'after=0')
    const exited = await c.waitFor(isStatus('exited'))
    assert.equal(exited.exit.code, 1)
    assert.ok(exited.exit.stderr_tail.some((l: string) => l.includes('simulated crash at start')), JSON.stringify(exited.exit.stderr_tail))

    // Let some time pass, measured by the gateway's own keep_alive ticks (at least 300 ms).
    const exitedAt = c.frames.indexOf(exited)
    await c.until(() => c.frames.slice(exitedAt).filter((f) => f.type === 'keep_alive').length >= 4, 5000, 'four keep_alive ticks')
    assert.equal(gw.argvDumps(s.id).length, 1, 'no restart loop')
    assert.deepEqual(statuses(c), ['starting', 'exited'])
    assert.deepEqual(await fakeCliPids(), [])

    c.sendUser('hello')
    await c.until(() => statuses(c).filter((x) => x === 'exited').length === 2, 10_000, 'the second exit')
    const dumps = gw.argvDumps(s.id)
    assert.equal(dumps.length, 2, 'one new attempt for the new message')
    // The CLI never stored the conversation, so it is started anew, not resumed.
    assert.ok(dumps[1]!.argv.includes('--session-id'))
    assert.ok(!dumps[1]!.argv.includes('--resume'))
  })

  it('DELETE stops the CLI (stopping, then stopped), leaves no process behind and keeps the history', async (t) => {
    const gw = await gateway(t)
    const s = await gw.createSession()
    const c = await gw.connect(s.id, 'after=0')
    c.sendUser('hello')
    await c.waitFor(isResult)
    const pid = (await gw.request('GET', `/v1/sessions/${s.id}`)).body.pid as number
    assert.equal(pid, s.pid)
    assert.ok(processAlive(pid))

    const del = await gw.request('DELETE', `/v1/sessions/${s.id}`)
    assert.equal(del.status, 200)
    assert.equal(del.body.status, 'stopped')
    assert.equal(del.body.exit.reason, 'stopped')
    assert.ok(gone(pid), 'the CLI is gone (no zombie) once DELETE answers')

    const stopped = await c.waitFor(isStatus('stopped'))
    const list = statuses(c)
    assert.deepEqual(list.slice(-2), ['stopping', 'stopped'])
    assert.equal(stopped.exit.reason, 'stopped')

    const after = await gw.request('GET', `/v1/sessions/${s.id}`)
    assert.equal(after.body.status, 'stopped')
    assert.equal(after.body.pid, null)
    assert.equal(after.body.last_seq, stopped.seq, 'last_seq is the last frame recorded')
    // The history is kept: a new client replays every frame.
    const late = await gw.connect(s.id, 'role=observer&after=0')
    await late.waitFor((f) => f.seq === stopped.seq)
    assert.deepEqual(late.seqFrames, c.seqFrames)
  })

  it('DELETE ends a CLI that ignores SIGTERM with SIGKILL after CLI_STOP_TIMEOUT_MS', async (t) => {
    const gw = await gateway(t, { cliArgs: ['--fake-mode', 'ignore-sigterm'], env: { CLI_STOP_TIMEOUT_MS: '300' } })
    const s = await gw.createSession()
    const c = await gw.connect(s.id)
    // A long turn: closing stdin alone does not end it.
    c.sendUser('slow 1000 50')
    await c.waitFor((f) => f.type === 'assistant' && f.message.content[0].text === 'slow #0')
    const started = Date.now()
    const del = await gw.request('DELETE', `/v1/sessions/${s.id}`)
    const took = Date.now() - started
    assert.equal(del.status, 200)
    assert.equal(del.body.status, 'stopped')
    assert.equal(del.body.exit.signal, 'SIGKILL')
    assert.ok(del.body.exit.stderr_tail.includes('fake-claude: ignoring SIGTERM'), 'SIGTERM was tried first')
    assert.ok(took >= 2 * 300 - 20, `the stop waited through both steps (${took} ms)`)
    assert.ok(gone(s.pid))
  })

  it('DELETE also ends what the CLI started (a grandchild process)', async (t) => {
    const { gw, s, grandchild } = await grandchildSession(t)
    assert.ok(Number.isInteger(grandchild) && grandchild > 0)
    assert.ok(processAlive(grandchild), 'the grandchild runs before DELETE')

    await gw.request('DELETE', `/v1/sessions/${s.id}`)
    assert.ok(gone(s.pid))
    await eventually(() => !processAlive(grandchild), 5000, `grandchild ${grandchild} to end`)
  })

  it('ends the grandchild of a CLI that exits by itself', async (t) => {
    const { c, grandchild } = await grandchildSession(t)
    assert.ok(processAlive(grandchild))
    c.sendUser('crash')
    await c.waitFor(isStatus('exited'))
    await eventually(() => !processAlive(grandchild), 5000, `grandchild ${grandchild} to end`)
  })

  it('stops an idle session with no client after IDLE_TIMEOUT_MS, but not one with a client attached', async (t) => {
    const idleMs = 300
    const gw = await gateway(t, { env: { IDLE_TIMEOUT_MS: String(idleMs), KEEPALIVE_INTERVAL_MS: '100' } })
    const lonely = await gw.createSession()
    const watched = await gw.createSession()
    const c = await gw.connect(watched.id)
    c.sendUser('hello')
    const result = await c.waitFor(isResult)

    // No client, no turn: it stops by itself.
    const stopped = await eventually(async () => {
      const r = await gw.request('GET', `/v1/sessions/${lonely.id}`)
      return r.body.status === 'stopped' ? r.body : undefined
    }, 5000, 'the idle session to stop')
    assert.equal(stopped.exit.reason, 'stopped')
    assert.ok(Date.parse(stopped.exit.at) - Date.parse(lonely.created_at) >= idleMs - 10, 'not before IDLE_TIMEOUT_MS')
    assert.ok(gone(lonely.pid))
    const replay = await gw.connect(lonely.id, 'after=0')
    await replay.waitFor(isStatus('stopped'))
    assert.deepEqual(statuses(replay).slice(-2), ['stopping', 'stopped'])

    // The attached one is still running well past twice the idle time after its turn,
    // measured by the gateway's keep_alive ticks (100 ms apart: 8 ticks span at least 700 ms).
    const from = c.frames.indexOf(result)
    await c.until(() => c.frames.slice(from).filter((f) => f.type === 'keep_alive').length >= 8, 5000, 'eight keep_alive ticks')
    const still = await gw.request('GET', `/v1/sessions/${watched.id}`)
    assert.equal(still.body.status, 'running')
    assert.equal(still.body.pid, watched.pid)
    assert.ok(processAlive(watched.pid))
    assert.ok(!statuses(c).includes('stopping'))

    // Once its last client leaves, the idle clock starts for it too.
    c.ws.close()
    await c.waitClose()
    await eventually(async () => (await gw.request('GET', `/v1/sessions/${watched.id}`)).body.status === 'stopped', 5000, 'the watched session to stop after its client left')
    assert.ok(gone(watched.pid))
  })

  it('keeps the CLI running when every client disconnects and reconnects', async (t) => {
    const gw = await gateway(t)
    const s = await gw.createSession()
    const a = await gw.connect(s.id)
    const b = await gw.connect(s.id, 'role=observer')
    a.sendUser('hello one')
    await a.waitFor(isResult)
    await b.waitFor(isResult)
    a.ws.close()
    b.terminate()
    await a.waitClose()
    await b.waitClose()
    await eventually(async () => (await gw.request('GET', `/v1/sessions/${s.id}`)).body.clients === 0, 5000, 'the gateway to see both clients gone')
    assert.ok(processAlive(s.pid))

    const again = await gw.connect(s.id, 'after=0')
    again.sendUser('hello two')
    const result = await again.until(() => again.frames.filter(isResult).find((f) => f.result === 'Echo: hello two'))
    assert.ok(result)
    const snap = await gw.request('GET', `/v1/sessions/${s.id}`)
    assert.equal(snap.body.pid, s.pid)
    assert.equal(snap.body.status, 'running')
    assert.ok(processAlive(s.pid))
    assert.equal(gw.argvDumps(s.id).length, 1, 'never restarted')
    assert.deepEqual(statuses(again), ['starting', 'running'], 'never stopped')
  })

  it('on shutdown closes every client with 1012 and ends every CLI', async (t) => {
    const gw = await gateway(t, { env: { CLI_STOP_TIMEOUT_MS: '300' } })
    const idle = await gw.createSession()
    const busy = await gw.createSession()
    const c1 = await gw.connect(idle.id)
    const c2 = await gw.connect(busy.id)
    const c3 = await gw.connect(busy.id, 'role=observer')
    c2.sendUser('slow 1000 50')
    await c2.waitFor((f) => f.type === 'assistant' && f.message.content[0].text === 'slow #0')
    const pids = await fakeCliPids()
    assert.deepEqual(pids, [idle.pid, busy.pid].sort((x, y) => x - y))

    await gw.app.close()
    for (const c of [c1, c2, c3]) assert.equal(await c.waitClose(5000), 1012)
    for (const pid of pids) assert.ok(gone(pid), `CLI ${pid} is gone after shutdown`)
    assert.deepEqual(await fakeCliPids(), [])
  })
})
