/**
 * Nothing a CLI started survives its gateway. A gateway process SIGKILLed
 * mid-session leaves its spawn helper (CLI_SPAWN=helper, the default) to end
 * the CLI's process group, background tools (`sleep ... &`) and all. When the
 * helper dies with it (both SIGKILLed, as by an OOM kill), the CLI dies of
 * the broken pipe but a background tool keeps running, orphaned, in the
 * CLI's process group. The next gateway on the same DATA_DIR must end that
 * group from the CLI's pid file although its leader is gone, and still never
 * signal a group whose id was reused (told apart by the recorded start time).
 *
 * Uses TEST_REDIS_URL (default redis://127.0.0.1:6379) with a unique key prefix,
 * deleted afterwards, so the restarted gateway knows the session.
 */
import assert from 'node:assert/strict'
import { type ChildProcess, spawn } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import { mkdirSync, mkdtempSync, readdirSync, writeFileSync } from 'node:fs'
import { rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, it } from 'node:test'
import { processStartTime, reapOrphans } from '../../src/cli/reaper.js'
import { isHello } from '../support/frames.js'
import { TestClient, TOKEN_A, eventually, parentOf, processAlive } from '../support/gateway.js'
import { type GatewayProcess, fakeCliEnv, startGatewayProcess } from '../support/gateway-process.js'
import { REDIS_URL, deleteKeys } from '../support/redis-server.js'


/** A process this test started (or learnt of), with its start time so cleanup never hits a reused pid. */
interface Started { pid: number, started: string | null }

const strays: Started[] = []
after(() => {
  for (const p of strays) {
    if (p.started !== null && processStartTime(p.pid) === p.started) {
      try { process.kill(p.pid, 'SIGKILL') } catch { /* gone meanwhile */ }
    }
  }
})

function remember (pid: number): Started {
  const p = { pid, started: processStartTime(pid) }
  strays.push(p)
  return p
}

/** Sends a prompt and returns the text of the assistant's answer once the turn's result arrives. */
async function turnText (holder: TestClient, prompt: string): Promise<string> {
  const from = holder.frames.length
  holder.sendUser(prompt)
  await holder.waitFor((f) => f.type === 'result', 10_000, from)
  return holder.frames.slice(from).filter((f) => f.type === 'assistant').flatMap((f) => f.message.content)
    .filter((b: any) => b.type === 'text').map((b: any) => b.text as string).join('\n')
}

describe('a gateway crash', () => {
  const auth = { authorization: `Bearer ${TOKEN_A}` }
  const dataDir = mkdtempSync(join(tmpdir(), 'cgw-orphans-'))
  const prefix = `cgw-test:${randomUUID()}:`
  const gateways: GatewayProcess[] = []
  const env = { ...fakeCliEnv(dataDir), RATE_LIMIT_PER_MINUTE: '100000', REDIS_URL, REDIS_PREFIX: prefix }
  after(async () => {
    for (const g of gateways) await g.kill()
    await deleteKeys(REDIS_URL, prefix)
    await rm(dataDir, { recursive: true, force: true })
  })

  /** A gateway with one session whose CLI started `sleep 1000 &`: the processes involved. */
  async function sessionWithBackgroundTool (t: { after: (fn: () => void) => void }): Promise<{ gateway: GatewayProcess, session: { id: string }, cli: Started, sleep: Started, helper: Started }> {
    const gateway = await startGatewayProcess(env)
    gateways.push(gateway)
    const res = await fetch(`${gateway.url}/v1/sessions`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: '{}' })
    assert.equal(res.status, 201)
    const session = await res.json() as { id: string, pid: number }
    assert.ok(Number.isInteger(session.pid) && processAlive(session.pid), 'the session\'s CLI runs')
    const cli = remember(session.pid)
    const helper = remember(parentOf(cli.pid))
    assert.equal(parentOf(helper.pid), gateway.pid, 'the CLI\'s parent is the gateway\'s spawn helper')
    const holder = await TestClient.open(`${gateway.url.replace('http', 'ws')}/v1/sessions/${session.id}/ws`, auth)
    t.after(() => holder.terminate())
    await holder.waitFor(isHello)

    const text = await turnText(holder, 'run sleep 1000 >/dev/null 2>&1 & echo $!')
    const match = /^(\d+)\n\[exit 0\]/.exec(text)
    assert.ok(match !== null, `the fake CLI's answer names the background pid: ${JSON.stringify(text)}`)
    const sleep = remember(Number(match[1]))
    assert.ok(processAlive(sleep.pid))
    return { gateway, session, cli, sleep, helper }
  }

  it('leaves its spawn helper to end its CLIs and their tool processes at once', { timeout: 30_000 }, async (t) => {
    const { gateway, cli, sleep, helper } = await sessionWithBackgroundTool(t)
    await gateway.kill()
    await eventually(() => !processAlive(sleep.pid) && !processAlive(cli.pid), 10_000, 'the CLI and its background process to be ended by the helper')
    await eventually(() => !processAlive(helper.pid), 5000, 'the helper to exit')
  })

  it('leaves no tool process of its CLIs running once the next gateway is up, also when its spawn helper died with it', { timeout: 30_000 }, async (t) => {
    const { gateway: first, session, cli, sleep, helper } = await sessionWithBackgroundTool(t)
    // Both SIGKILLed, the helper first: nothing is left to end the group but the next gateway.
    process.kill(helper.pid, 'SIGKILL')
    await eventually(() => !processAlive(helper.pid), 5000, 'the helper to be gone')
    await first.kill()
    await eventually(() => !processAlive(cli.pid), 10_000, 'the CLI to die of its broken pipe')
    assert.ok(processAlive(sleep.pid), 'the background process outlived the gateway and its CLI')
    assert.equal(processStartTime(sleep.pid), sleep.started, 'still the same process')
    assert.ok(readdirSync(join(dataDir, 'pids')).some((f) => f.startsWith(`${session.id}.`) && f.endsWith('.pid')), 'the crash left the CLI\'s pid file')

    const second = await startGatewayProcess(env)
    gateways.push(second)
    await eventually(() => !processAlive(sleep.pid), 5000, 'the orphaned background process to be ended')
    assert.deepEqual(readdirSync(join(dataDir, 'pids')).filter((f) => f.startsWith(`${session.id}.`)), [], 'the pid file was consumed')

    const after = await fetch(`${second.url}/v1/sessions/${session.id}`, { headers: auth })
    assert.equal(after.status, 200)
    const record = await after.json() as { status: string, exit?: { reason?: string } }
    assert.equal(record.status, 'stopped')
    assert.equal(record.exit?.reason, 'lost')
  })
})

describe('the reaper and reused process group ids', () => {
  /**
   * A process group whose leader has exited while one member (a `sleep`) runs
   * on, as a crashed gateway's CLI leaves it. Resolves with the group id and
   * the leader's start time.
   */
  async function leaderlessGroup (): Promise<{ pgid: number, leaderStarted: string, member: Started }> {
    const shell: ChildProcess = spawn('/bin/sh', ['-c', 'sleep 600 >/dev/null 2>&1 & echo $!; read line'], { detached: true, stdio: ['pipe', 'pipe', 'ignore'] })
    const exited = new Promise((resolve) => shell.once('exit', resolve))
    const pgid = shell.pid as number
    const leaderStarted = processStartTime(pgid) // the shell waits on `read`: still there
    let out = ''
    shell.stdout?.on('data', (d: Buffer) => { out += d.toString('utf8') })
    const memberPid = await eventually(() => /^(\d+)\n/.exec(out)?.[1], 5000, 'the background pid')
    const member = remember(Number(memberPid))
    shell.stdin?.end()
    await exited
    assert.ok(leaderStarted !== null && member.started !== null)
    return { pgid, leaderStarted, member }
  }

  function pidDir (t: { after: (fn: () => Promise<void>) => void }): string {
    const dir = mkdtempSync(join(tmpdir(), 'cgw-reaper-'))
    t.after(() => rm(dir, { recursive: true, force: true }))
    mkdirSync(join(dir, 'pids'))
    return join(dir, 'pids')
  }

  it('ends a group whose leader is gone when its members started after the recorded leader', async (t) => {
    const pids = pidDir(t)
    const group = await leaderlessGroup()
    writeFileSync(join(pids, 'a.pid'), `${group.pgid}\n/bin/sh\n${group.leaderStarted}\n`)
    assert.deepEqual(await reapOrphans(pids, 1000), [group.pgid])
    await eventually(() => !processAlive(group.member.pid), 5000, 'the member to be ended')
  })

  it('spares a group whose leader is gone when a member started before the recorded start time (the id was reused)', async (t) => {
    const pids = pidDir(t)
    const group = await leaderlessGroup()
    writeFileSync(join(pids, 'a.pid'), `${group.pgid}\n/bin/sh\n${BigInt(group.member.started as string) + 1n}\n`)
    writeFileSync(join(pids, 'b.pid'), `${group.pgid}\n/bin/sh\n\n`) // no start time recorded: nothing to check members against
    assert.deepEqual(await reapOrphans(pids, 1000), [])
    assert.ok(processAlive(group.member.pid))
    assert.deepEqual(readdirSync(pids), [])
  })

  it('spares a live leader (and its group) whose start time differs from the recorded one', async (t) => {
    const pids = pidDir(t)
    const leader = spawn('sleep', ['600'], { detached: true, stdio: 'ignore' }) // own process group, like a CLI
    const started = remember(leader.pid as number)
    writeFileSync(join(pids, 'a.pid'), `${started.pid}\nsleep\n${BigInt(started.started as string) - 1n}\n`)
    assert.deepEqual(await reapOrphans(pids, 1000), [])
    assert.ok(processAlive(started.pid))
    leader.kill('SIGKILL')
  })
})
