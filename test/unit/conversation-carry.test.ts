// A session's conversation file carried through the store (src/session/cli-plan.ts
// `conversationCarry`, src/session/conversation-file.ts): the first save stores
// the whole file, later ones append only what the CLI wrote since, and a file
// that is not the stored copy grown (rewritten, shortened, gone and back) is
// stored whole again; bringing the copy back keeps a local file only when it
// is the stored copy grown. Real files in a temporary config dir, the memory store
// (whose appendConversation the store contract holds to the Redis one's).
import assert from 'node:assert/strict'
import { appendFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, it } from 'node:test'
import pino from 'pino'
import { CliPlan } from '../../src/session/cli-plan.js'
import { MemoryStore } from '../../src/store/memory.js'
import type { Lease } from '../../src/store/store.js'
import { DEFAULT_RETENTION, session } from '../support/store-contract.js'

/** A memory store that says which writes a save made. */
class CountingStore extends MemoryStore {
  readonly writes: string[] = []
  override async saveConversation (sessionId: string, data: Buffer, lease?: Lease): Promise<void> {
    this.writes.push(`whole ${data.length}`)
    await super.saveConversation(sessionId, data, lease)
  }

  override async appendConversation (sessionId: string, at: number, data: Buffer, lease?: Lease): Promise<boolean> {
    const done = await super.appendConversation(sessionId, at, data, lease)
    this.writes.push(`append ${data.length} at ${at}${done ? '' : ' refused'}`)
    return done
  }
}

describe('a conversation carried through the store', () => {
  const root = mkdtempSync(join(tmpdir(), 'cgw-carry-'))
  after(() => { rmSync(root, { recursive: true, force: true }) })

  async function carry (name: string): Promise<{ store: CountingStore, file: string, save: () => Promise<void>, restore: () => Promise<void>, stored: () => Promise<string | undefined> }> {
    const store = new CountingStore({ retention: DEFAULT_RETENTION })
    const lease = await store.leases.acquire('s1', 'node-a', 60_000)
    assert.ok(lease !== null)
    const configRoot = join(root, name)
    const plan = new CliPlan({ store, logger: pino({ level: 'silent' }), claudeBin: 'claude', claudeArgsExtra: [], workspaceRoot: join(root, 'ws'), configRoot })
    const record = session({ id: 's1', tenant: 'acme' })
    const c = plan.conversationCarry(record)
    const dir = join(configRoot, 'acme', 'projects', '-work-s1')
    mkdirSync(dir, { recursive: true })
    return {
      store,
      file: join(dir, 's1.jsonl'),
      save: async () => { await c.save(lease) },
      restore: async () => { await c.restore() },
      stored: async () => (await store.loadConversation('s1'))?.toString()
    }
  }

  it('stores the file whole once, then appends what the CLI wrote since, and nothing when it wrote nothing', async () => {
    const c = await carry('grows')
    writeFileSync(c.file, '{"type":"user","n":1}\n')
    await c.save()
    appendFileSync(c.file, '{"type":"assistant","n":2,"text":"é"}\n')
    await c.save()
    await c.save()
    appendFileSync(c.file, '{"type":"user","n":3}\n')
    await c.save()
    assert.equal(await c.stored(), '-work-s1\n{"type":"user","n":1}\n{"type":"assistant","n":2,"text":"é"}\n{"type":"user","n":3}\n')
    assert.deepEqual(c.store.writes, ['whole 31', 'append 39 at 31', 'append 22 at 70'])
  })

  it('stores the file whole again when it is not the stored copy grown: rewritten, shortened, or the store\'s copy changed', async () => {
    const c = await carry('rewritten')
    writeFileSync(c.file, `${'{"a":1}\n'.repeat(100)}`)
    await c.save()
    // Same length and more, but other bytes where the stored copy ended.
    writeFileSync(c.file, `${'{"b":2}\n'.repeat(101)}`)
    await c.save()
    writeFileSync(c.file, '{"c":3}\n')
    await c.save()
    // Someone else wrote the store's copy: the append is refused, the file goes whole.
    await c.store.saveConversation('s1', Buffer.from('-work-s1\nother\n'))
    appendFileSync(c.file, '{"d":4}\n')
    await c.save()
    assert.equal(await c.stored(), '-work-s1\n{"c":3}\n{"d":4}\n')
    assert.deepEqual(c.store.writes, ['whole 809', 'whole 817', 'whole 17', 'whole 15', 'append 8 at 17 refused', 'whole 25'])
  })

  it('stores whole lines only: a line the CLI is still writing waits for its end', async () => {
    const c = await carry('partial')
    writeFileSync(c.file, '{"n":1}\n{"n":2,"te')
    await c.save()
    assert.equal(await c.stored(), '-work-s1\n{"n":1}\n')
    appendFileSync(c.file, 'xt":"hal')
    await c.save()
    appendFileSync(c.file, 'f"}\n{"n":3')
    await c.save()
    assert.equal(await c.stored(), '-work-s1\n{"n":1}\n{"n":2,"text":"half"}\n')
    assert.deepEqual(c.store.writes, ['whole 17', 'append 22 at 17'])
  })

  it('after bringing the stored copy back for --resume, appends to it', async () => {
    const c = await carry('restored')
    await c.store.saveConversation('s1', Buffer.from('-work-s1\n{"turn":1}\n'))
    rmSync(c.file, { force: true })
    await c.restore()
    appendFileSync(c.file, '{"turn":2}\n')
    await c.save()
    assert.equal(await c.stored(), '-work-s1\n{"turn":1}\n{"turn":2}\n')
    assert.deepEqual(c.store.writes, ['whole 20', 'append 11 at 20'])
  })

  it('brings the stored copy back over a local file that is longer but not it grown', async () => {
    // This node's CLI, frozen with its gateway, finished a turn nobody stored; another node then ran
    // the session on from the stored copy. Kept, the local file would resume without that node's turn.
    const c = await carry('diverged')
    const common = '{"turn":1}\n'
    writeFileSync(c.file, `${common}{"turn":"2 on the frozen node, never relayed","pad":"xxxxxxxxxxxxxxxx"}\n`)
    await c.store.saveConversation('s1', Buffer.from(`-work-s1\n${common}{"turn":"2 elsewhere"}\n`))
    await c.restore()
    assert.equal(readFileSync(c.file, 'utf8'), `${common}{"turn":"2 elsewhere"}\n`)
  })

  it('keeps a local file that is the stored copy grown', async () => {
    const c = await carry('grown')
    writeFileSync(c.file, '{"turn":1}\n{"turn":2}\n')
    await c.store.saveConversation('s1', Buffer.from('-work-s1\n{"turn":1}\n'))
    await c.restore()
    assert.equal(readFileSync(c.file, 'utf8'), '{"turn":1}\n{"turn":2}\n')
  })
})
