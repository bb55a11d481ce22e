/**
 * The gateway as operators run it (src/server.ts in its own process, secrets
 * in its environment, the tests' Redis (TEST_REDIS_URL, else 127.0.0.1:6379),
 * SANDBOX left at its default) and a tenant's tool (fake CLI `run`) trying
 * the issue's findings 1 and 3 from inside its sandbox: the gateway's
 * /proc/<pid>/environ, Redis and the gateway's port directly and through
 * the egress proxy. Only the allowed API destination (ANTHROPIC_BASE_URL,
 * here a local stand-in) is reachable, and only through the proxy. On
 * today's main every refusal below is a success: the tool shares the host's
 * network and /proc. The gateway's API key (ANTHROPIC_API_KEY_FILE, so in no
 * environment) never enters the sandbox, yet requests to the CLI's
 * ANTHROPIC_BASE_URL arrive with it, on the API paths the CLI needs only.
 */
import assert from 'node:assert/strict'
import { type ChildProcess, spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { once } from 'node:events'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import http from 'node:http'
import { type AddressInfo, createServer } from 'node:net'
import { networkInterfaces, tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { after, before, describe, it } from 'node:test'
import { FAKE_CLI, TOKEN_A, TOKEN_B, TestClient, eventually } from '../support/gateway.js'
import { REDIS_HOST, REDIS_PORT, REDIS_URL, deleteKeys } from '../support/redis-server.js'
import { run, sandboxUnavailable } from '../support/sandbox.js'

const unavailable = sandboxUnavailable()
const ROOT = fileURLToPath(new URL('../..', import.meta.url))
const PROBE = fileURLToPath(new URL('../fixtures/net-probe.mjs', import.meta.url))
const REDIS = `${REDIS_HOST}:${REDIS_PORT}`
const PREFIX = `cgw-sandbox-${randomBytes(4).toString('hex')}:`
const PROXY = '127.0.0.1:3128' // the forwarder inside every sandbox
const KEY = `sk-ant-test-${randomBytes(12).toString('hex')}`
/** Tenant B's own key (TENANT_API_KEYS_FILE). */
const KEY_B = `sk-ant-test-b-${randomBytes(12).toString('hex')}`
/** What the operator rotates both keys to, in the files, before a SIGHUP. */
const KEY_NEXT = `sk-ant-test-next-${randomBytes(12).toString('hex')}`
const KEY_B_NEXT = `sk-ant-test-b-next-${randomBytes(12).toString('hex')}`
/** How the stand-in API names a key it was sent (never the key itself: the answer goes back into the sandbox). */
const KEY_NAMES = new Map([[KEY, 'real'], [KEY_B, 'tenant-b'], [KEY_NEXT, 'real-next'], [KEY_B_NEXT, 'tenant-b-next']])

async function freePort (): Promise<number> {
  const s = createServer()
  s.listen(0, '127.0.0.1')
  await once(s, 'listening')
  const port = (s.address() as AddressInfo).port
  s.close()
  return port
}

describe('SANDBOX default (bwrap), gateway in its own process', { skip: unavailable ?? false }, () => {
  let server: ChildProcess
  let logs = ''
  let gwPort = 0
  let api: http.Server
  let apiPort = 0
  let dataDir = ''
  let keyFile = ''
  let holder: TestClient
  let sessionId = ''
  /** Paths the stand-in API was asked for. */
  const asked: string[] = []

  before(async () => {
    api = http.createServer((req, res) => {
      asked.push(req.url ?? '')
      // Says whether the real key came, never echoes a credential back into the sandbox.
      const key = req.headers['x-api-key']
      if (key !== undefined) res.end(`key ${(typeof key === 'string' ? KEY_NAMES.get(key) : undefined) ?? 'other'} at ${req.url} host ${req.headers.host}`)
      else res.end(`api-ok ${req.method} ${req.url}`)
    })
    api.listen(0, '127.0.0.1')
    await once(api, 'listening')
    apiPort = (api.address() as AddressInfo).port
    gwPort = await freePort()
    dataDir = mkdtempSync(join(tmpdir(), 'cgw-sbx-net-'))
    keyFile = join(mkdtempSync(join(tmpdir(), 'cgw-sbx-key-')), 'anthropic_api_key')
    writeFileSync(keyFile, `${KEY}\n`, { mode: 0o600 })
    writeFileSync(join(dirname(keyFile), 'tenant_api_keys'), `tenant-b=${KEY_B}\n`, { mode: 0o600 })
    server = spawn(process.execPath, ['--import', 'tsx', 'src/server.ts'], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
      // A session of its own, without the terminal `npm test` may run in: as a service runs, so SIGHUP reloads.
      detached: true,
      env: {
        PATH: process.env.PATH,
        PORT: String(gwPort),
        HOST: '127.0.0.1',
        DATA_DIR: dataDir,
        CLAUDE_BIN: FAKE_CLI,
        GATEWAY_TOKENS: `${TOKEN_A}=tenant-a,${TOKEN_B}=tenant-b`,
        REDIS_URL,
        REDIS_PREFIX: PREFIX,
        ANTHROPIC_BASE_URL: `http://127.0.0.1:${apiPort}`,
        ANTHROPIC_API_KEY_FILE: keyFile,
        TENANT_API_KEYS_FILE: join(dirname(keyFile), 'tenant_api_keys'),
        LOG_LEVEL: 'info'
      }
    })
    server.stdout?.setEncoding('utf8').on('data', (t: string) => { logs += t })
    server.stderr?.setEncoding('utf8').on('data', (t: string) => { logs += t })
    await eventually(() => logs.includes('Server listening') || server.exitCode !== null, 20_000, 'the gateway to listen')
    assert.equal(server.exitCode, null, `the gateway did not start:\n${logs}`)
    const res = await fetch(`http://127.0.0.1:${gwPort}/v1/sessions`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN_A}`, 'content-type': 'application/json' }, body: '{}' })
    assert.equal(res.status, 201)
    sessionId = ((await res.json()) as { id: string }).id
    holder = await TestClient.open(`ws://127.0.0.1:${gwPort}/v1/sessions/${sessionId}/ws`, { authorization: `Bearer ${TOKEN_A}` })
    await holder.waitFor((f) => f.subtype === 'hello')
  })

  after(async () => {
    holder?.terminate()
    if (server !== undefined && server.exitCode === null) {
      server.kill('SIGTERM')
      await once(server, 'exit')
    }
    api?.close()
    await deleteKeys(REDIS_URL, PREFIX).catch(() => {})
    rmSync(dataDir, { recursive: true, force: true })
    if (keyFile !== '') rmSync(dirname(keyFile), { recursive: true, force: true })
  })

  it("keeps the gateway's environment (tokens, REDIS_URL) out of reach", async () => {
    // 2>&1: the error comes on stdout, in order before the count (stderr could arrive after it).
    const out = await run(holder, `cat /proc/${server.pid}/environ 2>&1; cat /proc/1/environ /proc/*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c -e GATEWAY_TOKENS -e REDIS_URL -e ${TOKEN_B}`)
    assert.match(out, new RegExp(`/proc/${server.pid}/environ: No such file or directory`))
    assert.match(out, /^0\n\[exit 1\]$/m)
    assert.doesNotMatch(out, new RegExp(TOKEN_B))
  })

  it('reaches neither Redis nor the gateway nor the API directly: the sandbox has its own network', async () => {
    const targets = [[REDIS_HOST, REDIS_PORT], ['127.0.0.1', gwPort], ['127.0.0.1', apiPort]] as const
    for (const [host, port] of targets) {
      assert.match(await run(holder, `node ${PROBE} tcp ${host} ${port}`), /^error (ECONNREFUSED|ENETUNREACH|EHOSTUNREACH)\n\[exit 0\]$/, `${host}:${port}`)
    }
    const external = Object.values(networkInterfaces()).flat().find((i) => i !== undefined && !i.internal && i.family === 'IPv4')
    if (external !== undefined) {
      assert.match(await run(holder, `node ${PROBE} tcp ${external.address} ${REDIS_PORT}`), /^error (ENETUNREACH|EHOSTUNREACH|ECONNREFUSED)\n/, 'a host address is unreachable too')
    }
  })

  it('refuses every destination but the allowed one through the proxy, and logs the refusal with the session id', async () => {
    for (const target of [REDIS, `127.0.0.1:${gwPort}`, `localhost:${apiPort}`, 'example.com:443']) {
      assert.match(await run(holder, `node ${PROBE} connect ${PROXY} ${target}`), /^HTTP\/1\.1 403 Forbidden\n/, `CONNECT ${target}`)
    }
    assert.match(await run(holder, `node ${PROBE} get ${PROXY} http://${REDIS}/`), /^HTTP\/1\.1 403 Forbidden \| egress not allowed/)
    assert.match(await run(holder, `node ${PROBE} get ${PROXY} http://127.0.0.1:${gwPort}/healthz`), /^HTTP\/1\.1 403 Forbidden/)

    assert.match(await run(holder, `node ${PROBE} connect ${PROXY} 127.0.0.1:${apiPort}`), /^HTTP\/1\.1 200 Connection Established \| HTTP\/1\.1 200 OK \| tunnel-ok\n/)
    assert.match(await run(holder, `node ${PROBE} get ${PROXY} http://127.0.0.1:${apiPort}/v1/models`), /^HTTP\/1\.1 200 OK \| api-ok GET \/v1\/models\n/)
    // curl honours the sandbox's HTTP_PROXY as the CLI does.
    assert.match(await run(holder, `curl -sS -m 5 http://127.0.0.1:${apiPort}/via-env; echo; curl -sS -m 5 -o /dev/null -w '%{http_code}' http://${REDIS}/`), /^api-ok GET \/via-env\n403/)

    await eventually(() => logs.split('\n').some((l) => l.includes('sandbox egress refused') && l.includes(sessionId) && l.includes(REDIS)), 5000, 'a refusal log line naming the session')
  })

  it('keeps the API key with the gateway: the sandbox has a placeholder, its API requests arrive with the real key, on the CLI\'s API paths only', async () => {
    const out = await run(holder, `cat ${keyFile} 2>&1; ` + 'echo "$ANTHROPIC_API_KEY $ANTHROPIC_BASE_URL"; ' +
      `cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c -F '${KEY}'; ` +
      'curl -sS -m 5 -H "x-api-key: $ANTHROPIC_API_KEY" "$ANTHROPIC_BASE_URL/v1/models?beta=true"; echo; ' +
      'curl -sS -m 5 -H "x-api-key: $ANTHROPIC_API_KEY" -w " %{http_code}" "$ANTHROPIC_BASE_URL/v1/files"; echo')
    assert.equal(out, `cat: ${keyFile}: No such file or directory\nheld-by-claude-gateway http://${PROXY}\n0\nkey real at /v1/models?beta=true host 127.0.0.1:${apiPort}\n` +
      '{"type":"error","error":{"type":"permission_error","message":"claude-gateway: GET on this path is not allowed from a sandbox (SANDBOX_API_PATHS)"}} 403\n[exit 0]')
    assert.equal(asked.filter((url) => url.startsWith('/v1/files')).length, 0, 'the Files API was never asked')
  })

  it('gives a tenant listed in TENANT_API_KEYS its own key: its API requests carry it, never the shared one, and its sandbox holds neither', async () => {
    const res = await fetch(`http://127.0.0.1:${gwPort}/v1/sessions`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN_B}`, 'content-type': 'application/json' }, body: '{}' })
    assert.equal(res.status, 201)
    const id = ((await res.json()) as { id: string }).id
    const b = await TestClient.open(`ws://127.0.0.1:${gwPort}/v1/sessions/${id}/ws`, { authorization: `Bearer ${TOKEN_B}` })
    try {
      await b.waitFor((f) => f.subtype === 'hello')
      const out = await run(b, 'echo "$ANTHROPIC_API_KEY"; ' +
        `cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c -e '${KEY_B}' -e '${KEY}'; ` +
        'curl -sS -m 5 -H "x-api-key: $ANTHROPIC_API_KEY" "$ANTHROPIC_BASE_URL/v1/models"; echo')
      assert.equal(out, `held-by-claude-gateway\n0\nkey tenant-b at /v1/models host 127.0.0.1:${apiPort}\n[exit 0]`)
    } finally {
      b.terminate()
    }
    // Tenant A, not listed, still gets the shared key.
    assert.match(await run(holder, 'curl -sS -m 5 "$ANTHROPIC_BASE_URL/v1/models"; echo'), /^key real at \/v1\/models /)
  })

  it('counts what the proxies refuse in /metrics, by kind', async () => {
    const refusals = async (): Promise<Record<string, number>> => {
      const text = await (await fetch(`http://127.0.0.1:${gwPort}/metrics`, { headers: { authorization: `Bearer ${TOKEN_A}` } })).text()
      return Object.fromEntries([...text.matchAll(/^cgw_sandbox_refusals_total\{kind="(\w+)"\} (\d+)$/gm)].map((m) => [m[1], Number(m[2])]))
    }
    const before = await refusals()
    assert.deepEqual(Object.keys(before).sort(), ['api_path', 'connections', 'egress'])
    const out = await run(holder, `curl -sS -m 5 -o /dev/null -w '%{http_code} ' http://${REDIS}/; ` +
      'curl -sS -m 5 -o /dev/null -w "%{http_code} " -X POST "$ANTHROPIC_BASE_URL/v1/messages/batches"; ' +
      'curl -sS -m 5 -o /dev/null -w "%{http_code}" "$ANTHROPIC_BASE_URL/v1/models"; echo')
    assert.equal(out, '403 403 200\n[exit 0]')
    assert.deepEqual(await refusals(), { egress: (before.egress ?? 0) + 1, api_path: (before.api_path ?? 0) + 1, connections: before.connections ?? 0 })
  })

  // Last: it rotates the keys every case above relies on.
  it('gives running CLIs the rotated keys at a reload (SIGHUP): their next API requests carry the new ones, and no sandbox ever holds a key', async () => {
    const res = await fetch(`http://127.0.0.1:${gwPort}/v1/sessions`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN_B}`, 'content-type': 'application/json' }, body: '{}' })
    assert.equal(res.status, 201)
    const b = await TestClient.open(`ws://127.0.0.1:${gwPort}/v1/sessions/${((await res.json()) as { id: string }).id}/ws`, { authorization: `Bearer ${TOKEN_B}` })
    try {
      await b.waitFor((f) => f.subtype === 'hello')
      const models = 'curl -sS -m 5 -H "x-api-key: $ANTHROPIC_API_KEY" "$ANTHROPIC_BASE_URL/v1/models"; echo'
      assert.match(await run(holder, models), /^key real at /)
      assert.match(await run(b, models), /^key tenant-b at /)

      writeFileSync(keyFile, `${KEY_NEXT}\n`)
      writeFileSync(join(dirname(keyFile), 'tenant_api_keys'), `tenant-b=${KEY_B_NEXT}\n`)
      const reloads = logs.split('credentials reloaded').length
      server.kill('SIGHUP')
      await eventually(() => logs.split('credentials reloaded').length > reloads, 10_000, 'the reload\'s log line')

      // The same CLIs, started before the reload: no restart, no new session.
      assert.match(await run(holder, models), /^key real-next at /)
      assert.match(await run(b, models), /^key tenant-b-next at /)
      const inside = await run(b, 'echo "$ANTHROPIC_API_KEY"; ' +
        `cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c -e '${KEY_B_NEXT}' -e '${KEY_NEXT}' -e '${KEY_B}' -e '${KEY}'`)
      assert.equal(inside, 'held-by-claude-gateway\n0\n[exit 1]', 'grep -c found no key (and says so with exit 1)')
    } finally {
      b.terminate()
    }
  })
})
