/**
 * What a tool leaves in a cgroup it made inside its CLI's (a container
 * runtime, a build system, or one that wants out of the end-of-session
 * kill): the kernel keeps it under the CLI's limits, and the session's end
 * must end it and remove the whole subtree, not only what sits in the CLI's
 * cgroup itself. Real cgroups under a parent of the test's own (CLI_CGROUP);
 * SANDBOX=none, where a tool may write cgroupfs as the gateway's user does.
 */
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { existsSync, readFileSync, readdirSync } from 'node:fs'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { findParents, parentFolders } from '../../src/limits/cgroup-parents.js'
import { eventually, gateway } from '../support/gateway.js'
import { cgroupsUnavailable, removeCgroupParent, run } from '../support/sandbox.js'

const unavailable = cgroupsUnavailable()

describe('a cgroup a tool made inside its CLI\'s', { skip: unavailable ?? false }, () => {
  it('ends what runs in it when the session is deleted, SIGTERM first, and removes the CLI\'s cgroup with it', async (t) => {
    const cgroup = `/cgw-test-${randomBytes(4).toString('hex')}`
    const gw = await gateway(t, { env: { SANDBOX: 'none', CLAUDE_ARGS_EXTRA: '', CLI_CGROUP: cgroup, CLI_PIDS_MAX: '64' } })
    const parents = findParents(['pids'], cgroup)
    const seen: { loop?: string } = {}
    t.after(async () => {
      await gw.close()
      if (seen.loop !== undefined && existsSync(`/proc/${seen.loop}`)) process.kill(Number(seen.loop), 'SIGKILL') // only when the test failed
      removeCgroupParent(parents)
    })
    const { id } = await gw.createSession({})
    const holder = await gw.connect(id, '')
    await holder.waitFor((f) => f.subtype === 'hello')
    const dir = parentFolders(parents)[0] as string
    // setsid: out of the CLI's process group, so only the cgroup can end it.
    const script = String.raw`p=$(sed -n 's/^[0-9]*:pids://p' /proc/self/cgroup); d=/sys/fs/cgroup/pids$p/nested; mkdir $d && ` +
      String.raw`setsid sh -c "echo \$\$ > $d/cgroup.procs && trap 'echo terminated > ended.txt; exit 0' TERM && while :; do sleep 0.2; done" </dev/null >/dev/null 2>&1 & echo started`
    assert.equal(await run(holder, script), 'started\n[exit 0]')
    const [cli] = readdirSync(dir).filter((n) => n.startsWith('cgw-'))
    assert.ok(cli !== undefined)
    const nested = join(dir, cli, 'nested')
    const [loop] = await eventually(() => {
      const pids = readFileSync(join(nested, 'cgroup.procs'), 'utf8').split('\n').filter((p) => p !== '')
      return pids.length > 0 && pids
    }, 5000, 'the loop runs in the nested cgroup')
    seen.loop = loop
    assert.equal((await gw.request('DELETE', `/v1/sessions/${id}`)).status, 200)
    // A cgroup is removable only once nothing runs in it, nested ones included: its absence says all ended.
    await eventually(() => !existsSync(`/proc/${loop as string}`) && !existsSync(join(dir, cli)), 10_000,
      `the loop (${loop as string}) ended and ${join(dir, cli)} removed (left: ${existsSync(join(dir, cli)) ? readdirSync(join(dir, cli)).filter((n) => !n.includes('.')).join(' ') : 'none'})`)
    assert.equal(readFileSync(join(gw.dataDir, 'workspaces', 'tenant-a', id, 'ended.txt'), 'utf8'), 'terminated\n', 'it got SIGTERM before any SIGKILL')
  })
})
