/**
 * The parts of the per-CLI limits that need no real cgroup: reading the
 * mount table, choosing v2 or v1, the v2 parent's preparation and the
 * files a CLI cgroup is given (on folders standing in for cgroupfs: this
 * machine's controllers are on v1, whose real path test/integration/
 * cli-limits.test.ts takes), the start-up refusal, and the joining shell.
 */
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import pino from 'pino'
import { loadConfig } from '../../src/config.js'
import { findParents, parseMountInfo, parseProcCgroup, prepareParents } from '../../src/limits/cgroup-parents.js'
import { CliCgroup } from '../../src/limits/cli-cgroup.js'
import { gatewayLimits } from '../../src/limits/gateway-limits.js'
import { joinArgs } from '../../src/limits/limited-launcher.js'
import { TenantCgroups } from '../../src/limits/tenant-cgroups.js'

const V1 = [
  '30 25 0:26 / /sys/fs/cgroup/pids rw,relatime shared:9 - cgroup cgroup rw,pids',
  '31 25 0:27 / /sys/fs/cgroup/cpu,cpuacct rw,relatime shared:10 - cgroup cgroup rw,cpu,cpuacct',
  '32 25 0:28 /docker/abc /sys/fs/cgroup/memory rw,relatime shared:11 - cgroup cgroup rw,memory'
]

/** A /proc with only what findParents reads. */
function fakeProc (mountinfo: string[], cgroup: string[]): string {
  const proc = mkdtempSync(join(tmpdir(), 'cgw-proc-'))
  mkdirSync(join(proc, 'self'))
  writeFileSync(join(proc, 'self', 'mountinfo'), mountinfo.join('\n') + '\n')
  writeFileSync(join(proc, 'self', 'cgroup'), cgroup.join('\n') + '\n')
  return proc
}

describe('cgroup mounts', () => {
  it('reads v1 and v2 mounts from mountinfo, escapes included', () => {
    const mounts = parseMountInfo([...V1, '33 25 0:29 / /sys/fs/cgroup/with\\040space rw - cgroup2 cgroup2 rw,nsdelegate', '40 1 0:5 / /proc rw - proc proc rw'].join('\n'))
    assert.deepEqual(mounts.map((m) => [m.version, m.controllers.filter((c) => c !== 'rw'), m.mountPoint, m.root]), [
      [1, ['pids'], '/sys/fs/cgroup/pids', '/'],
      [1, ['cpu', 'cpuacct'], '/sys/fs/cgroup/cpu,cpuacct', '/'],
      [1, ['memory'], '/sys/fs/cgroup/memory', '/docker/abc'],
      [2, [], '/sys/fs/cgroup/with space', '/']
    ])
  })

  it('reads a process\'s cgroup per controller', () => {
    const paths = parseProcCgroup('8:pids:/a\n4:cpu,cpuacct:/b\n0::/c\n')
    assert.deepEqual([...paths], [['pids', '/a'], ['cpu', '/b'], ['cpuacct', '/b'], ['', '/c']])
  })

  it('takes v1 hierarchies when v2 lacks the controllers, the gateway\'s own cgroup by default, mount roots allowed for', () => {
    const unified = mkdtempSync(join(tmpdir(), 'cgw-v2h-'))
    writeFileSync(join(unified, 'cgroup.controllers'), 'hugetlb\n')
    const proc = fakeProc([...V1, `33 25 0:29 / ${unified} rw - cgroup2 cgroup2 rw`], ['8:pids:/', '4:cpu,cpuacct:/x', '3:memory:/docker/abc/y', '0::/'])
    const found = findParents(['memory', 'pids', 'cpu'], undefined, proc)
    assert.equal(found.version, 1)
    assert.deepEqual([...found.dirs], [['memory', '/sys/fs/cgroup/memory/y'], ['pids', '/sys/fs/cgroup/pids'], ['cpu', '/sys/fs/cgroup/cpu,cpuacct/x']])
    assert.equal(findParents(['pids'], '/cgw', proc).dirs.get('pids'), '/sys/fs/cgroup/pids/cgw')
    assert.throws(() => findParents(['memory'], '/elsewhere', proc), /cgroup \/elsewhere is outside \/docker\/abc, the part of the memory hierarchy mounted at \/sys\/fs\/cgroup\/memory/)
  })

  it('takes v2 when the parent can hand down every controller needed', () => {
    const root = mkdtempSync(join(tmpdir(), 'cgw-v2-'))
    mkdirSync(join(root, 'svc'))
    writeFileSync(join(root, 'svc', 'cgroup.controllers'), 'cpuset cpu io memory pids\n')
    const proc = fakeProc([...V1, `33 25 0:29 / ${root} rw - cgroup2 cgroup2 rw`], ['8:pids:/', '0::/svc'])
    const found = findParents(['memory', 'pids'], undefined, proc)
    assert.equal(found.version, 2)
    assert.deepEqual([...found.dirs], [['memory', join(root, 'svc')], ['pids', join(root, 'svc')]])
    // A parent not made yet: what its nearest existing ancestor offers.
    assert.equal(findParents(['cpu'], '/svc/cli/deeper', proc).dirs.get('cpu'), join(root, 'svc', 'cli', 'deeper'))
  })

  it('says which controller is missing', () => {
    const proc = fakeProc(['33 25 0:29 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw'], ['0::/'])
    assert.throws(() => findParents(['memory'], undefined, proc), /no cgroup hierarchy here offers the memory controller/)
  })
})

describe('a v2 parent and a CLI cgroup (folders standing in for cgroupfs)', () => {
  /** A non-root v2 cgroup folder (it has a cgroup.type) holding `pids`. */
  function cgroupWith (dir: string, pids: string[]): void {
    mkdirSync(dir, { recursive: true })
    writeFileSync(join(dir, 'cgroup.type'), 'domain\n')
    writeFileSync(join(dir, 'cgroup.procs'), pids.map((p) => `${p}\n`).join(''))
  }

  it('moves the processes in a non-root parent into a leaf, then enables the controllers', () => {
    const dir = mkdtempSync(join(tmpdir(), 'cgw-v2p-'))
    cgroupWith(dir, ['4242', '4243'])
    writeFileSync(join(dir, 'cgroup.subtree_control'), 'cpu\n')
    const writes: string[] = []
    prepareParents({ version: 2, dirs: new Map([['memory', dir], ['pids', dir], ['cpu', dir]]) }, (file, text) => { writes.push(`${file.slice(dir.length)} ${text}`); writeFileSync(file, text) })
    assert.deepEqual(writes, ['/gateway/cgroup.procs 4242', '/gateway/cgroup.procs 4243', '/cgroup.subtree_control +memory +pids'], 'moved first; cpu was enabled already')
  })

  it('moves a gateway restarted into a parent whose controllers are enabled already', () => {
    const dir = mkdtempSync(join(tmpdir(), 'cgw-v2s-'))
    cgroupWith(dir, ['5150'])
    writeFileSync(join(dir, 'cgroup.subtree_control'), 'pids\n')
    const writes: string[] = []
    prepareParents({ version: 2, dirs: new Map([['pids', dir]]) }, (file, text) => { writes.push(`${file.slice(dir.length)} ${text}`); writeFileSync(file, text) })
    assert.deepEqual(writes, ['/gateway/cgroup.procs 5150'])
  })

  it('moves nothing out of the root cgroup (it has no cgroup.type)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'cgw-v2r-'))
    writeFileSync(join(dir, 'cgroup.procs'), '1\n')
    prepareParents({ version: 2, dirs: new Map([['pids', dir]]) })
    assert.equal(existsSync(join(dir, 'gateway')), false)
    assert.equal(readFileSync(join(dir, 'cgroup.subtree_control'), 'utf8'), '+pids')
  })

  it('refuses, saying why, when a level above the parent has processes', () => {
    const root = mkdtempSync(join(tmpdir(), 'cgw-v2b-'))
    cgroupWith(root, ['77'])
    assert.throws(() => prepareParents({ version: 2, dirs: new Map([['pids', join(root, 'cli')]]) }),
      /cannot enable pids below .*: processes run in it .* name in CLI_CGROUP a cgroup below one without processes/)
    assert.equal(existsSync(join(root, 'cli')), false, 'nothing made')
  })

  it('makes missing levels, each handing the controllers on', () => {
    const root = mkdtempSync(join(tmpdir(), 'cgw-v2m-'))
    writeFileSync(join(root, 'cgroup.subtree_control'), '')
    const dir = join(root, 'a', 'b')
    prepareParents({ version: 2, dirs: new Map([['pids', dir]]) })
    assert.equal(readFileSync(join(root, 'cgroup.subtree_control'), 'utf8'), '+pids')
    assert.equal(readFileSync(join(root, 'a', 'cgroup.subtree_control'), 'utf8'), '+pids')
    assert.equal(readFileSync(join(dir, 'cgroup.subtree_control'), 'utf8'), '+pids')
  })

  it('writes v2 limit files and reads the OOM kills', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cgw-v2c-'))
    const parents = { version: 2 as const, dirs: new Map([['memory' as const, dir], ['pids' as const, dir], ['cpu' as const, dir]]) }
    const group = CliCgroup.create(parents, 'cgw-1-s-x', { memoryBytes: 64 * 1024 * 1024, pids: 100, cpus: 1.5 })
    const at = (f: string): string => readFileSync(join(dir, 'cgw-1-s-x', f), 'utf8')
    assert.deepEqual([at('memory.max'), at('pids.max'), at('cpu.max')], ['67108864', '100', '150000 100000'])
    assert.deepEqual(group.procsFiles, [join(dir, 'cgw-1-s-x', 'cgroup.procs')])
    writeFileSync(join(dir, 'cgw-1-s-x', 'memory.events'), 'low 0\nhigh 0\nmax 7\noom 2\noom_kill 2\n')
    assert.equal(group.oomKills(), 2)
  })
  it('makes one cgroup per tenant with the tenant limits, hands the controllers down to its CLIs\' and counts them', () => {
    const dir = mkdtempSync(join(tmpdir(), 'cgw-v2t-'))
    const parents = { version: 2 as const, dirs: new Map([['memory' as const, dir], ['pids' as const, dir]]) }
    const tenants = new TenantCgroups({ parents, limits: { memoryBytes: 256 * 1024 * 1024, pids: 300 }, handDown: ['memory', 'pids'] })
    const a = tenants.acquire('acme')
    const name = `cgw-${process.pid}-tenant-acme`
    const at = (f: string): string => readFileSync(join(dir, name, f), 'utf8')
    assert.deepEqual([at('memory.max'), at('pids.max'), at('cgroup.subtree_control')], ['268435456', '300', '+memory +pids'])
    assert.deepEqual([...a.dirs.values()], [join(dir, name), join(dir, name)], 'its CLIs\' cgroups go inside it')
    assert.equal(tenants.acquire('acme'), a, 'a second CLI of the tenant: the same cgroup')
    assert.notEqual(tenants.acquire('other').dirs.get('pids'), a.dirs.get('pids'))
    const cli = CliCgroup.create(a, 'cgw-1-s-y', { pids: 64 })
    assert.equal(readFileSync(join(dir, name, 'cgw-1-s-y', 'pids.max'), 'utf8'), '64')
    assert.equal(cli.folders[0], join(dir, name, 'cgw-1-s-y'))
    assert.deepEqual(tenants.folders('acme'), [join(dir, name)])
  })
})

describe('start-up and the joining shell', () => {
  it('refuses to start when no hierarchy offers the limits\' controllers, naming what to do', async () => {
    const proc = fakeProc(['33 25 0:29 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw'], ['0::/'])
    const config = loadConfig({ DATA_DIR: mkdtempSync(join(tmpdir(), 'cgw-d-')), CLI_PIDS_MAX: '64', CLI_MEMORY_MAX_MB: '512' })
    const limits = gatewayLimits(config, {
      inner: () => { throw new Error('not reached') },
      logger: pino({ level: 'silent' }),
      probe: async () => ({ code: 0, signal: null, error: '', output: '' }),
      proc
    })
    assert.equal(limits.active, true)
    await assert.rejects(limits.start(), (err: Error) => err.name === 'ConfigError' &&
      /CLI limits \(memory, pids\) cannot hold here: no cgroup hierarchy here offers the memory controller/.test(err.message) && /Delegate=yes/.test(err.message))
  })

  it('refuses CLI_CGROUP without a limit, and a CLI_CPUS or CLI_PIDS_MAX out of range', () => {
    const dir = mkdtempSync(join(tmpdir(), 'cgw-d-'))
    assert.throws(() => loadConfig({ DATA_DIR: dir, CLI_CGROUP: '/gw' }), /CLI_CGROUP: set, but no limit to apply there/)
    assert.throws(() => loadConfig({ DATA_DIR: dir, CLI_CGROUP: 'gw', CLI_PIDS_MAX: '64' }), /CLI_CGROUP: must be a cgroup path starting with \//)
    assert.throws(() => loadConfig({ DATA_DIR: dir, CLI_CPUS: '0' }), /CLI_CPUS/)
    assert.throws(() => loadConfig({ DATA_DIR: dir, CLI_PIDS_MAX: '2' }), /CLI_PIDS_MAX/)
    assert.deepEqual(loadConfig({ DATA_DIR: dir, CLI_MEMORY_MAX_MB: '512', CLI_CPUS: '1.5' }).cliLimits, { memoryBytes: 512 * 1024 * 1024, pids: undefined, cpus: 1.5 })
  })

  it('takes tenant limits, with or without CLI limits, and refuses one below the CLI\'s', () => {
    const dir = mkdtempSync(join(tmpdir(), 'cgw-d-'))
    const config = loadConfig({ DATA_DIR: dir, CLI_CGROUP: '/gw', TENANT_MEMORY_MAX_MB: '2048', TENANT_PIDS_MAX: '512', TENANT_CPUS: '2' })
    assert.deepEqual(config.tenantLimits, { memoryBytes: 2048 * 1024 * 1024, pids: 512, cpus: 2 })
    assert.deepEqual(config.cliLimits, { memoryBytes: undefined, pids: undefined, cpus: undefined })
    assert.throws(() => loadConfig({ DATA_DIR: dir, CLI_MEMORY_MAX_MB: '1024', TENANT_MEMORY_MAX_MB: '512', CLI_CPUS: '1', TENANT_CPUS: '0.5' }),
      /TENANT_MEMORY_MAX_MB: below CLI_MEMORY_MAX_MB .*; TENANT_CPUS: below CLI_CPUS/)
    assert.throws(() => loadConfig({ DATA_DIR: dir, TENANT_PIDS_MAX: '4' }), /TENANT_PIDS_MAX/)
    assert.doesNotThrow(() => loadConfig({ DATA_DIR: dir, CLI_PIDS_MAX: '64', TENANT_PIDS_MAX: '64' }))
  })

  it('is inactive, its launcher the inner one, when no limit is set', () => {
    const inner = (): never => { throw new Error('inner') }
    const limits = gatewayLimits(loadConfig({ DATA_DIR: mkdtempSync(join(tmpdir(), 'cgw-d-')) }), { inner, logger: pino({ level: 'silent' }), probe: async () => ({ code: 0, signal: null, error: '', output: '' }) })
    assert.equal(limits.active, false)
    assert.equal(limits.launch, inner)
  })

  it('joins every hierarchy (writes 0 to each cgroup.procs), then execs the command with its arguments as given', () => {
    const dir = mkdtempSync(join(tmpdir(), 'cgw-join-'))
    const files = [join(dir, 'a procs'), join(dir, 'b')]
    const r = spawnSync('/bin/sh', joinArgs(files, '/usr/bin/printf', ['%s|', 'two words', '--', '$HOME', '']), { encoding: 'utf8' })
    assert.equal(r.status, 0, r.stderr)
    assert.equal(r.stdout, 'two words|--|$HOME||')
    assert.deepEqual(files.map((f) => readFileSync(f, 'utf8')), ['0\n', '0\n'])
  })

  it('runs nothing when a cgroup cannot be joined: exit 126 and why', () => {
    const dir = mkdtempSync(join(tmpdir(), 'cgw-join-'))
    const r = spawnSync('/bin/sh', joinArgs([join(dir, 'missing', 'cgroup.procs')], '/usr/bin/touch', [join(dir, 'ran')]), { encoding: 'utf8' })
    assert.equal(r.status, 126)
    assert.match(r.stderr, /claude-gateway: cannot join the CLI's cgroup/)
    assert.equal(spawnSync('test', ['-e', join(dir, 'ran')]).status, 1, 'the command did not run')
  })
})
