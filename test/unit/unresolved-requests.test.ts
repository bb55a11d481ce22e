/**
 * unresolvedRequests (src/session/unresolved-requests.ts) over a real
 * MemoryStore log: what a lost CLI left open is what it asked and nothing
 * ended (an answer's record, the CLI's own cancel, the CLI's exit), across
 * pages, within the last LOST_SCAN_EVENTS events.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { MemoryStore } from '../../src/store/memory.js'
import { LOST_SCAN_EVENTS, unresolvedRequests } from '../../src/session/unresolved-requests.js'

const SESSION = '00000000-0000-4000-8000-000000000001'

const ask = (id: string, subtype = 'can_use_tool'): Record<string, unknown> => ({ type: 'control_request', request_id: id, request: { subtype, tool_name: 'Bash' } })
const resolved = (id: string): Record<string, unknown> => ({ type: 'gateway', subtype: 'permission_resolved', request_id: id, decision: 'allowed', by: 'client' })
const line = (n: number): Record<string, unknown> => ({ type: 'assistant', n })

async function logOf (frames: Array<Record<string, unknown>>): Promise<MemoryStore> {
  const store = new MemoryStore({ retention: { maxEventsPerSession: 100_000, ttlSecondsAfterEnd: 3600 } })
  await store.append(SESSION, frames.map((f, i) => ({ seq: i + 1, frame: JSON.stringify({ seq: i + 1, ...f }) })))
  return store
}

test('open: asked and not ended by an answer, a cancel of the CLI or its exit; oldest first, with subtypes', async () => {
  const store = await logOf([
    ask('before-exit'),
    { type: 'gateway', subtype: 'status', status: 'exited' },
    ask('answered'), resolved('answered'),
    ask('withdrawn', 'hook_callback'), { type: 'control_cancel_request', request_id: 'withdrawn' },
    ask('open-1'),
    ask('open-2', 'hook_callback'),
    { type: 'gateway', subtype: 'request_resolved', request_id: 'elsewhere' },
    line(1), 'not json' as unknown as Record<string, unknown>
  ])
  assert.deepEqual(await unresolvedRequests(store, SESSION), [
    { requestId: 'open-1', subtype: 'can_use_tool' },
    { requestId: 'open-2', subtype: 'hook_callback' }
  ])
  assert.deepEqual(await unresolvedRequests(store, '00000000-0000-4000-8000-000000000002'), [], 'no log')
})

test('reads the last LOST_SCAN_EVENTS events, in pages: a request older than that is not seen', async () => {
  const filler = Array.from({ length: LOST_SCAN_EVENTS - 2 }, (_, i) => line(i))
  const store = await logOf([ask('too-old'), ask('just-in'), ...filler, ask('last')])
  assert.deepEqual((await unresolvedRequests(store, SESSION)).map((r) => r.requestId), ['just-in', 'last'])
})
