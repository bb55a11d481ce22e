/**
 * Sizes one tenant could use to exhaust the host, and what a start that
 * cannot happen looks like: `metadata` is at most 16 KiB (a flood of large
 * ones is refused, nothing is kept), a history page stops before
 * HISTORY_PAGE_MAX_BYTES (and says has_more), an argument too large for
 * exec is refused with 400 before anything is stored, and a CLI that cannot
 * be spawned leaves a session that says so (exited, spawn_failed), never one
 * "starting" for ever.
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { MemoryStore } from '../../src/store/memory.js'
import { isResult } from '../support/frames.js'
import { TOKEN_A, eventually } from '../support/gateway.js'
import { client, gateway } from '../support/sessions.js'

describe('metadata size', () => {
  it('refuses 150 creates with 900 KB metadata (400, nothing stored) and takes metadata up to 16 KiB of JSON', async (t) => {
    const gw = await gateway(t, { env: { RATE_LIMIT_PER_MINUTE: '100000' } })
    const big = { blob: 'm'.repeat(900_000) }
    for (let i = 0; i < 150; i++) {
      const res = await gw.request('POST', '/v1/sessions', { metadata: { ...big, i } })
      if (res.status === 201) await gw.request('DELETE', `/v1/sessions/${res.body.id}`) // the flood: create, then delete
      assert.equal(res.status, 400, `create ${i}`)
      assert.equal(res.body.code, 'bad_request')
      assert.match(res.body.message, /^metadata: /)
    }
    assert.deepEqual((await gw.request('GET', '/v1/sessions')).body.sessions, [], 'no session, so no metadata, was kept')

    // Bytes of JSON, not characters: 6000 three-byte characters are 18 000 bytes.
    const wide = await gw.request('POST', '/v1/sessions', { metadata: { note: '日'.repeat(6000) } })
    assert.equal(wide.status, 400)
    const fits = { note: 'y'.repeat(16 * 1024 - 20) }
    const created = await gw.createSession({ metadata: fits })
    assert.deepEqual(created.metadata, fits)
  })
})

describe('history page byte budget', () => {
  it('stops a page before HISTORY_PAGE_MAX_BYTES with has_more, always gives at least one event, and pages and replays lose nothing', async (t) => {
    const budget = 1024 * 1024
    const gw = await gateway(t, { env: { HISTORY_PAGE_MAX_BYTES: String(budget) } })
    const id = (await gw.createSession()).id
    const holder = await client(gw, t, id, 'after=0')
    for (const bytes of [300_000, 300_000, 300_000, 300_000, 300_000, 3_000_000, 300_000]) {
      const from = holder.frames.length
      holder.sendUser(`huge ${bytes}`)
      await holder.waitFor(isResult, 20_000, from)
    }
    const live = holder.seqFrames

    const pages: Array<{ bytes: number, events: any[], hasMore: boolean }> = []
    let after = 0
    for (;;) {
      const res = await fetch(`${gw.url}/v1/sessions/${id}/events?after=${after}&limit=1000`, { headers: { authorization: `Bearer ${TOKEN_A}` } })
      assert.equal(res.status, 200)
      const text = await res.text()
      const body = JSON.parse(text)
      pages.push({ bytes: Buffer.byteLength(text), events: body.events, hasMore: body.has_more })
      if (!body.has_more) break
      after = body.next_after
      assert.ok(pages.length < 100, 'paging ends')
    }
    assert.ok(pages.length >= 3, `${pages.length} pages`)
    for (const page of pages) {
      assert.ok(page.events.length >= 1, 'never an empty page while more exists')
      if (page.events.length > 1) assert.ok(page.bytes <= budget + 200, `a page of ${page.events.length} events is ${page.bytes} bytes`)
    }
    assert.ok(pages.some((p) => p.events.length === 1 && p.bytes > budget), 'an event larger than the budget comes alone')
    assert.ok(pages.slice(0, -1).every((p) => p.hasMore))
    const all = pages.flatMap((p) => p.events)
    assert.deepEqual(all.map((e) => e.seq), Array.from({ length: all.length }, (_, i) => i + 1), 'contiguous, nothing skipped or repeated')
    assert.deepEqual(all.slice(0, live.length), live, 'history is what the holder received')

    // A reconnecting client replays the same, across the replay's own byte-bounded reads.
    const late = await client(gw, t, id, 'role=observer&after=0')
    await late.until(() => late.seqFrames.length >= all.length || undefined, 20_000, 'the whole replay')
    assert.deepEqual(late.seqFrames.slice(0, all.length).map((f) => f.seq), all.map((e) => e.seq))
  })
})

describe('argument sizes and failed starts', () => {
  it('refuses a 300 KB multi-byte append_system_prompt with 400 before anything is stored, and passes one that fits exec', async (t) => {
    const gw = await gateway(t)
    const res = await gw.request('POST', '/v1/sessions', { append_system_prompt: '日'.repeat(100_000) })
    assert.equal(res.status, 400)
    assert.equal(res.body.code, 'bad_request')
    assert.match(res.body.message, /^append_system_prompt: .*bytes/)
    assert.deepEqual((await gw.request('GET', '/v1/sessions')).body.sessions, [], 'no session left "starting"')

    const prompt = 'p'.repeat(131_000)
    const created = await gw.createSession({ append_system_prompt: prompt })
    const dump = await eventually(() => gw.argvDumps(created.id)[0], 5000, 'the CLI to start')
    assert.ok(dump.argv.includes(`--append-system-prompt=${prompt}`), 'the CLI got the whole prompt')
  })

  it('a CLI that cannot be spawned (E2BIG) answers 502 and leaves the session exited with spawn_failed, in the API and in the store', async (t) => {
    const store = new MemoryStore({ retention: { maxEventsPerSession: 1000, ttlSecondsAfterEnd: 60 } })
    // One environment string over Linux's 128 KiB per-string limit: execve fails with E2BIG.
    const env = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ANTHROPIC_CUSTOM_HEADERS: `x-big: ${'h'.repeat(200_000)}` }
    const gw = await gateway(t, { parts: { store, env } })
    t.after(() => store.close())
    const res = await gw.request('POST', '/v1/sessions', {})
    assert.equal(res.status, 502)
    assert.equal(res.body.code, 'cli_start_failed')
    assert.match(res.body.message, /E2BIG/)

    const [listed] = (await gw.request('GET', '/v1/sessions')).body.sessions
    assert.equal(listed.status, 'exited')
    assert.equal(listed.exit.reason, 'spawn_failed')
    assert.match(listed.exit.error, /E2BIG/)
    const one = await gw.request('GET', `/v1/sessions/${listed.id}`)
    assert.equal(one.body.status, 'exited')
    assert.equal(one.body.exit.reason, 'spawn_failed')
    const stored = await store.getSession(listed.id)
    assert.equal(stored?.status, 'exited')
    assert.equal(stored?.exit?.reason, 'spawn_failed')
  })
})
