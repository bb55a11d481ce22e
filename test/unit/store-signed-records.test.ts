/**
 * SignedStore (src/store/signed-records.ts) over both stores: every record
 * written is signed, every record read is checked, and a record changed
 * outside the gateway, failing the record schema, or asking for
 * bypassPermissions while that is off, reads as absent and is logged.
 * Redis cases run against real Redis (TEST_REDIS_URL or 127.0.0.1:6379, a fresh
 * prefix per case). Also the generated store secret ($DATA_DIR/store-secret).
 */
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import { mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, it } from 'node:test'
import pino from 'pino'
import { MemoryStore } from '../../src/store/memory.js'
import { RedisStore } from '../../src/store/redis.js'
import { canonicalJson } from '../../src/store/canonical-json.js'
import { SignedStore, recordMac } from '../../src/store/signed-records.js'
import { loadStoreSecret } from '../../src/store/store-secret.js'
import type { EventStore, SessionRecord } from '../../src/store/store.js'
import { REDIS_URL, deleteKeys, redisCommand } from '../support/redis-server.js'
import { DEFAULT_RETENTION, events } from '../support/store-contract.js'

const SECRET = 'k'.repeat(43)

function capture (): { logger: pino.Logger, entries: () => any[] } {
  const lines: string[] = []
  const logger = pino({ level: 'trace' }, { write: (line: string) => { lines.push(line) } })
  return { logger, entries: () => lines.map((l) => JSON.parse(l)) }
}

function record (overrides: Partial<SessionRecord> = {}): SessionRecord {
  const now = '2025-03-04T05:06:07.089Z'
  return {
    id: randomUUID(),
    tenant: 'tenant-a',
    status: 'stopped',
    created_at: now,
    updated_at: now,
    options: { model: 'sonnet', permission_mode: 'default', allowed_tools: ['Read', 'Bash(git log:*)'] },
    metadata: { z: 1, a: [1, { y: 'x', b: null }], __proto__: { nested: true } },
    last_seq: 7,
    resumable: true,
    exit: { code: 0, signal: null, stderr_tail: ['bye'], reason: 'stopped', at: now },
    ...overrides
  }
}

interface Raw {
  /** Reads the stored record as the inner store holds it (MAC included). */
  get: (id: string) => Promise<any>
  /** Replaces the stored record behind the gateway's back. */
  set: (id: string, value: any) => Promise<void>
}

const backends: Array<{ name: string, make: () => Promise<{ inner: EventStore, raw: Raw, cleanup: () => Promise<void> }> }> = [
  {
    name: 'memory',
    make: async () => {
      const inner = new MemoryStore({ retention: DEFAULT_RETENTION })
      const raw: Raw = {
        get: async (id) => await inner.getSession(id),
        set: async (id, value) => { await inner.putSession({ ...value, id }) }
      }
      return { inner, raw, cleanup: () => inner.close() }
    }
  },
  {
    name: 'redis',
    make: async () => {
      const prefix = `cgw-test:${randomUUID()}:`
      const inner = new RedisStore({ url: REDIS_URL, prefix, retention: DEFAULT_RETENTION })
      const raw: Raw = {
        get: async (id) => JSON.parse(await redisCommand(REDIS_URL, ['GET', `${prefix}{${id}}:meta`]) as string),
        set: async (id, value) => { await redisCommand(REDIS_URL, ['SET', `${prefix}{${id}}:meta`, JSON.stringify(value)]) }
      }
      return { inner, raw, cleanup: async () => { await inner.close(); await deleteKeys(REDIS_URL, prefix) } }
    }
  }
]

for (const backend of backends) {
  describe(`SignedStore over ${backend.name}`, () => {
    const cleanups: Array<() => Promise<void>> = []
    afterEach(async () => { for (const c of cleanups.splice(0)) await c() })

    /** `counted`: what onRefused (cgw_store_refused_total) was told, one `kind/reason` per refused read. */
    const make = async (allowBypassPermissions = false): Promise<{ store: SignedStore, raw: Raw, logs: () => any[], counted: string[] }> => {
      const { inner, raw, cleanup } = await backend.make()
      cleanups.push(cleanup)
      const { logger, entries } = capture()
      const counted: string[] = []
      const onRefused = (kind: string, why: string): void => { counted.push(`${kind}/${why}`) }
      return { store: new SignedStore(inner, { secret: SECRET, allowBypassPermissions, logger, onRefused }), raw, logs: entries, counted }
    }

    const refusals = (logs: () => any[]): Array<{ session: string, reason: string }> =>
      logs().filter((e) => e.level === 50).map((e) => ({ session: e.session, reason: e.reason }))

    it('stores a MAC with each record and reads its records back without it', async () => {
      const { store, raw, logs } = await make()
      const r = record({ status: 'running', exit: null })
      await store.putSession(r)
      const stored = await raw.get(r.id)
      assert.equal(stored.mac, recordMac(SECRET, r))
      assert.deepEqual(await store.getSession(r.id), JSON.parse(JSON.stringify(r)))
      assert.deepEqual((await store.listSessions('tenant-a', { limit: 10 })).sessions.map((s) => s.id), [r.id])
      assert.deepEqual((await store.listLive()).map((s) => s.id), [r.id])
      assert.equal((await store.getSession(r.id))?.mac, undefined)
      assert.deepEqual(refusals(logs), [])
      // Events pass through untouched.
      await store.append(r.id, events(1, 3))
      assert.deepEqual(await store.read(r.id, 0, 10), events(1, 3))
      assert.equal(await store.firstSeq(r.id), 1)
    })

    it('refuses a record changed outside the gateway: absent for get, listings and recovery, logged with id and reason', async () => {
      const { store, raw, logs, counted } = await make()
      const victim = record({ status: 'running', exit: null })
      const other = record({ tenant: 'tenant-b' })
      await store.putSession(victim)
      await store.putSession(other)
      const tampered = await raw.get(victim.id)
      tampered.tenant = 'tenant-b'
      tampered.options.permission_mode = 'acceptEdits'
      await raw.set(victim.id, tampered)
      assert.equal(await store.getSession(victim.id), null)
      assert.deepEqual((await store.listSessions('tenant-a', { limit: 10 })).sessions, [])
      assert.deepEqual((await store.listSessions('tenant-b', { limit: 10 })).sessions.map((s) => s.id), [other.id])
      assert.deepEqual(await store.listLive(), [])
      assert.deepEqual(refusals(logs)[0], { session: victim.id, reason: 'MAC does not match' })
      // Logged once at error level per record and reason, not once per lookup; counted at each.
      assert.equal(refusals(logs).length, 1)
      // At least get and listLive; a listing reads it too where the store's index still holds it.
      assert.ok(counted.length >= 2 && counted.every((c) => c === 'record/mac'), counted.join())
    })

    it('refuses a record without a MAC', async () => {
      const { store, raw, logs, counted } = await make()
      const r = record()
      await raw.set(r.id, r)
      assert.equal(await store.getSession(r.id), null)
      assert.deepEqual(refusals(logs), [{ session: r.id, reason: 'no MAC' }])
      assert.deepEqual(counted, ['record/unsigned'])
    })

    it('refuses a correctly signed record copied under another session id', { skip: backend.name === 'memory' && 'the memory store keys a record by its own id' }, async () => {
      const { store, raw, logs, counted } = await make()
      const r = record()
      await store.putSession(r)
      const elsewhere = randomUUID()
      await raw.set(elsewhere, await raw.get(r.id))
      assert.equal(await store.getSession(elsewhere), null)
      assert.match(refusals(logs)[0]?.reason ?? '', /stored under id/)
      assert.deepEqual(counted, ['record/id'])
    })

    it('refuses a signed record that fails the record schema', async () => {
      const cases: Array<[string, Partial<SessionRecord>, RegExp]> = [
        ['tenant', { tenant: '..' }, /tenant: not a tenant name/],
        ['status', { status: 'hacked' as never }, /status/],
        ['unknown option', { options: { model: 'sonnet', dangerously_skip: true } }, /options/],
        ['option value', { options: { allowed_tools: ['Bash\n--evil'] } }, /options\.allowed_tools/],
        ['last_seq', { last_seq: -1 }, /last_seq/]
      ]
      for (const [what, overrides, reason] of cases) {
        const { store, raw, logs, counted } = await make()
        const bad = record(overrides)
        // Signed with the right key: only the schema can catch it.
        await raw.set(bad.id, { ...bad, mac: recordMac(SECRET, bad) })
        assert.equal(await store.getSession(bad.id), null, what)
        assert.match(refusals(logs)[0]?.reason ?? '', reason, what)
        assert.deepEqual(counted, ['record/schema'], what)
      }
    })

    it('refuses a signed record asking for bypassPermissions unless ALLOW_BYPASS_PERMISSIONS is on', async () => {
      const r = record({ options: { permission_mode: 'bypassPermissions' } })
      const off = await make(false)
      await off.store.putSession(r)
      assert.equal(await off.store.getSession(r.id), null)
      assert.deepEqual(refusals(off.logs), [{ session: r.id, reason: 'options.permission_mode is bypassPermissions and ALLOW_BYPASS_PERMISSIONS is false' }])
      assert.deepEqual(off.counted, ['record/policy'])
      const on = await make(true)
      await on.store.putSession(r)
      assert.equal((await on.store.getSession(r.id))?.id, r.id)
      assert.deepEqual(on.counted, [])
    })

    it('a record signed with another secret is refused', async () => {
      const { store, raw } = await make()
      const r = record()
      await raw.set(r.id, { ...r, mac: recordMac('another-secret-of-at-least-32-characters', r) })
      assert.equal(await store.getSession(r.id), null)
    })
  })
}

describe('canonicalJson', () => {
  it('sorts keys at every level, leaves out undefined members, and treats __proto__ as a key', () => {
    const value = JSON.parse('{"b":1,"a":{"d":[3,{"f":null,"e":"x"}],"c":true},"__proto__":{"p":1}}')
    assert.equal(canonicalJson({ ...value, u: undefined }), '{"__proto__":{"p":1},"a":{"c":true,"d":[3,{"e":"x","f":null}]},"b":1}')
    assert.equal(canonicalJson(value), canonicalJson(JSON.parse(JSON.stringify(value))))
  })
})

describe('loadStoreSecret', () => {
  const dirs: string[] = []
  afterEach(() => { for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true }) })
  const dataDir = (): string => {
    const d = mkdtempSync(join(tmpdir(), 'cgw-secret-'))
    dirs.push(d)
    return join(d, 'data')
  }

  it('creates $DATA_DIR/store-secret with mode 0600 and reuses it', () => {
    const dir = dataDir()
    const first = loadStoreSecret(dir)
    assert.ok(first.length >= 32)
    const file = join(dir, 'store-secret')
    assert.equal(statSync(file).mode & 0o777, 0o600)
    assert.equal(readFileSync(file, 'utf8').trim(), first)
    assert.equal(loadStoreSecret(dir), first)
  })

  it('gateways starting at once on one data dir agree on one secret', async () => {
    const dir = dataDir()
    const module = new URL('../../src/store/store-secret.ts', import.meta.url).href
    const script = `import { loadStoreSecret } from ${JSON.stringify(module)}; process.stdout.write(loadStoreSecret(${JSON.stringify(dir)}))`
    const run = (): Promise<string> => new Promise((resolve, reject) => {
      execFile(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], (err, stdout) => err === null ? resolve(stdout) : reject(err))
    })
    const all = await Promise.all(Array.from({ length: 4 }, run))
    assert.equal(new Set(all).size, 1, all.join(' '))
    assert.equal(all[0], loadStoreSecret(dir))
    assert.deepEqual(readdirSync(dir), ['store-secret'], 'no temporary file left behind')
  })

  it('refuses a store-secret that is too short', () => {
    const dir = dataDir()
    loadStoreSecret(dir)
    writeFileSync(join(dir, 'store-secret'), 'short\n')
    assert.throws(() => loadStoreSecret(dir), /fewer than 32 characters/)
  })
})
