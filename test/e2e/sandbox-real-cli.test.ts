// End to end, sandboxed (SANDBOX=bwrap, what test/support/e2e.ts and
// production use): the real CLI runs a turn with a permission prompt, its
// API traffic going through the session's egress proxy to the local stand-in
// (the sandbox has no other network), and the allowed Bash command runs
// inside the sandbox: it creates its file in the workspace but cannot see the
// gateway's process or reach Redis. The API key stays with the gateway
// (SANDBOX_CREDENTIALS=proxy, the default): nothing in the sandbox holds it,
// yet every request the stand-in saw carried it.
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { existsSync, readFileSync, readdirSync } from 'node:fs'
import { join } from 'node:path'
import { after, test } from 'node:test'
import { E2E_TEST_TIMEOUT_MS, allowAnswer, closeAll, isCanUseTool, isCli, isGateway, startE2e, waitLive } from '../support/e2e.js'
import { REDIS_HOST, REDIS_PORT } from '../support/redis-server.js'
import { findParents } from '../../src/limits/cgroup-parents.js'
import { cgroupsUnavailable, removeCgroupParent, sandboxUnavailable } from '../support/sandbox.js'

after(closeAll)
const unavailable = sandboxUnavailable()
/** The API key in the gateway's environment, this run's own. */
const KEY = `sk-ant-test-${randomBytes(12).toString('hex')}`

test('sandboxed real CLI: permission prompt allowed, tool runs confined, API reached only through the egress proxy', { timeout: E2E_TEST_TIMEOUT_MS, skip: unavailable ?? false }, async () => {
  const e = await startE2e({ env: { SANDBOX: 'bwrap' }, cliEnv: (env) => ({ ...env, ANTHROPIC_API_KEY: KEY }) })
  try {
    const session = await e.createSession()
    const holder = await e.connect(session.id)
    const command = 'touch sandboxed.txt && ' +
      `{ test -e /proc/${process.pid}/environ && echo gateway-visible || echo gateway-hidden; } && ` +
      `{ (exec 3<>/dev/tcp/${REDIS_HOST}/${REDIS_PORT}) 2>/dev/null && echo redis-reachable || echo redis-unreachable; } && ` +
      'echo "proxy=$HTTPS_PROXY" && echo "key=$ANTHROPIC_API_KEY base=$ANTHROPIC_BASE_URL" && ' +
      `{ cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c -F '${KEY}' || true; }`
    holder.sendUser(`RUN_BASH ${command}`)

    const prompt = await waitLive(holder, isCanUseTool)
    assert.equal(prompt.request.input.command, command)
    assert.ok(!existsSync(join(e.workspace(session.id), 'sandboxed.txt')), 'nothing ran before the answer')
    holder.send(allowAnswer(prompt.request_id, { updatedInput: prompt.request.input }))
    await waitLive(holder, isGateway('permission_resolved', { request_id: prompt.request_id }))

    const result = await waitLive(holder, isCli('result'))
    assert.equal(result.subtype, 'success', JSON.stringify(result))
    assert.equal(result.result, 'Tool finished: gateway-hidden\nredis-unreachable\nproxy=http://127.0.0.1:3128\n' +
      'key=held-by-claude-gateway base=http://127.0.0.1:3128\n0')
    assert.ok(existsSync(join(e.workspace(session.id), 'sandboxed.txt')), 'the allowed command created its file in the workspace')
    const init = holder.frames.find(isCli('system', 'init'))
    assert.equal(init.cwd, e.workspace(session.id), 'same path inside the sandbox as on the host')
    // Both model calls (the prompt, then the tool result) reached the stand-in: through the proxy, the only way out.
    assert.ok(e.turns().length >= 2, `streamed requests seen by the stand-in: ${e.turns().length}`)
    // ... each with the real key, which only the gateway had.
    assert.deepEqual([...new Set(e.mock.requests.map((r) => r.credential.apiKey))], [KEY])
  } finally {
    await e.close()
  }
})

test('sandboxed real CLI under CLI and tenant limits, with its tenant\'s own API key: it runs inside its tenant\'s cgroup; a tool past CLI_MEMORY_MAX_MB is killed, the CLI finishes the turn and the exit counts it; every API request carried the tenant\'s key', { timeout: E2E_TEST_TIMEOUT_MS, skip: unavailable ?? cgroupsUnavailable() ?? false }, async () => {
  const cgroup = `/cgw-e2e-${randomBytes(4).toString('hex')}`
  const tenantKey = `sk-ant-tenant-${randomBytes(12).toString('hex')}`
  const e = await startE2e({
    env: {
      SANDBOX: 'bwrap',
      CLI_CGROUP: cgroup,
      CLI_MEMORY_MAX_MB: '1024',
      CLI_PIDS_MAX: '512',
      CLI_CPUS: '1.5',
      TENANT_MEMORY_MAX_MB: '2048',
      TENANT_PIDS_MAX: '1024',
      TENANT_CPUS: '2',
      TENANT_API_KEYS: `tenant-a=${tenantKey}`
    },
    cliEnv: (env) => ({ ...env, ANTHROPIC_API_KEY: KEY })
  })
  try {
    const session = await e.createSession()
    const holder = await e.connect(session.id)
    const pidsParent = findParents(['pids'], cgroup).dirs.get('pids') as string
    const tenantGroup = join(pidsParent, readdirSync(pidsParent).find((n) => n.startsWith(`cgw-${process.pid}-tenant-`)) ?? 'none')
    assert.equal(readFileSync(join(tenantGroup, 'pids.max'), 'utf8'), '1024\n')
    const cliGroup = readdirSync(tenantGroup).find((n) => n.startsWith(`cgw-${process.pid}-${session.id}-`))
    assert.ok(cliGroup !== undefined, `the CLI's cgroup inside ${tenantGroup}`)
    // tail holds a line it has not seen the end of: 3 GiB of zeros, no newline, past the CLI's 1 GiB.
    const command = 'head -c 3000M /dev/zero | tail -n 1 >/dev/null; echo "tail=$?"; cat /proc/self/cgroup | grep -c cgw-e2e || true'
    holder.sendUser(`RUN_BASH ${command}`)
    const prompt = await waitLive(holder, isCanUseTool)
    holder.send(allowAnswer(prompt.request_id, { updatedInput: prompt.request.input }))
    const result = await waitLive(holder, isCli('result'))
    assert.equal(result.subtype, 'success', JSON.stringify(result))
    // Its own cgroup namespace: the box sees its cgroup as its root, not the path outside.
    assert.match(result.result, /^Tool finished: [^]*\bKilled\b[^]*\ntail=137\n0$/)
    const { body: live } = await e.gw.request('GET', `/v1/sessions/${session.id}`)
    assert.ok(readFileSync(join(tenantGroup, cliGroup, 'cgroup.procs'), 'utf8').split('\n').map(Number).includes(live.pid), `the CLI (${live.pid}) runs in its cgroup`)
    assert.equal((await e.gw.request('DELETE', `/v1/sessions/${session.id}`)).status, 200)
    const { body } = await e.gw.request('GET', `/v1/sessions/${session.id}`)
    assert.ok(body.exit.oom_kills >= 1, `exit: ${JSON.stringify(body.exit)}`)
    assert.ok(e.turns().length >= 2, `streamed requests seen by the stand-in: ${e.turns().length}`)
    assert.deepEqual([...new Set(e.mock.requests.map((r) => r.credential.apiKey))], [tenantKey], 'the tenant\'s own key, never the shared one')
  } finally {
    await e.close()
    removeCgroupParent(findParents(['memory', 'pids', 'cpu'], cgroup))
  }
})
