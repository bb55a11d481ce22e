/**
 * SANDBOX=bwrap with the Redis store: the gateway carries each CLI's own
 * conversation file (`<config dir>/projects/<project>/<id>.jsonl`) to and
 * from the store, reading and writing it on the host, in a folder the
 * tenant's tools write to. A symlink a tool plants there must not make the
 * gateway read or write, on the tenant's behalf, a file the sandbox hides
 * (another tenant's transcripts or settings).
 *
 * Two nodes (own DATA_DIRs, one Redis prefix and STORE_SECRET), as a
 * cluster whose config dirs are on local disk; uses the shared test Redis.
 */
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, it, type TestContext } from 'node:test'
import { type TestGateway, gateway } from '../support/gateway.js'
import { REDIS_URL, deleteKeys } from '../support/redis-server.js'
import { run, sandboxUnavailable } from '../support/sandbox.js'

const unavailable = sandboxUnavailable()

/** A start function for the nodes of one test: one prefix and secret, a DATA_DIR each, all removed afterwards. */
function cluster (t: TestContext): () => Promise<TestGateway> {
  const prefix = `cgw-test:${randomUUID()}:`
  const env = { SANDBOX: 'bwrap', CLAUDE_ARGS_EXTRA: '', REDIS_URL, REDIS_PREFIX: prefix, STORE_SECRET: randomUUID() + randomUUID() }
  const dirs: string[] = []
  t.after(async () => {
    await deleteKeys(REDIS_URL, prefix)
    for (const dir of dirs) await rm(dir, { recursive: true, force: true })
  })
  return async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'cgw-conversation-link-'))
    dirs.push(dataDir)
    return await gateway(t, { env, dataDir })
  }
}

describe('conversation carry in the sandbox (Redis store)', { skip: unavailable ?? false }, () => {
  it("never reads another tenant's file through a link the tool left in place of its conversation", async (t) => {
    const node = cluster(t)
    const one = await node()
    const transcriptOfB = join(one.dataDir, 'claude-config', 'tenant-b', 'projects', 'p', 'b.jsonl')
    mkdirSync(join(transcriptOfB, '..'), { recursive: true })
    writeFileSync(transcriptOfB, '{"secret":"tenant-b transcript"}\n')

    const { id } = await one.createSession({})
    const holder = await one.connect(id)
    await holder.waitFor((f) => f.subtype === 'hello')
    // $HOME is the tenant's config dir; its neighbour is tenant B's, hidden by the sandbox.
    assert.match(await run(holder, 'cat "$HOME/../tenant-b/projects/p/b.jsonl"'), /No such file or directory/)
    assert.match(await run(holder, `mkdir -p "$HOME/projects/p" && ln -s ${transcriptOfB} "$HOME/projects/p/${id}.jsonl"`), /\[exit 0\]$/)
    holder.terminate()
    await one.close() // saves the conversation at the CLI's end

    const two = await node()
    const again = await two.connect(id)
    await again.waitFor((f) => f.subtype === 'hello')
    const seen = await run(again, `cat "$HOME/projects/p/${id}.jsonl"`)
    assert.doesNotMatch(seen, /tenant-b transcript/, 'tenant B\'s transcript reached tenant A through the store')
  })

  it("never writes another tenant's file through a link the tool left where the conversation is restored", async (t) => {
    const node = cluster(t)
    const one = await node()
    const { id } = await one.createSession({})
    const holder = await one.connect(id)
    await holder.waitFor((f) => f.subtype === 'hello')
    // What the tool makes its conversation say, to be written on the next node.
    const planted = '{"hooks":{"SessionStart":[{"hooks":[{"type":"command","command":"planted by tenant a"}]}]}}'
    assert.match(await run(holder, `mkdir -p "$HOME/projects/p" && echo '${planted}' > "$HOME/projects/p/${id}.jsonl"`), /\[exit 0\]$/)
    holder.terminate()
    await one.close()

    const two = await node()
    const settingsOfB = join(two.dataDir, 'claude-config', 'tenant-b', 'settings.json')
    mkdirSync(join(settingsOfB, '..'), { recursive: true })
    writeFileSync(settingsOfB, '{}\n')
    // Another session of tenant A on the next node leaves the link before the first one resumes there.
    const other = await two.createSession({})
    const otherHolder = await two.connect(other.id)
    await otherHolder.waitFor((f) => f.subtype === 'hello')
    assert.match(await run(otherHolder, `mkdir -p "$HOME/projects/p" && ln -s "$HOME/../tenant-b/settings.json" "$HOME/projects/p/${id}.jsonl"`), /\[exit 0\]$/)

    const again = await two.connect(id)
    await again.waitFor((f) => f.subtype === 'hello')
    assert.match(await run(again, 'true'), /\[exit 0\]$/) // the CLI has resumed here, after the restore
    assert.equal(readFileSync(settingsOfB, 'utf8'), '{}\n', 'tenant B\'s settings were overwritten by tenant A\'s conversation')
  })
})
