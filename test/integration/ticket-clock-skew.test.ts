/**
 * A WebSocket ticket works once across every node, whatever their clocks.
 * Each node judges a ticket's expiry by its own clock, so the mark that
 * spends it in the store must outlive the ticket on the node whose clock is
 * furthest behind: it used to last only until the ticket expired by the
 * clock of the node that spent it, and a node running ahead (by most of
 * WS_TICKET_TTL_MS) left a ticket that a node on time opened again.
 */
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { after, describe, it } from 'node:test'
import { TicketBook } from '../../src/auth/tickets.js'
import { MemoryStore } from '../../src/store/memory.js'
import { RedisStore } from '../../src/store/redis.js'
import { REDIS_URL, deleteKeys, redisCommand } from '../support/redis-server.js'

const SECRET = 'k'.repeat(48)
const TTL_MS = 30_000
/** How far the spending node's clock runs ahead: the ticket has 100 ms left by it. */
const AHEAD_MS = TTL_MS - 100

/** The nonce a ticket is spent under (its grant is base64url JSON before the first dot). */
function nonceOf (ticket: string): string {
  return (JSON.parse(Buffer.from(ticket.split('.')[0] as string, 'base64url').toString('utf8')) as { n: string }).n
}

describe('a ticket spent on a node whose clock runs ahead', () => {
  it('stays spent in Redis for as long as a node on time would still take it', async () => {
    const prefix = `ticket-skew-${randomUUID()}:`
    const store = new RedisStore({ url: REDIS_URL, prefix, retention: { maxEventsPerSession: 100, ttlSecondsAfterEnd: 60 } })
    after(async () => {
      await store.close()
      await deleteKeys(REDIS_URL, prefix)
    })
    const claimOnce = (key: string, ttlMs: number): Promise<boolean> => store.claimOnce(key, ttlMs)
    const onTime = new TicketBook({ ttlMs: TTL_MS, secret: SECRET, claimOnce })
    const ahead = new TicketBook({ ttlMs: TTL_MS, secret: SECRET, claimOnce, now: () => Date.now() + AHEAD_MS })

    const { ticket, expires_at: expiresAt } = onTime.issue('tenant-a', 's1', 'credential-of-tenant-a')
    assert.deepEqual(await ahead.redeem(ticket, 's1'), { tenant: 'tenant-a', credential: 'credential-of-tenant-a' })

    const stillValidOnTime = Date.parse(expiresAt) - Date.now()
    const spentFor = await redisCommand(REDIS_URL, ['PTTL', `${prefix}ticket:${nonceOf(ticket)}`]) as number
    assert.ok(spentFor >= stillValidOnTime,
      `spent for ${spentFor} ms in Redis, but a node on time takes the ticket for ${stillValidOnTime} ms more`)
    assert.equal(await onTime.redeem(ticket, 's1'), null, 'the node on time refuses it')
  })

  it('is refused by a node on time once the spending node\'s clock says it expired (one store clock for both)', async () => {
    // The store's own clock, moved by hand: the claim lapses as Redis's PX would.
    let storeNow = 1_000_000
    const store = new MemoryStore({ retention: { maxEventsPerSession: 100, ttlSecondsAfterEnd: 60 }, now: () => storeNow })
    const claimOnce = (key: string, ttlMs: number): Promise<boolean> => store.claimOnce(key, ttlMs)
    const onTime = new TicketBook({ ttlMs: TTL_MS, secret: SECRET, claimOnce, now: () => storeNow })
    const ahead = new TicketBook({ ttlMs: TTL_MS, secret: SECRET, claimOnce, now: () => storeNow + AHEAD_MS })

    const { ticket } = onTime.issue('tenant-a', 's1', null)
    assert.deepEqual(await ahead.redeem(ticket, 's1'), { tenant: 'tenant-a', credential: null }, 'first use, on the node ahead')
    storeNow += 1_000 // past the ticket's end by the node ahead; 29 s before it by the node on time
    assert.equal(await onTime.redeem(ticket, 's1'), null, 'second use, on the node on time')
  })
})
