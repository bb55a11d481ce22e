/**
 * A CLI's end is recorded although a process that left its process group
 * (`setsid`) still holds the CLI's stdout and stderr: a wrapper or tool that
 * daemonises without closing them. Its pipes then never close, and a gateway
 * waiting for that kept the session "stopping" (or "running", for a CLI that
 * exited by itself) for ever, its DELETE unanswered and its MAX_SESSIONS
 * slot taken. With a cgroup per CLI, the setsid process is ended then too.
 */
import assert from 'node:assert/strict'
import { chmodSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { randomBytes } from 'node:crypto'
import { describe, it } from 'node:test'
import { processStartTime } from '../../src/cli/reaper.js'
import { findParents } from '../../src/limits/cgroup-parents.js'
import { FAKE_CLI, eventually, processAlive } from '../support/gateway.js'
import { cgroupsUnavailable, removeCgroupParent } from '../support/sandbox.js'
import { LIMITS, client, gateway } from '../support/sessions.js'

/** A CLI command that starts `setsid sleep` holding its stdout and stderr, then runs the fake CLI; the sleep's pid goes to `held.pid`. */
function heldPipesCli (t: { after: (fn: () => unknown) => void }): { command: string, heldPid: () => number | undefined } {
  const dir = mkdtempSync(join(tmpdir(), 'cgw-held-'))
  const pidFile = join(dir, 'held.pid')
  const command = join(dir, 'held-cli.sh')
  writeFileSync(command, `#!/bin/sh\nsetsid sleep 600 &\necho $! > '${pidFile}.tmp' && mv '${pidFile}.tmp' '${pidFile}'\nexec '${FAKE_CLI}' "$@"\n`)
  chmodSync(command, 0o755)
  const heldPid = (): number | undefined => {
    try { return Number(readFileSync(pidFile, 'utf8')) } catch { return undefined }
  }
  t.after(async () => {
    const pid = heldPid()
    if (pid !== undefined && processStartTime(pid) !== null) {
      try { process.kill(pid, 'SIGKILL') } catch { /* gone meanwhile */ }
    }
    await rm(dir, { recursive: true, force: true })
  })
  return { command, heldPid }
}

describe('a CLI whose pipes a setsid process holds', () => {
  it('is recorded stopped once DELETE has stopped it', { timeout: 30_000 }, async (t) => {
    const { command, heldPid } = heldPipesCli(t)
    const gw = await gateway(t, { env: { ...LIMITS, CLAUDE_BIN: command } })
    const created = await gw.createSession()
    const held = await eventually(() => heldPid(), 5000, 'the setsid process to start')
    assert.ok(processAlive(held))
    void gw.request('DELETE', `/v1/sessions/${created.id as string}`)
    await eventually(() => !processAlive(created.pid as number), 10_000, 'the CLI to be gone')
    const status = await eventually(async () => {
      const s = (await gw.request('GET', `/v1/sessions/${created.id as string}`)).body
      return s.status === 'stopped' ? s : undefined
    }, 10_000, 'the session to be recorded stopped')
    assert.equal(status.pid, null)
  })

  it('is recorded exited when the CLI crashes by itself', { timeout: 30_000 }, async (t) => {
    const { command, heldPid } = heldPipesCli(t)
    const gw = await gateway(t, { env: { ...LIMITS, CLAUDE_BIN: command } })
    const created = await gw.createSession()
    await eventually(() => heldPid(), 5000, 'the setsid process to start')
    const holder = await client(gw, t, created.id as string)
    holder.sendUser('crash')
    await eventually(() => !processAlive(created.pid as number), 10_000, 'the CLI to be gone')
    await holder.waitFor((f) => f.type === 'gateway' && f.subtype === 'status' && f.status === 'exited', 10_000)
  })

  it('has the setsid process ended with its cgroup (CLI_PIDS_MAX) once stopped', { timeout: 30_000, skip: cgroupsUnavailable() ?? false }, async (t) => {
    const { command, heldPid } = heldPipesCli(t)
    const cgroup = `/cgw-test-${randomBytes(4).toString('hex')}`
    const gw = await gateway(t, { env: { ...LIMITS, CLAUDE_BIN: command, CLI_CGROUP: cgroup, CLI_PIDS_MAX: '64' } })
    t.after(async () => {
      await gw.close()
      removeCgroupParent(findParents(['pids'], cgroup))
    })
    const created = await gw.createSession()
    const held = await eventually(() => heldPid(), 5000, 'the setsid process to start')
    void gw.request('DELETE', `/v1/sessions/${created.id as string}`)
    await eventually(() => !processAlive(held), 10_000, 'the setsid process to be ended')
  })
})
