/**
 * claude-remote's token: read again from its file only when asked, and only
 * a usable, different token replaces the one in use; its REST calls try a
 * 401 once more with a newer token from the file (a real HTTP server).
 */
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync, unlinkSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { GatewayApi, GatewayHttpError } from '../../src/remote/gateway-api.js'
import { RemoteToken } from '../../src/remote/remote-token.js'

function tempFile (t: { after: (fn: () => void) => void }, content: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'cgw-remote-token-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  const file = join(dir, 'token')
  writeFileSync(file, content)
  return file
}

test('a token file read again: a new token replaces the one in use; the same, an empty, a whitespace or a missing file keep it', (t) => {
  const file = tempFile(t, 'first-token\n')
  const token = new RemoteToken('first-token', file)
  assert.equal(token.reread(), false, 'unchanged')
  writeFileSync(file, '\n')
  assert.equal(token.reread(), false, 'empty: being rewritten')
  writeFileSync(file, 'two words')
  assert.equal(token.reread(), false, 'not sendable in a header')
  assert.equal(token.value, 'first-token')
  writeFileSync(file, '  second-token\n')
  assert.equal(token.reread(), true)
  assert.equal(token.value, 'second-token')
  unlinkSync(file)
  assert.equal(token.reread(), false, 'gone for a moment (a symlink swap)')
  assert.equal(token.value, 'second-token')
  assert.match(token.source, /^CLAUDE_REMOTE_TOKEN_FILE \(.+token\)$/)

  const fixed = new RemoteToken('fixed-token')
  assert.equal(fixed.reread(), false)
  assert.equal(fixed.source, 'CLAUDE_REMOTE_TOKEN')
})

test('a REST call refused 401 is tried once more with the newer token of the file, never with the same one', async (t) => {
  const seen: string[] = []
  const server = createServer((req, res) => {
    seen.push(req.headers.authorization ?? '')
    const ok = req.headers.authorization === 'Bearer renewed-token'
    res.writeHead(ok ? 200 : 401, { 'content-type': 'application/json' })
    res.end(JSON.stringify(ok ? { id: 's1' } : { statusCode: 401, code: 'unauthorized', message: 'no' }))
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.after(() => server.close())
  const { port } = server.address() as { port: number }
  const env = (token: RemoteToken): { httpUrl: string, wsUrl: string, token: RemoteToken } => ({ httpUrl: `http://127.0.0.1:${port}`, wsUrl: `ws://127.0.0.1:${port}`, token })

  const file = tempFile(t, 'expired-token')
  const token = new RemoteToken('expired-token', file)
  const api = new GatewayApi(env(token))
  // The file still holds the refused token: one request, the 401 reported.
  await assert.rejects(api.getSession('s1'), (err: unknown) => err instanceof GatewayHttpError && err.status === 401)
  assert.deepEqual(seen.splice(0), ['Bearer expired-token'])
  writeFileSync(file, 'renewed-token')
  assert.deepEqual(await api.getSession('s1'), { id: 's1' })
  assert.deepEqual(seen.splice(0), ['Bearer expired-token', 'Bearer renewed-token'])
  assert.equal(token.value, 'renewed-token')

  // A fixed token is not tried twice.
  await assert.rejects(new GatewayApi(env(new RemoteToken('fixed-token'))).getSession('s1'))
  assert.deepEqual(seen, ['Bearer fixed-token'])
})
