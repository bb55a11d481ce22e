/**
 * A CLI that misbehaves never takes the gateway or its session down with it:
 * garbage and oversized stdout lines become `cli_output_rejected` frames and
 * the session keeps working; a CLI that dies at once, crashes mid-turn,
 * ignores SIGTERM or leaves a grandchild behind is reported and cleaned up
 * (checked in the process table); CLIs left by a crashed previous gateway are
 * reaped at start from their pid files, and only those.
 */
import assert from 'node:assert/strict'
import { type ChildProcess, spawn } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readdirSync, writeFileSync } from 'node:fs'
import { rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { processStartTime } from '../../src/cli/reaper.js'
import { isStatus } from '../support/frames.js'
import { type TestClient, eventually, processAlive } from '../support/gateway.js'
import { gateway, holderOf } from '../support/sessions.js'

/** Sends a prompt and waits for its result (from the frames received after sending). */
async function turn (holder: TestClient, prompt: string): Promise<any[]> {
  const from = holder.frames.length
  holder.sendUser(prompt)
  await holder.waitFor((f) => f.type === 'result', 10_000, from)
  return holder.frames.slice(from)
}

describe('CLI output the gateway cannot relay', () => {
  it('turns garbage lines into cli_output_rejected frames (recorded, with a preview) and keeps the session working', async (t) => {
    const gw = await gateway(t)
    const { id, holder } = await holderOf(gw, t, { query: 'after=0' })
    const frames = await turn(holder, 'garbage')
    const rejected = frames.filter((f) => f.type === 'gateway' && f.subtype === 'cli_output_rejected')
    assert.deepEqual(rejected.map((f) => f.reason), ['invalid_json', 'not_an_object'])
    assert.equal(rejected[0].preview, 'this is not json {')
    assert.equal(rejected[1].preview, '[1,2,3]')
    for (const f of rejected) assert.equal(typeof f.seq, 'number')
    assert.ok(frames.some((f) => f.type === 'assistant' && f.message.content[0].text === 'after garbage'))
    assert.ok(!frames.some((f) => f.subtype === 'status' && f.status === 'exited'))
    const next = await turn(holder, 'hello again')
    assert.equal(next.find((f) => f.type === 'result').is_error, false)
    const history = await gw.request('GET', `/v1/sessions/${id}/events?limit=1000`)
    assert.equal(history.body.events.filter((e: any) => e.subtype === 'cli_output_rejected').length, 2)
  })

  it('drops lines over MAX_LINE_BYTES with too_large notices, and the session keeps working', async (t) => {
    const gw = await gateway(t, { env: { MAX_LINE_BYTES: '4096' } })
    const { holder } = await holderOf(gw, t, { query: 'after=0' })
    const from = holder.frames.length
    holder.sendUser('huge 5000') // the assistant line and the result line (which repeats the text) are both too long
    const rejected = await holder.until(() => {
      const r = holder.frames.slice(from).filter((f) => f.subtype === 'cli_output_rejected')
      return r.length === 2 ? r : undefined
    })
    for (const f of rejected) {
      assert.equal(f.reason, 'too_large')
      assert.ok(f.bytes > 5000)
      assert.equal(f.preview, '')
    }
    await holder.waitFor((f) => f.type === 'system' && f.subtype === 'session_state_changed' && f.state === 'idle', 10_000, from)
    assert.ok(!holder.frames.slice(from).some((f) => f.type === 'assistant' || f.type === 'result'), 'nothing oversized was relayed')
    const next = await turn(holder, 'small')
    assert.ok(next.some((f) => f.type === 'assistant' && f.message.content[0].text === 'Echo: small'))
    assert.equal(holder.closeCode, null)
  })
})

describe('CLI processes that end badly', () => {
  it('reports a CLI that exits at once (exit code, stderr tail) and leaves no process or pid file', async (t) => {
    const gw = await gateway(t, { cliArgs: ['--fake-mode', 'crash-at-start'] })
    const created = await gw.createSession()
    const session = await eventually(async () => {
      const s = (await gw.request('GET', `/v1/sessions/${created.id}`)).body
      return s.status === 'exited' ? s : undefined
    }, 5000, 'the session to be reported exited')
    assert.equal(session.exit.code, 1)
    assert.equal(session.exit.reason, 'exited')
    assert.ok(session.exit.stderr_tail.some((l: string) => l.includes('simulated crash at start')))
    assert.equal(session.pid, null)
    assert.ok(!processAlive(created.pid))
    assert.ok(!existsSync(join(gw.dataDir, 'pids', `${created.id}.${process.pid}.pid`)), 'the pid file goes with the CLI')
    // A client attaching later is told, and the gateway is fine.
    const c = await gw.connect(created.id, 'after=0')
    t.after(() => c.terminate())
    await c.waitFor(isStatus('exited'))
    assert.equal((await fetch(`${gw.url}/readyz`)).status, 200)
  })

  it('reports a crash mid-turn to the clients, and the next prompt starts the CLI again with --resume', async (t) => {
    const gw = await gateway(t)
    const { id, pid, holder } = await holderOf(gw, t, { query: 'after=0' })
    const from = holder.frames.length
    holder.sendUser('crash')
    const exited = await holder.waitFor(isStatus('exited'), 10_000, from)
    assert.equal(exited.exit.code, 3)
    assert.ok(exited.exit.stderr_tail.some((l: string) => l.includes('simulated crash')))
    await eventually(() => !processAlive(pid), 5000, 'the crashed CLI to be gone')

    const frames = await turn(holder, 'back again')
    assert.ok(frames.some((f) => f.type === 'assistant' && f.message.content[0].text === 'Echo: back again'))
    const dumps = gw.argvDumps(id)
    assert.equal(dumps.length, 2)
    assert.ok(dumps[1]?.argv.includes('--resume'))
  })

  it('SIGKILLs a CLI that ignores SIGTERM and reports how it ended', async (t) => {
    const gw = await gateway(t, { cliArgs: ['--fake-mode', 'ignore-sigterm'], env: { CLI_STOP_TIMEOUT_MS: '300' } })
    const { id, pid, holder } = await holderOf(gw, t, { query: 'after=0' })
    holder.sendUser('slow 100 1000') // a turn in progress: closing stdin alone does not end it
    await holder.waitFor((f) => f.type === 'system' && f.subtype === 'init')
    const deleted = await gw.request('DELETE', `/v1/sessions/${id}`)
    assert.equal(deleted.status, 200)
    assert.equal(deleted.body.status, 'stopped')
    assert.equal(deleted.body.exit.signal, 'SIGKILL')
    assert.equal(deleted.body.exit.reason, 'stopped')
    assert.ok(deleted.body.exit.stderr_tail.some((l: string) => l.includes('ignoring SIGTERM')))
    await eventually(() => !processAlive(pid), 5000, 'the CLI to be gone')
  })

  it("ends a grandchild the CLI left behind, whether the CLI exits by itself or is stopped", async (t) => {
    const gw = await gateway(t, { env: { CLI_STOP_TIMEOUT_MS: '300' } })
    const grandchildOf = async (holder: TestClient): Promise<number> => {
      const frames = await turn(holder, 'grandchild')
      const text = frames.find((f) => f.type === 'assistant').message.content[0].text as string
      const pid = Number(/spawned grandchild (\d+)/.exec(text)?.[1])
      assert.ok(Number.isInteger(pid) && processAlive(pid), `grandchild ${pid} runs`)
      return pid
    }

    const first = await holderOf(gw, t, { query: 'after=0' })
    const orphan = await grandchildOf(first.holder)
    const from = first.holder.frames.length
    first.holder.sendUser('exit 0') // the CLI exits on its own, the sleep it started would outlive it
    await first.holder.waitFor(isStatus('exited'), 10_000, from)
    await eventually(() => !processAlive(orphan), 5000, 'the grandchild of an exited CLI to be ended')

    const second = await holderOf(gw, t, { query: 'after=0' })
    const other = await grandchildOf(second.holder)
    await gw.request('DELETE', `/v1/sessions/${second.id}`)
    await eventually(() => !processAlive(other), 5000, 'the grandchild of a stopped CLI to be ended')
    await eventually(() => !processAlive(second.pid), 5000)
  })
})

describe('reaper', () => {
  it('ends the process group named by a pid file at start, and spares a pid that now runs something else', async (t) => {
    const dataDir = mkdtempSync(join(tmpdir(), 'cgw-reaper-'))
    const children: ChildProcess[] = []
    t.after(async () => {
      for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL')
      await rm(dataDir, { recursive: true, force: true })
    })
    const sleeper = (): ChildProcess => {
      const c = spawn('sleep', ['600'], { detached: true, stdio: 'ignore' }) // own process group, like a CLI
      children.push(c)
      return c
    }
    const orphan = sleeper()
    const bystander = sleeper()
    const sameName = sleeper() // a same-named program on a reused pid: its start time differs from the recorded one
    const recorded = sleeper() // recorded with its real start time, as the gateway writes pid files
    const orphanEnded = new Promise<string | null>((resolve) => orphan.once('exit', (_code, signal) => resolve(signal)))
    const recordedEnded = new Promise<string | null>((resolve) => recorded.once('exit', (_code, signal) => resolve(signal)))
    const pids = join(dataDir, 'pids')
    mkdirSync(pids, { recursive: true })
    writeFileSync(join(pids, 'x.pid'), `${orphan.pid}\nsleep\n`)
    writeFileSync(join(pids, 'y.pid'), `${bystander.pid}\n/opt/claude/bin/claude\n`) // pid reused by an unrelated program
    writeFileSync(join(pids, 'same-name.pid'), `${sameName.pid}\nsleep\n1\n`)
    writeFileSync(join(pids, 'recorded.pid'), `${recorded.pid}\nsleep\n${processStartTime(recorded.pid as number) ?? ''}\n`)
    writeFileSync(join(pids, 'init.pid'), '1\ninit\n')
    writeFileSync(join(pids, 'garbage.pid'), 'not a pid\n')
    writeFileSync(join(pids, 'empty.pid'), '')
    writeFileSync(join(pids, 'gone.pid'), '2147483646\nsleep\n')
    writeFileSync(join(pids, 'notes.txt'), `${bystander.pid}\nsleep\n`) // not a .pid file

    const gw = await gateway(t, { dataDir })
    assert.equal(await orphanEnded, 'SIGTERM')
    assert.ok(!processAlive(orphan.pid as number))
    assert.equal(await recordedEnded, 'SIGTERM')
    assert.ok(processAlive(bystander.pid as number), 'a pid running another program is not touched')
    assert.ok(processAlive(sameName.pid as number), 'a pid running the same command but started at another time is not touched')
    assert.deepEqual(readdirSync(pids).sort(), ['notes.txt'], 'every pid file was consumed')
    assert.equal((await fetch(`${gw.url}/healthz`)).status, 200)
  })
})
