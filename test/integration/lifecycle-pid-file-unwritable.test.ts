/**
 * A CLI's pid file (DATA_DIR/pids) is a safety net for after a crash: when
 * it cannot be written (a full disk, a DATA_DIR remounted read-only; here a
 * file where the folder should be), the session runs without one. Thrown
 * from where the spawn helper's answer is handled, that write ended the
 * whole gateway process, and every session with it.
 */
import assert from 'node:assert/strict'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { TOKEN_A, eventually, processAlive } from '../support/gateway.js'
import { fakeCliEnv, startGatewayProcess } from '../support/gateway-process.js'

describe('a pid file that cannot be written', () => {
  it('leaves the gateway and the session running, and the CLI is stopped as usual', { timeout: 30_000 }, async (t) => {
    const dataDir = mkdtempSync(join(tmpdir(), 'cgw-pidfile-'))
    writeFileSync(join(dataDir, 'pids'), 'not a folder\n')
    const gateway = await startGatewayProcess(fakeCliEnv(dataDir))
    t.after(async () => {
      await gateway.kill()
      await rm(dataDir, { recursive: true, force: true })
    })
    const auth = { authorization: `Bearer ${TOKEN_A}` }
    const first = await fetch(`${gateway.url}/v1/sessions`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: '{}' })
    assert.equal(first.status, 201)
    const session = await first.json() as { id: string, pid: number }
    assert.ok(processAlive(session.pid), 'the CLI runs')
    // Still up, and still starting CLIs.
    const second = await fetch(`${gateway.url}/v1/sessions`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: '{}' })
    assert.equal(second.status, 201, gateway.output())
    const other = await second.json() as { id: string, pid: number }
    for (const s of [session, other]) {
      const deleted = await fetch(`${gateway.url}/v1/sessions/${s.id}`, { method: 'DELETE', headers: auth })
      assert.equal(deleted.status, 200)
      await eventually(() => !processAlive(s.pid), 10_000, 'the stopped CLI to be gone')
    }
  })
})
