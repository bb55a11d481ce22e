/**
 * Issue 11, finding 2: a tenant's session swaps a directory `d` with a
 * symlink to WORKSPACE_ROOT in a tight loop (renameat2 RENAME_EXCHANGE, or
 * rename pairs where python3 is missing) while a second session of the same
 * tenant, with `cwd: "d"`, is stopped and restarted again and again. With a
 * sandbox that binds the path the gateway resolved (the old
 * CLAUDE_LAUNCHER=config/launchers/bwrap.sh design), bwrap resolves it
 * again and sometimes binds WORKSPACE_ROOT itself: the restarted session
 * then reads every tenant's files. SANDBOX=bwrap binds only the tenant's
 * root and enters `d` inside, so it never sees another tenant's file,
 * however often it restarts (bounded here by count and time).
 */
import assert from 'node:assert/strict'
import { existsSync, lstatSync, mkdirSync, realpathSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { type TestClient, gateway } from '../support/gateway.js'
import { run, sandboxUnavailable } from '../support/sandbox.js'

const unavailable = sandboxUnavailable()
const RESTARTS = 30
const DEADLINE_MS = 60_000
const SECRET = 'tenant-b secret 7f3a'

const PYTHON_SWAP = [
  'import ctypes, time',
  'renameat2 = ctypes.CDLL(None, use_errno=True).renameat2',
  'end = time.time() + 90',
  'while time.time() < end:',
  '    renameat2(-100, b"d", -100, b"l", 2)  # AT_FDCWD, RENAME_EXCHANGE'
].join('\n')
const NODE_SWAP = [
  "const fs = require('node:fs')",
  'const end = Date.now() + 90000',
  "while (Date.now() < end) { try { fs.renameSync('d', 't'); fs.renameSync('l', 'd'); fs.renameSync('t', 'l') } catch {} }"
].join('\n')

/** Sends a prompt that (re)starts the CLI; the turn's text, or null when it did not start (refused, or exited at once). */
async function turn (holder: TestClient, prompt: string): Promise<string | null> {
  const from = holder.frames.length
  holder.sendUser(prompt)
  const end = await holder.waitFor((f) => f.type === 'result' || (f.type === 'gateway' && (f.subtype === 'error' || f.status === 'exited')), 20_000, from)
  if (end.type !== 'result') return null
  return holder.frames.slice(from).filter((f) => f.type === 'assistant').flatMap((f) => f.message.content)
    .filter((b: any) => b.type === 'text').map((b: any) => b.text as string).join('\n')
}

describe('symlink-swap race against the sandbox mounts', { skip: unavailable ?? false }, () => {
  it('never shows a restarted session another tenant\'s files, whichever way the swap stands', { timeout: DEADLINE_MS + 30_000 }, async (t) => {
    const gw = await gateway(t, { env: { SANDBOX: 'bwrap', CLAUDE_ARGS_EXTRA: '' } })
    mkdirSync(join(gw.dataDir, 'workspaces', 'tenant-b'), { recursive: true })
    const workspaces = realpathSync(join(gw.dataDir, 'workspaces'))
    writeFileSync(join(workspaces, 'tenant-b', 'secret.txt'), SECRET)

    // The attacker's first session works in its whole tenant root.
    const attacker = await gw.createSession({ cwd: '.' })
    const a = await gw.connect(attacker.id)
    t.after(() => a.terminate())
    await a.waitFor((f) => f.subtype === 'hello')
    const swapper = existsSync('/usr/bin/python3') ? `/usr/bin/python3 -c '${PYTHON_SWAP}'` : `node -e "${NODE_SWAP}"`
    assert.match(await run(a, `mkdir d && ln -s ${workspaces} l && echo ready`), /ready/)

    // The victim session: same tenant, cwd inside the swapped directory (a directory right now).
    const victim = await gw.createSession({ cwd: 'd' })
    const v = await gw.connect(victim.id)
    t.after(() => v.terminate())
    await v.waitFor((f) => f.subtype === 'hello')

    assert.match(await run(a, `${swapper} >/dev/null 2>&1 & echo swapping`), /swapping/)
    const root = join(workspaces, 'tenant-a')
    const kinds = new Set<string>()
    let started = 0
    let refused = 0
    const leaks: string[] = []
    const deadline = Date.now() + DEADLINE_MS
    for (let i = 0; i < RESTARTS && Date.now() < deadline; i++) {
      assert.equal((await gw.request('DELETE', `/v1/sessions/${victim.id}`)).status, 200)
      try { kinds.add(lstatSync(join(root, 'd')).isSymbolicLink() ? 'symlink' : 'dir') } catch { kinds.add('missing') }
      const text = await turn(v, `run cat tenant-b/secret.txt ${join(workspaces, 'tenant-b', 'secret.txt')} 2>&1; ls`)
      if (text === null) { refused++; continue }
      started++
      if (text.includes(SECRET)) leaks.push(`restart ${i + 1}: ${text.slice(0, 300)}`)
    }
    assert.ok(kinds.has('symlink') && kinds.has('dir'), `the swap was live during the restarts (saw ${[...kinds].join(', ')})`)
    assert.deepEqual(leaks, [], `tenant-b's file was visible after ${leaks.length} of ${started} restarts`)
    assert.equal(refused, 0, 'the gateway never resolves the tenant\'s path, so the swap cannot refuse a restart either')
    assert.ok(started >= 10, `restarts that ran: ${started}`)
  })
})
