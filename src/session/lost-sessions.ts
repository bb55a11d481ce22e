/**
 * Finds the sessions whose node is gone, so they are recorded as stopped
 * (`exit.reason: "lost"`): once at start (`recover`) and then by a periodic
 * sweep of lapsed leases. Loading a session (session-manager.ts) is what
 * records it as lost; this only decides which sessions to load, or which
 * loaded ones to take the lease of.
 */
import type { Logger } from 'pino'
import type { EventStore, SessionRecord } from '../store/store.js'
import { isFinal } from '../store/store.js'
import type { Session } from './session.js'

export interface LostSessionsOptions {
  store: EventStore
  logger: Logger
  /** A session loaded on this node, if any. */
  loaded: (id: string) => Session | undefined
  /** True while this node is loading the session from the store. */
  loading: (id: string) => boolean
  /** Loads the session (recording it as lost when its node is gone), as SessionManager.get. */
  get: (id: string, tenant: string) => Promise<Session | null>
  /** True once the node drains (shutdown): no more sweeps. */
  closing: () => boolean
  /** The live session records; a failure is answered 503 `store_unavailable`. */
  listLive: () => Promise<SessionRecord[]>
}

export class LostSessions {
  readonly #o: LostSessionsOptions
  #sweeper: NodeJS.Timeout | null = null
  #sweeping = false

  constructor (options: LostSessionsOptions) {
    this.#o = options
  }

  /**
   * Marks sessions whose node is gone as stopped (`exit.reason: "lost"`): at
   * start, those left by this node's previous process (same NODE_ID, or a
   * dead pid of this host) and every session whose lease has lapsed. Sessions
   * whose lease a live node holds are left to it. Returns how many were marked.
   */
  async recover (): Promise<number> {
    const live = await this.#o.listLive()
    let marked = 0
    for (const record of live) {
      try {
        const session = await this.#o.get(record.id, record.tenant)
        if (session !== null && isFinal(session.status)) marked++
      } catch (err) {
        // Marked when first loaded instead (any later lookup loads it the same way).
        this.#o.logger.warn({ session: record.id, err: (err as Error).message }, 'could not mark a session left running as lost')
      }
    }
    return marked
  }

  /**
   * Every `everyMs`, records as lost the live sessions whose lease lapsed
   * (their node died or hangs): each node sweeps, and the lease decides
   * which one records it.
   */
  startSweeping (everyMs: number): void {
    if (this.#sweeper !== null) return
    this.#sweeper = setInterval(() => { void this.#sweep() }, everyMs)
    this.#sweeper.unref()
  }

  /** No more sweeps (shutdown). */
  stop (): void {
    if (this.#sweeper !== null) clearInterval(this.#sweeper)
  }

  async #sweep (): Promise<void> {
    if (this.#sweeping || this.#o.closing()) return
    this.#sweeping = true
    try {
      const live = await this.#o.store.listLive()
      for (const record of live) {
        const loaded = this.#o.loaded(record.id)
        if (loaded?.owned === true || this.#o.loading(record.id)) continue
        if (await this.#o.store.leases.holder(record.id) !== null) continue
        if (loaded === undefined) {
          await this.#o.get(record.id, record.tenant) // loading claims it (see SessionManager #load)
        } else if (await loaded.own()) {
          this.#o.logger.warn({ session: record.id }, 'session lease lapsed: recorded as lost')
          await loaded.disown()
        }
      }
    } catch (err) {
      this.#o.logger.warn({ err: (err as Error).message }, 'lapsed-lease sweep failed; trying again')
    } finally {
      this.#sweeping = false
    }
  }
}
