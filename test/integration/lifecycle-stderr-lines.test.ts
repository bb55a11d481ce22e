/**
 * A CLI that prints very long stderr lines before it dies (a crash that
 * prints a line of minified source, binary garbage) leaves a bounded
 * `exit.stderr_tail`. Kept up to MAX_LINE_BYTES each (the stdout bound,
 * 16 MiB by default), its last 20 lines went whole into the session record,
 * its status frame (stored, sent to every client, replayed for ever) and the
 * log: hundreds of MiB for one session.
 */
import assert from 'node:assert/strict'
import { chmodSync, mkdtempSync, writeFileSync } from 'node:fs'
import { rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { eventually } from '../support/gateway.js'
import { LIMITS, gateway } from '../support/sessions.js'

describe('a CLI printing long stderr lines', () => {
  it('leaves a small stderr tail in the record and the status frame, still naming its last line', { timeout: 60_000 }, async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'cgw-stderr-'))
    t.after(() => rm(dir, { recursive: true, force: true }))
    const command = join(dir, 'long-stderr-cli.sh')
    // 20 lines of 1 MB, then a short one, then exit 3.
    writeFileSync(command, '#!/bin/sh\ni=0\nwhile [ $i -lt 20 ]; do head -c 1000000 /dev/zero | tr \'\\0\' x >&2; echo >&2; i=$((i+1)); done\necho "fatal: the end" >&2\nexit 3\n')
    chmodSync(command, 0o755)
    const gw = await gateway(t, { env: { ...LIMITS, CLAUDE_BIN: command } })
    const created = await gw.request('POST', '/v1/sessions', {})
    const id = created.body.id as string
    const session = await eventually(async () => {
      const s = (await gw.request('GET', `/v1/sessions/${id}`)).body
      return s.status === 'exited' ? s : undefined
    }, 20_000, 'the session to be recorded exited')
    assert.equal(session.exit.code, 3)
    const tail = session.exit.stderr_tail as string[]
    assert.equal(tail.at(-1), 'fatal: the end')
    const bytes = JSON.stringify(tail).length
    assert.ok(bytes < 100_000, `the stderr tail holds ${bytes} bytes`)

    const c = await gw.connect(id, 'after=0')
    const i = await c.until(() => { const n = c.frames.findIndex((f) => f.subtype === 'status' && f.status === 'exited'); return n < 0 ? undefined : n }, 20_000, 'the exited status frame')
    assert.ok((c.raw[i] as string).length < 100_000, `the status frame has ${(c.raw[i] as string).length} bytes`)
  })
})
