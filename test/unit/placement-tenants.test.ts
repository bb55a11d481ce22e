/**
 * Placement's per-tenant counts (src/cluster/placement.ts): each node reports
 * its CLIs per tenant to the store it shares with the others, at once when
 * they change, and MAX_SESSIONS_PER_TENANT adds what the other live nodes
 * reported. Two Placement objects over one MemoryStore stand for two nodes.
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { pino } from 'pino'
import { Placement } from '../../src/cluster/placement.js'
import { MemoryStore } from '../../src/store/memory.js'

const logger = pino({ level: 'silent' })

function node (store: MemoryStore, name: string, tenants: Record<string, number>): Placement {
  return new Placement({
    store,
    node: name,
    load: () => ({ running: Object.values(tenants).reduce((a, b) => a + b, 0), max: 10, tenants: { ...tenants } }),
    everyMs: 60_000,
    createOn: async () => { throw new Error('not used') },
    logger
  })
}

describe('Placement: a tenant\'s sessions on the other nodes', () => {
  it('adds up what the other live nodes reported, never this node\'s own', async () => {
    let now = 1_000_000
    const store = new MemoryStore({ retention: { maxEventsPerSession: 100, ttlSecondsAfterEnd: 0 }, now: () => now })
    const onA = { acme: 2, other: 1 }
    const onB = { acme: 3 }
    const a = node(store, 'a', onA)
    const b = node(store, 'b', onB)
    const c = node(store, 'c', {})
    await a.start()
    await b.start()
    await c.start()
    try {
      await a.refresh()
      assert.equal(a.tenantElsewhere('acme'), 3, 'A counts B\'s, not its own')
      assert.equal(c.tenantElsewhere('acme'), 5)
      assert.equal(c.tenantElsewhere('other'), 1)
      assert.equal(c.tenantElsewhere('nobody'), 0)

      // A stops one of acme's CLIs: it says so at once, not at its next report tick.
      onA.acme = 1
      await a.changed()
      await c.refresh()
      assert.equal(c.tenantElsewhere('acme'), 4)

      // B stops reporting (it died): once its report is older than three ticks, it no longer counts.
      now += 3 * 60_000 + 1
      await a.changed()
      await c.refresh()
      assert.equal(c.tenantElsewhere('acme'), 1, 'only A\'s, whose report is fresh')
    } finally {
      await a.close()
      await b.close()
      await c.close()
    }
  })
})
