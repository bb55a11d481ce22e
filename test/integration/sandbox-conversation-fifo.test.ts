/**
 * SANDBOX=bwrap with the Redis store: the gateway reads each CLI's own
 * conversation file on the host, synchronously, in a folder the tenant's
 * tools write to. A FIFO a tool leaves in its place must not stop the
 * gateway (and every tenant's sessions with it) in an open(2) that waits for
 * a writer. The gateway runs as a process of its own: frozen in the test's
 * process, it would stop the test too.
 */
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { mkdtempSync } from 'node:fs'
import { rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { isHello } from '../support/frames.js'
import { TOKEN_A, TestClient } from '../support/gateway.js'
import { fakeCliEnv, startGatewayProcess } from '../support/gateway-process.js'
import { REDIS_URL, deleteKeys } from '../support/redis-server.js'
import { run, sandboxUnavailable } from '../support/sandbox.js'

const unavailable = sandboxUnavailable()
const auth = { authorization: `Bearer ${TOKEN_A}` }

describe('conversation carry in the sandbox: a FIFO for a conversation file', { skip: unavailable ?? false }, () => {
  it('keeps the gateway answering when a tool makes its conversation file a FIFO', async (t) => {
    const dataDir = mkdtempSync(join(tmpdir(), 'cgw-conversation-fifo-'))
    const prefix = `cgw-test:${randomUUID()}:`
    const gateway = await startGatewayProcess({ ...fakeCliEnv(dataDir), SANDBOX: 'bwrap', REDIS_URL, REDIS_PREFIX: prefix })
    t.after(async () => {
      await gateway.kill()
      await deleteKeys(REDIS_URL, prefix)
      await rm(dataDir, { recursive: true, force: true })
    })
    const res = await fetch(`${gateway.url}/v1/sessions`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: '{}' })
    assert.equal(res.status, 201)
    const { id } = await res.json() as { id: string }
    const holder = await TestClient.open(`${gateway.url.replace('http', 'ws')}/v1/sessions/${id}/ws`, auth)
    t.after(() => holder.terminate())
    await holder.waitFor(isHello)

    // The tool's result and the turn's end each save the conversation: the gateway looks at the FIFO then.
    const made = await run(holder, `mkdir -p "$HOME/projects/p" && mkfifo "$HOME/projects/p/${id}.jsonl"`).catch((err: Error) => err.message)
    assert.match(made, /\[exit 0\]$/, 'the gateway answers the turn that made the FIFO')
    assert.match(await run(holder, 'echo still here'), /^still here\n\[exit 0\]$/)
    const health = await fetch(`${gateway.url}/healthz`, { signal: AbortSignal.timeout(5000) }).then((r) => r.status, (err: Error) => err.name)
    assert.equal(health, 200, 'the gateway answers /healthz')
  })
})
