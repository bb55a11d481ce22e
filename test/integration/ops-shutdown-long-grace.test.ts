// A long SHUTDOWN_GRACE_MS (the largest the gateway takes) must still shut
// down cleanly: server.ts's force-exit timer adds CLI_STOP_TIMEOUT_MS steps
// and a margin to it, and a sum past setTimeout's 2^31-1 ms fires after 1 ms,
// ending a clean shutdown with "shutdown took too long" and exit 1.
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { fakeCliEnv, startGatewayProcess } from '../support/gateway-process.js'
import { within } from '../support/waiters.js'

describe('shutdown with a long SHUTDOWN_GRACE_MS', () => {
  it('SIGTERM with nothing running exits 0, not through the force timer', async (t) => {
    const dataDir = mkdtempSync(join(tmpdir(), 'cgw-ops-grace-'))
    t.after(() => rmSync(dataDir, { recursive: true, force: true }))
    const gw = await startGatewayProcess({ ...fakeCliEnv(dataDir), SHUTDOWN_GRACE_MS: String(2 ** 31 - 1), LOG_LEVEL: 'info' })
    t.after(() => gw.kill())
    gw.child.kill('SIGTERM')
    const code = await within(gw.exited, 20_000, 'the gateway to exit after SIGTERM')
    assert.doesNotMatch(gw.output(), /shutdown took too long/)
    assert.equal(code, 0, gw.output())
  })
})
