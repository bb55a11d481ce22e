/**
 * Never trust a node's load report either. Every node reports how full it is
 * (CLIs running, its MAX_SESSIONS, its count per tenant) and reads every
 * other node's: placement sends creates to the least loaded node with room,
 * MAX_SESSIONS_PER_TENANT adds up every node's count, and the webhook sweep
 * takes over the outbox of a node that no longer reports. Without a MAC,
 * anyone who can write Redis could shrink a tenant's counts (its limit no
 * longer holds across the cluster), invent a node with room (creates routed
 * to an inbox nobody reads), or keep a dead node listed (its webhooks never
 * taken over).
 *
 * The MAC (HMAC-SHA256, key derived from the store secret) covers the whole
 * report and the time it holds until, which the reporting node sets: a
 * report changed, moved under another node's name, or kept past its time
 * (a copy written back later) is refused. A copy written back within its
 * time says only what its node said then.
 */
import { createHmac, timingSafeEqual } from 'node:crypto'
import type { NodeLoad } from './store.js'
import { canonicalJson } from './canonical-json.js'

/** Why a report was not believed (`unsigned`: no MAC, from a node of an older version; `mac`: altered, or another secret). */
export type NodeReportRefusal = 'unsigned' | 'mac'

const DOMAIN = 'cgw-node-report-v1\n'

export class SignedNodeReports {
  readonly #key: Buffer

  constructor (secret: string) {
    this.#key = createHmac('sha256', secret).update(DOMAIN).digest()
  }

  /** `load` as reported for `ttlMs` from its `at`: with `until` and its MAC. */
  seal (load: NodeLoad, ttlMs: number): NodeLoad {
    const { mac: _mac, until: _until, ...plain } = load
    const signed = { ...plain, until: load.at + ttlMs }
    return { ...signed, mac: this.#mac(signed) }
  }

  /**
   * The report as its node made it, `'stale'` when its own time ran out
   * (before `now`), or why it is not believed.
   */
  check (load: NodeLoad, now: number): NodeLoad | 'stale' | NodeReportRefusal {
    const { mac, ...plain } = load
    if (typeof mac !== 'string' || mac === '' || typeof plain.until !== 'number') return 'unsigned'
    const expected = Buffer.from(this.#mac(plain))
    const given = Buffer.from(mac)
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return 'mac'
    return plain.until > now ? plain : 'stale'
  }

  #mac (report: Omit<NodeLoad, 'mac'>): string {
    return createHmac('sha256', this.#key).update(canonicalJson(report)).digest('base64url')
  }
}
