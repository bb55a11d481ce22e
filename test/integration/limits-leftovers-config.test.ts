/**
 * A gateway with per-CLI limits SIGKILLed mid-session leaves its CLI's
 * cgroup behind, with a `setsid` tool still running in it (its spawn helper
 * ends the CLI's process group, not that). The next gateway must end it and
 * remove the cgroup even when the limits changed meanwhile: another limit
 * (another hierarchy with cgroup v1), or none at all. Real gateway processes
 * and real cgroups, each test under a parent of its own; cgroup v1 or v2.
 */
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmdirSync } from 'node:fs'
import { rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, it, type TestContext } from 'node:test'
import { findParents, parentFolders } from '../../src/limits/cgroup-parents.js'
import { joinArgs } from '../../src/limits/limited-launcher.js'
import { isHello } from '../support/frames.js'
import { TestClient, TOKEN_A, eventually } from '../support/gateway.js'
import { type GatewayProcess, fakeCliEnv, startGatewayProcess } from '../support/gateway-process.js'
import { cgroupsUnavailable, pidsWithArgv, run } from '../support/sandbox.js'

const unavailable = cgroupsUnavailable()
const auth = { authorization: `Bearer ${TOKEN_A}` }

/** A loop out of the CLI's process group (setsid): only its cgroup holds it. Distinct per test, so each finds its own. */
const loopScript = (tag: string): string => `trap "exit 0" TERM; while :; do sleep 0.${tag}; done`

/** Starts a session on `gw` whose CLI leaves the setsid loop running; resolves with the loop's pid. */
async function leaveLoop (t: TestContext, gw: GatewayProcess, script: string): Promise<number> {
  const res = await fetch(`${gw.url}/v1/sessions`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: '{}' })
  assert.equal(res.status, 201, await res.clone().text())
  const { id } = await res.json() as { id: string }
  const holder = await TestClient.open(`${gw.url.replace('http', 'ws')}/v1/sessions/${id}/ws`, auth)
  t.after(() => holder.terminate())
  await holder.waitFor(isHello)
  assert.equal(await run(holder, `setsid sh -c '${script}' </dev/null >/dev/null 2>&1 & echo started`), 'started\n[exit 0]')
  const [loop] = await eventually(() => { const p = pidsWithArgv(['sh', '-c', script]); return p.length === 1 && p }, 5000, 'the setsid loop runs')
  return loop as number
}

/** The `cgw-<pid>-…` folders right under `dir`. */
function cgwFolders (dir: string, pid: number): string[] {
  return existsSync(dir) ? readdirSync(dir).filter((n) => n.startsWith(`cgw-${pid}-`)) : []
}

/** After a test: ends a loop the gateways failed to end, and removes whatever is left under `dirs`, then `dirs`. */
async function cleanUp (dirs: string[], script: string): Promise<void> {
  for (const pid of pidsWithArgv(['sh', '-c', script])) process.kill(pid, 'SIGKILL')
  await eventually(() => pidsWithArgv(['sh', '-c', script]).length === 0, 5000, 'the loop gone')
  for (const dir of dirs) {
    if (!existsSync(dir)) continue
    // A killed process (a gateway's spawn helper, the loop) leaves its cgroup a moment after it is gone from /proc.
    const names = readdirSync(dir, { withFileTypes: true }).filter((e) => e.isDirectory()).map((e) => join(dir, e.name))
    for (const folder of [...names, dir]) await eventually(() => { try { rmdirSync(folder); return true } catch { return false } }, 5000, `${folder} removable`)
  }
}

/**
 * `src/server.ts` started in the cgroup whose `cgroup.procs` files are
 * given (as a CLI joins its own), so that its own cgroup, where CLI cgroups
 * go without CLI_CGROUP, is the test's.
 */
async function startJoinedGateway (procsFiles: string[], env: Record<string, string>): Promise<GatewayProcess> {
  return await startGatewayProcess(env, 15_000, { command: (node, args) => ({ file: '/bin/sh', args: joinArgs(procsFiles, node, args) }) })
}

// Side by side: each case has its own cgroup parent, DATA_DIR (so pid files) and loop script, and a gateway
// sweeps only its own parent; most of a case is waiting on its gateways' starts.
describe('cgroups a SIGKILLed gateway left, after the limits changed', { skip: unavailable ?? false, concurrency: true }, () => {
  it('are ended and removed by the next gateway with another limit in another hierarchy (CLI_MEMORY_MAX_MB, then CLI_PIDS_MAX)', { timeout: 60_000 }, async (t) => {
    const cgroup = `/cgw-test-${randomBytes(4).toString('hex')}`
    const memory = parentFolders(findParents(['memory'], cgroup))[0] as string
    const pids = parentFolders(findParents(['pids'], cgroup))[0] as string
    const dataDir = mkdtempSync(join(tmpdir(), 'cgw-leftovers-'))
    const script = loopScript('31')
    const gateways: GatewayProcess[] = []
    t.after(async () => {
      for (const g of gateways) await g.kill()
      await cleanUp([memory, pids], script)
      await rm(dataDir, { recursive: true, force: true })
    })
    const first = await startGatewayProcess({ ...fakeCliEnv(dataDir), CLI_CGROUP: cgroup, CLI_MEMORY_MAX_MB: '256' })
    gateways.push(first)
    await leaveLoop(t, first, script)
    assert.equal(cgwFolders(memory, first.pid).length, 1, 'the CLI\'s memory cgroup')
    await first.kill()

    const second = await startGatewayProcess({ ...fakeCliEnv(dataDir), CLI_CGROUP: cgroup, CLI_PIDS_MAX: '64' })
    gateways.push(second)
    // Its start (before it answers /healthz) sweeps: nothing is left to wait for.
    assert.deepEqual(pidsWithArgv(['sh', '-c', script]), [], 'the loop left in the memory cgroup was ended')
    assert.deepEqual(cgwFolders(memory, first.pid), [], 'the first gateway\'s memory cgroup was removed')
  })

  it('are ended and removed by the next gateway with no limits at all, which touches no other folder', { timeout: 60_000 }, async (t) => {
    const cgroup = `/cgw-test-${randomBytes(4).toString('hex')}`
    const parents = findParents(['memory', 'pids'], cgroup)
    const dirs = parentFolders(parents)
    const memory = parents.dirs.get('memory') as string
    for (const dir of dirs) mkdirSync(dir)
    // Not a leftover: a name of another kind, and one of a gateway pid that runs (this test's).
    const others = ['keep-me', `cgw-${process.pid}-alive`, 'cgw-x-1']
    for (const name of others) mkdirSync(join(memory, name))
    const dataDir = mkdtempSync(join(tmpdir(), 'cgw-leftovers-'))
    const script = loopScript('32')
    const gateways: GatewayProcess[] = []
    t.after(async () => {
      for (const g of gateways) await g.kill()
      await cleanUp(dirs, script)
      await rm(dataDir, { recursive: true, force: true })
    })
    const procs = dirs.map((dir) => join(dir, 'cgroup.procs'))
    // No CLI_CGROUP: the CLIs' cgroups go in the gateway's own, the test's parent.
    const first = await startJoinedGateway(procs, { ...fakeCliEnv(dataDir), CLI_MEMORY_MAX_MB: '256' })
    gateways.push(first)
    await leaveLoop(t, first, script)
    assert.equal(cgwFolders(memory, first.pid).length, 1, 'the CLI\'s memory cgroup')
    await first.kill()

    const second = await startJoinedGateway(procs, fakeCliEnv(dataDir))
    gateways.push(second)
    assert.deepEqual(pidsWithArgv(['sh', '-c', script]), [], 'the loop left in the memory cgroup was ended')
    assert.deepEqual(cgwFolders(memory, first.pid), [], 'the first gateway\'s memory cgroup was removed')
    assert.deepEqual(others.filter((name) => !existsSync(join(memory, name))), [], 'folders not named as a gone gateway names them stay')
  })
})
