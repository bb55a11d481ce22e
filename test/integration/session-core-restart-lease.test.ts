/**
 * A restart that fails on one node of several (real gateway processes on one
 * Redis): that node gives the session's lease up, as after a CLI exit, so the
 * next message on a node that can run the CLI resumes the session there.
 * Before, the failed node kept the lease, renewed for ever with no CLI
 * behind it: a client elsewhere was routed to it as an observer, its message
 * refused (`not_holder`). A failed create gives its lease up the same way.
 * Node B's CLIs cannot start: its API key (read from its _FILE at start-up)
 * is over Linux's 128 KiB per-string limit, so execve fails with E2BIG, in
 * the spawn helper (reported later) or in spawn() itself (CLI_SPAWN=direct).
 */
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { isHello, isResult, isStatus } from '../support/frames.js'
import { TOKEN_A, type TestClient } from '../support/gateway.js'
import { type GatewayNode, type GatewayNodes, startNodes } from '../support/gateway-nodes.js'
import { REDIS_URL, redisCommand } from '../support/redis-server.js'
import { eventually } from '../support/waiters.js'

const LEASE_MS = 1500
const auth = { authorization: `Bearer ${TOKEN_A}` }

for (const spawn of ['helper', 'direct'] as const) {
  describe(`a failed CLI start on one node (CLI_SPAWN=${spawn})`, { timeout: 60_000 }, () => {
    let keyDir: string
    let cluster: GatewayNodes
    let a: GatewayNode
    let b: GatewayNode
    before(async () => {
      keyDir = mkdtempSync(join(tmpdir(), 'cgw-restart-lease-'))
      const keyFile = join(keyDir, 'api-key')
      writeFileSync(keyFile, 'sk-ant-small')
      cluster = await startNodes({ count: 1, redisUrl: REDIS_URL, env: { ANTHROPIC_API_KEY_FILE: keyFile, CLI_SPAWN: spawn, SESSION_LEASE_MS: String(LEASE_MS) } })
      a = cluster.nodes[0] as GatewayNode
      // Node B reads the key once, at start-up: its CLIs' environment is too large to exec.
      writeFileSync(keyFile, `sk-ant-${'k'.repeat(200_000)}`)
      b = await cluster.start('node-b')
    })
    after(async () => {
      await cluster?.close()
      rmSync(keyDir, { recursive: true, force: true })
    })

    const leaseFree = async (id: string): Promise<boolean> => await redisCommand(REDIS_URL, ['EXISTS', `${cluster.prefix}{${id}}:lease`]) === 0

    /** A message from `client` (on A) runs on a CLI A starts. */
    async function resumesOnA (id: string, client: TestClient): Promise<void> {
      const from = client.frames.length
      client.sendUser('echo on a')
      const next = await client.waitFor((f) => isResult(f) || isStatus('exited')(f), 15_000, from)
      assert.equal(next.type, 'result', `the message on A ended: ${JSON.stringify(next)}`)
      const got = await a.session(id)
      assert.equal(got.body.status, 'running')
      assert.equal(typeof got.body.pid, 'number', 'the CLI runs on A')
    }

    it('a failed restart gives the lease up, so a message on another node resumes the session there', async () => {
      // The session runs on A, then stops there: A gives the lease up.
      const created = await a.create()
      const onA = await a.connect(created.id, 'after=0')
      await onA.waitFor(isHello)
      onA.sendUser('echo first')
      await onA.waitFor(isResult)
      const res = await fetch(`${a.url}/v1/sessions/${created.id}`, { method: 'DELETE', headers: auth })
      assert.ok(res.status < 300, `DELETE: ${res.status}`)
      await onA.waitFor(isStatus('stopped'))
      await eventually(async () => await leaseFree(created.id), 10_000, 'A to give the lease up')

      // A message on B: B takes the lease, and its CLI cannot start.
      const onB = await b.connect(created.id, 'after=0')
      await onB.waitFor(isHello)
      const fromB = onB.frames.length
      onB.sendUser('echo on b')
      const failed = await onB.waitFor(isStatus('exited'), 10_000, fromB)
      assert.equal(failed.exit?.reason, 'spawn_failed')

      // As after an exit, B gives the lease up (kept, B renewed it every LEASE_MS / 3 with no CLI).
      await eventually(async () => await leaseFree(created.id), 3 * LEASE_MS, 'B to give up the lease of the session whose restart failed')
      // A's client follows the log: it has seen that end too.
      await onA.waitFor((f) => f.seq === failed.seq)
      await resumesOnA(created.id, onA)
    })

    it('a failed create on B gives its lease up, records spawn_failed, and resumes on A', async () => {
      const res = await fetch(`${b.url}/v1/sessions`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: '{}' })
      assert.equal(res.status, 502)
      assert.equal((await res.json() as { code: string }).code, 'cli_start_failed')
      const listed = await fetch(`${a.url}/v1/sessions`, { headers: auth })
      const { sessions } = await listed.json() as { sessions: Array<{ id: string, status: string, exit: { reason: string } | null }> }
      const failed = sessions.find((s) => s.status === 'exited' && s.exit?.reason === 'spawn_failed')
      assert.ok(failed !== undefined, `the failed create is listed exited/spawn_failed: ${JSON.stringify(sessions)}`)
      // Given up before the 502 was sent.
      assert.equal(await leaseFree(failed.id), true, 'no lease is left behind the failed create')
      const onA = await a.connect(failed.id, 'after=0')
      await onA.waitFor(isHello)
      // Replayed: the create's end.
      await onA.waitFor(isStatus('exited'))
      await resumesOnA(failed.id, onA)
    })
  })
}
