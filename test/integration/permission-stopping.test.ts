/**
 * An answer that arrives while the CLI is being stopped (its stdin closed,
 * the process not yet gone: up to CLI_STOP_TIMEOUT_MS) is refused, 409
 * `session_not_running`, since the CLI can no longer read it; nothing is
 * written to its stdin, and the prompt ends `cancelled` with the exit
 * (before, it was answered 200 and recorded `allowed` though dropped).
 */
import assert from 'node:assert/strict'
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { before, describe, it } from 'node:test'
import { isPrompt, isStatus, resolved } from '../support/frames.js'
import { FAKE_CLI, type TestGateway, gateway, suiteScope } from '../support/gateway.js'
import { LIMITS, answersTo, setup } from '../support/sessions.js'

describe('an answer while the session is stopping', () => {
  const scope = suiteScope()
  let gw: TestGateway
  before(async () => {
    // A CLI slow to exit after stdin EOF: the fake CLI behind a wrapper that keeps the fake's
    // stdin open after its own closes, and ends it on SIGTERM (CLI_STOP_TIMEOUT_MS later).
    const dir = mkdtempSync(join(tmpdir(), 'cgw-slow-exit-'))
    scope.after(() => rmSync(dir, { recursive: true, force: true }))
    const wrapper = join(dir, 'slow-exit-claude.mjs')
    writeFileSync(wrapper, [
      '#!/usr/bin/env node',
      "import { spawn } from 'node:child_process'",
      `const child = spawn(process.execPath, [${JSON.stringify(FAKE_CLI)}, ...process.argv.slice(2)], { stdio: ['pipe', 'inherit', 'inherit'] })`,
      'process.stdin.pipe(child.stdin, { end: false })',
      "process.on('SIGTERM', () => child.kill('SIGTERM'))",
      "child.on('exit', (code) => process.exit(code ?? 143))"
    ].join('\n'))
    chmodSync(wrapper, 0o755)
    gw = await gateway(scope, { env: { ...LIMITS, CLAUDE_BIN: wrapper, CLI_STOP_TIMEOUT_MS: '1500' } })
  })

  it('is refused (the CLI can no longer read it), and the prompt ends cancelled', async (t) => {
    const { id, holder } = await setup(gw, t)
    holder.sendUser('ask')
    const prompt = await holder.waitFor(isPrompt)
    const stopping = gw.request('DELETE', `/v1/sessions/${id}`)
    await holder.waitFor(isStatus('stopping'))
    const http = await gw.request('POST', `/v1/sessions/${id}/permissions/${prompt.request_id}`, { behavior: 'allow' })
    await stopping
    const r = await holder.waitFor(resolved(prompt.request_id))
    const written = answersTo(gw, id, prompt.request_id)
    assert.deepEqual(written, [], 'the CLI never read the answer (its stdin was closed)')
    assert.deepEqual({ http: http.status, decision: r.decision }, { http: 409, decision: 'cancelled' },
      `HTTP ${http.status} ${JSON.stringify(http.body)}; history says ${r.decision} by ${String(r.by)}`)
  })
})
