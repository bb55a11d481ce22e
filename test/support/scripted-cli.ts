/**
 * A CLI a test writes for one case, for behaviour fake-claude.mjs does not
 * script: it reads stream-json lines from stdin, answers each control
 * request with success (the gateway's initialize included), runs `onUser`
 * for each user line, and ends at stdin's end. Its folder goes when the
 * test ends.
 */
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

export interface ScriptedCliParts {
  /** JavaScript run once at the top (helpers, state); `out(o)` prints one line. */
  head?: string
  /** JavaScript run for each user line `m`; `out(o)` prints one line. */
  onUser: string
}

/** Writes the CLI as `<name>.mjs` in a fresh folder and returns its path. */
export function scriptedCli (t: { after: (fn: () => void) => void }, name: string, parts: ScriptedCliParts): string {
  const dir = mkdtempSync(join(tmpdir(), 'cgw-scripted-cli-'))
  t.after(() => { rmSync(dir, { recursive: true, force: true }) })
  const bin = join(dir, `${name}.mjs`)
  writeFileSync(bin, `#!/usr/bin/env node
const out = (o) => process.stdout.write(JSON.stringify(o) + '\\n')
${parts.head ?? ''}
let buf = ''
process.stdin.on('data', (d) => {
  buf += d
  let nl
  while ((nl = buf.indexOf('\\n')) >= 0) {
    const m = JSON.parse(buf.slice(0, nl)); buf = buf.slice(nl + 1)
    if (m.type === 'control_request') out({ type: 'control_response', response: { subtype: 'success', request_id: m.request_id, response: {} } })
    if (m.type === 'user') {
${parts.onUser}
    }
  }
})
process.stdin.on('end', () => process.exit(0))
`)
  chmodSync(bin, 0o755)
  return bin
}
