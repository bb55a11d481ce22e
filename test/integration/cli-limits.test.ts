/**
 * CLI_PIDS_MAX, CLI_MEMORY_MAX_MB, CLI_CPUS and the TENANT_ limits with real
 * cgroups (v2 where the machine offers the controllers there, else v1) and
 * the fake CLI's `run` tool: what a runaway tool meets inside its own
 * session, and a tenant's sessions together, that its neighbours do not
 * notice, and that nothing it started outlives the session. Each test uses
 * a cgroup parent of its own (CLI_CGROUP).
 */
import assert from 'node:assert/strict'
import { spawn, spawnSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, it, type TestContext } from 'node:test'
import { type CgroupParents, findParents, parentFolders } from '../../src/limits/cgroup-parents.js'
import { TOKEN_A, TOKEN_B, type TestGateway, eventually, gateway } from '../support/gateway.js'
import { cgroupsUnavailable, pidsWithArgv, removeCgroupParent, run, sandboxUnavailable } from '../support/sandbox.js'

const unavailable = cgroupsUnavailable() ?? sandboxUnavailable()

interface Limited { gw: TestGateway, parents: CgroupParents }

/** A gateway whose CLIs get `limits` under a fresh cgroup parent, removed after the test. */
async function limitedGateway (t: TestContext, env: Record<string, string>): Promise<Limited> {
  const cgroup = `/cgw-test-${randomBytes(4).toString('hex')}`
  const gw = await gateway(t, { env: { SANDBOX: 'bwrap', CLAUDE_ARGS_EXTRA: '', CLI_CGROUP: cgroup, ...env } })
  const setting = { memory: 'MEMORY_MAX_MB', pids: 'PIDS_MAX', cpu: 'CPUS' } as const
  const parents = findParents((['memory', 'pids', 'cpu'] as const).filter((c) => env[`CLI_${setting[c]}`] !== undefined || env[`TENANT_${setting[c]}`] !== undefined), cgroup)
  t.after(async () => {
    await gw.close()
    removeCgroupParent(parents)
  })
  return { gw, parents }
}

/** The CLI (or tenant) cgroups under the parents, or under `below` in them (one name per CLI start, whatever the hierarchy). */
function cliCgroups (parents: CgroupParents, below = ''): string[] {
  const dir = join(parentFolders(parents)[0] as string, below)
  return readdirSync(dir, { withFileTypes: true }).filter((e) => e.isDirectory() && e.name.startsWith('cgw-')).map((e) => e.name)
}

/** A cgroup's CPU throttling as the kernel counts it (cpu.stat: v2 throttled_usec, v1 throttled_time in ns). */
function cpuStat (dir: string): { throttled: number, throttledUs: number } {
  const fields = new Map(readFileSync(join(dir, 'cpu.stat'), 'utf8').trim().split('\n').map((l) => l.split(' ') as [string, string]))
  const ns = fields.get('throttled_time')
  return {
    throttled: Number(fields.get('nr_throttled')),
    throttledUs: ns !== undefined ? Number(ns) / 1000 : Number(fields.get('throttled_usec'))
  }
}

async function session (gw: TestGateway, token?: string): Promise<{ id: string, holder: Awaited<ReturnType<TestGateway['connect']>> }> {
  const { id } = await gw.createSession({}, token)
  const holder = await gw.connect(id, '', token)
  await holder.waitFor((f) => f.subtype === 'hello')
  return { id, holder }
}

describe('per-CLI resource limits (cgroups)', { skip: unavailable ?? false }, () => {
  it('stops a fork bomb at CLI_PIDS_MAX inside its own session; another tenant\'s tools still start', async (t) => {
    const { gw } = await limitedGateway(t, { CLI_PIDS_MAX: '48' })
    const a = await session(gw)
    const b = await session(gw, TOKEN_B)
    const bomb = await run(a.holder, 'for i in $(seq 200); do sleep 61 </dev/null >/dev/null 2>&1 & done; echo loop-done', 30_000)
    assert.match(bomb, /fork|Resource temporarily unavailable/i, 'the shell was refused new processes')
    const held = pidsWithArgv(['sleep', '61']).length
    assert.ok(held > 0 && held < 48, `${held} sleeps run: some started, fewer than the limit`)
    // While A's cgroup is full, B starts processes as usual.
    assert.equal(await run(b.holder, 'for i in 1 2 3 4 5 6 7 8; do sleep 0 & done; wait; echo fine'), 'fine\n[exit 0]')
    assert.equal((await gw.request('DELETE', `/v1/sessions/${a.id}`)).status, 200)
    await eventually(() => pidsWithArgv(['sleep', '61']).length === 0, 10_000, 'the bomb\'s processes ended with the session')
  })

  it('kills the tool that passes CLI_MEMORY_MAX_MB, keeps the session, and says so in the exit', async (t) => {
    const { gw } = await limitedGateway(t, { CLI_MEMORY_MAX_MB: '160' })
    const { id, holder } = await session(gw)
    // tail keeps a line it has not seen the end of: 600 MiB of zeros, no newline.
    assert.match(await run(holder, 'head -c 600M /dev/zero | tail -n 1 >/dev/null', 30_000), /^Killed\n\[exit 137\]$/, 'SIGKILLed by the kernel')
    assert.equal(await run(holder, 'echo still here'), 'still here\n[exit 0]', 'the CLI itself was not the one killed')
    assert.equal((await gw.request('DELETE', `/v1/sessions/${id}`)).status, 200)
    const { body } = await gw.request('GET', `/v1/sessions/${id}`)
    assert.equal(body.exit.reason, 'stopped')
    assert.ok(body.exit.oom_kills >= 1, `exit: ${JSON.stringify(body.exit)}`)
    const metrics = await (await fetch(`${gw.url}/metrics`, { headers: { authorization: `Bearer ${TOKEN_A}` } })).text()
    assert.match(metrics, new RegExp(`^cgw_cli_oom_kills_total ${body.exit.oom_kills as number}$`, 'm'))
  })

  it('holds all of a tenant\'s CLIs together to TENANT_PIDS_MAX; another tenant\'s tools still start; the tenant\'s cgroup goes with its last CLI', async (t) => {
    const { gw, parents } = await limitedGateway(t, { TENANT_PIDS_MAX: '128' })
    const a1 = await session(gw)
    const a2 = await session(gw)
    const b = await session(gw, TOKEN_B)
    const tenantA = `cgw-${process.pid}-tenant-tenant-a`
    assert.deepEqual(cliCgroups(parents).sort(), [tenantA, `cgw-${process.pid}-tenant-tenant-b`])
    assert.deepEqual(cliCgroups(parents, tenantA).map((n) => n.split('-').slice(2, -1).join('-')).sort(), [a1.id, a2.id].sort(), 'both of A\'s CLIs inside A\'s cgroup')
    assert.equal(readFileSync(join(parents.dirs.get('pids') as string, tenantA, 'pids.max'), 'utf8').trim(), '128')
    // A's first session holds 30 processes; the second one's fork bomb then finds fewer left than 128 alone would give it.
    assert.equal(await run(a1.holder, 'for i in $(seq 30); do sleep 62 </dev/null >/dev/null 2>&1 & done; echo held'), 'held\n[exit 0]')
    const bomb = await run(a2.holder, 'for i in $(seq 200); do sleep 61 </dev/null >/dev/null 2>&1 & done; echo loop-done', 30_000)
    assert.match(bomb, /fork|Resource temporarily unavailable/i, 'the shell was refused new processes')
    const held = pidsWithArgv(['sleep', '62']).length
    const bombed = pidsWithArgv(['sleep', '61']).length
    assert.equal(held, 30, 'the first session\'s processes kept running')
    assert.ok(bombed > 0 && held + bombed < 128, `${bombed} of the bomb's sleeps run beside ${held}: together fewer than the tenant's limit`)
    assert.equal(await run(b.holder, 'for i in 1 2 3 4 5 6 7 8; do sleep 0 & done; wait; echo fine'), 'fine\n[exit 0]', 'tenant B meets its own limit, not A\'s')
    assert.equal((await gw.request('DELETE', `/v1/sessions/${a1.id}`)).status, 200)
    assert.ok(cliCgroups(parents).includes(tenantA), 'A\'s cgroup stays while A has a CLI')
    assert.equal((await gw.request('DELETE', `/v1/sessions/${a2.id}`)).status, 200)
    await eventually(() => pidsWithArgv(['sleep', '61']).length + pidsWithArgv(['sleep', '62']).length === 0 && !cliCgroups(parents).includes(tenantA),
      10_000, 'A\'s processes ended and its cgroup removed with its last CLI')
    assert.deepEqual(cliCgroups(parents), [`cgw-${process.pid}-tenant-tenant-b`], 'B\'s still there: B\'s session runs')
  })

  it('kills the tool that passes TENANT_MEMORY_MAX_MB and counts it in its own CLI\'s exit', async (t) => {
    const { gw, parents } = await limitedGateway(t, { TENANT_MEMORY_MAX_MB: '200' })
    const { id, holder } = await session(gw)
    const [cli] = cliCgroups(parents, `cgw-${process.pid}-tenant-tenant-a`)
    assert.ok(cli !== undefined)
    assert.match(await run(holder, 'head -c 600M /dev/zero | tail -n 1 >/dev/null', 30_000), /^Killed\n\[exit 137\]$/, 'SIGKILLed by the kernel')
    assert.equal(await run(holder, 'echo still here'), 'still here\n[exit 0]')
    assert.equal((await gw.request('DELETE', `/v1/sessions/${id}`)).status, 200)
    const { body } = await gw.request('GET', `/v1/sessions/${id}`)
    assert.ok(body.exit.oom_kills >= 1, `exit: ${JSON.stringify(body.exit)}`)
  })

  it('holds busy loops to CLI_CPUS of CPU time: the kernel throttles the CLI\'s cgroup', async (t) => {
    const { gw, parents } = await limitedGateway(t, { CLI_CPUS: '0.2' })
    const { holder } = await session(gw)
    const [name] = cliCgroups(parents)
    assert.ok(name !== undefined, 'the CLI has its cgroup')
    // Four loops at once (about 0.3 s of CPU together): their cgroup wants more than 0.2 of a core even
    // when a loaded machine gives each task less, so the quota is reached. Only a quota makes the kernel
    // throttle (cpu.stat), whatever the load; a wall-clock ratio alone also passes on a busy machine without one.
    const loop = 'i=0; while [ $i -lt 60000 ]; do i=$((i+1)); done'
    const out = await run(holder, `s=$(date +%s%N); for j in 1 2 3 4; do (${loop}) & done; wait; e=$(date +%s%N); times; echo wall=$(( (e - s) / 1000000 ))`, 60_000)
    const stat = cpuStat(join(parents.dirs.get('cpu') as string, name))
    // `times`, second line: the CPU time of the shell's (waited) children, the loops.
    const cpu = /^\d+m[\d.]+s \d+m[\d.]+s\n(\d+)m([\d.]+)s (\d+)m([\d.]+)s$/m.exec(out)
    const wall = /wall=(\d+)/.exec(out)
    assert.ok(cpu !== null && wall !== null, out)
    const cpuMs = (Number(cpu[1]) * 60 + Number(cpu[2]) + Number(cpu[3]) * 60 + Number(cpu[4])) * 1000
    assert.ok(cpuMs > 50, `the loops did work: ${cpuMs} ms of CPU`)
    assert.ok(stat.throttled > 0 && stat.throttledUs > 0, `the kernel throttled the CLI's cgroup: ${JSON.stringify(stat)}`)
    // One period's 20 ms may come at once; beyond that 0.2 of a core, so under 0.3 over at least 5 periods.
    assert.ok(cpuMs / Number(wall[1]) <= 0.3, `CPU ${cpuMs} ms over ${wall[1]} ms of wall time: at most about 0.2 of a core`)
  })

  it('gives each CLI start its own cgroup, and ends what a setsid tool left, SIGTERM first, then removes it (SANDBOX=none)', async (t) => {
    const { gw, parents } = await limitedGateway(t, { CLI_PIDS_MAX: '64', SANDBOX: 'none' })
    const { id, holder } = await session(gw)
    // Out of the CLI's process group, so the stop ladder's group signals miss it: only the cgroup holds it.
    const script = 'trap "echo terminated > ended.txt; exit 0" TERM; while :; do sleep 0.2; done'
    assert.equal(await run(holder, `setsid sh -c '${script}' </dev/null >/dev/null 2>&1 & echo started`), 'started\n[exit 0]')
    const [loop] = await eventually(() => { const p = pidsWithArgv(['sh', '-c', script]); return p.length === 1 && p }, 5000, 'the setsid loop runs')
    const names = cliCgroups(parents)
    assert.ok(names.length === 1 && names[0]?.startsWith(`cgw-${process.pid}-${id}-`), `cgroups: ${names.join(' ')}`)
    const name = names[0] as string
    const { body } = await gw.request('GET', `/v1/sessions/${id}`)
    for (const dir of parentFolders(parents)) {
      const procs = readFileSync(join(dir, name, 'cgroup.procs'), 'utf8').split('\n').map(Number)
      assert.ok(procs.includes(body.pid) && procs.includes(loop as number), `the CLI (${body.pid}) and the loop (${loop}) in ${join(dir, name)}: ${procs.join(' ')}`)
    }
    assert.equal(readFileSync(join(parents.dirs.get('pids') as string, name, 'pids.max'), 'utf8').trim(), '64')
    assert.equal((await gw.request('DELETE', `/v1/sessions/${id}`)).status, 200)
    await eventually(() => pidsWithArgv(['sh', '-c', script]).length === 0 && cliCgroups(parents).length === 0, 10_000, 'loop ended and cgroup removed')
    assert.equal(readFileSync(join(gw.dataDir, 'workspaces', 'tenant-a', id, 'ended.txt'), 'utf8'), 'terminated\n', 'it got SIGTERM before any SIGKILL')
  })

  it('removes at start the CLI and tenant cgroups of a gateway process that is gone, ending what ran in them', async (t) => {
    const cgroup = `/cgw-test-${randomBytes(4).toString('hex')}`
    const parents = findParents(['pids'], cgroup)
    const gone = spawnSync('true').pid as number // a pid that no longer runs
    // One CLI's cgroup as CLI limits leave it, one inside a tenant's as tenant limits do.
    const names = [`cgw-${gone}-left-over`, join(`cgw-${gone}-tenant-acme`, `cgw-${gone}-s-1`)]
    const sleepers = names.map(() => spawn('sleep', ['63'], { stdio: 'ignore', detached: true }))
    t.after(() => { for (const s of sleepers) s.kill('SIGKILL') }) // a no-op once they are gone
    for (const dir of parentFolders(parents)) {
      names.forEach((name, i) => {
        mkdirSync(join(dir, name), { recursive: true })
        writeFileSync(join(dir, name, 'cgroup.procs'), String(sleepers[i]?.pid))
      })
    }
    const exited = sleepers.map(async (s) => await new Promise((resolve) => s.once('exit', (code, signal) => resolve(signal))))
    const gw = await gateway(t, { env: { CLI_CGROUP: cgroup, CLI_PIDS_MAX: '64' } })
    t.after(async () => {
      await gw.close()
      removeCgroupParent(parents)
    })
    assert.deepEqual(await Promise.all(exited), ['SIGTERM', 'SIGTERM'], 'ended as a stop ends a CLI: SIGTERM first (sleep goes on it)')
    assert.deepEqual(cliCgroups(parents), [], 'no cgroup of the gone gateway is left')
  })
})
