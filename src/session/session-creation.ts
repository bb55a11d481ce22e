/**
 * A create past admission: its lease, then its record, then its CLI. A failed
 * store write leaves no session behind (only the 503); a CLI that never
 * starts leaves a record that says so (`spawn_failed`) instead of one stuck
 * at "starting". Apart from session-manager.ts, which admits the create and
 * holds its slot.
 */
import type { Logger } from 'pino'
import type { LeaseKeeper } from '../cluster/lease-keeper.js'
import { GatewayError } from '../errors.js'
import type { SessionOptions } from '../protocol/session-options.js'
import type { EventStore, Lease, SessionRecord } from '../store/store.js'
import type { Session } from './session.js'
import type { SessionAdmission } from './session-admission.js'
import { storeCall } from './store-call.js'

export interface SessionCreationDeps {
  store: EventStore
  keeper: LeaseKeeper
  logger: Logger
  /** Holds the create's slot (reserved by the caller). */
  admission: SessionAdmission
  /** The session loaded on this node under that id, if any. */
  loaded: (id: string) => Session | undefined
  /** Makes the session object and loads it on this node. */
  instantiate: (record: SessionRecord, lease: Lease) => Session
  /** Unloads the session with that id. */
  unload: (id: string) => void
}

/** Stores the new session `id` and starts its CLI; throws the start's error, the record already saying so. */
export async function createReserved (id: string, tenant: string, options: SessionOptions, deps: SessionCreationDeps): Promise<Session> {
  const now = new Date().toISOString()
  const record: SessionRecord = {
    id,
    tenant,
    status: 'starting',
    created_at: now,
    updated_at: now,
    options: { ...options, metadata: undefined },
    metadata: options.metadata ?? null,
    last_seq: 0,
    resumable: false,
    exit: null
  }
  delete record.options.metadata
  // The lease first: the record is the new owner's first fenced write.
  const lease = await storeCall(deps.logger, 'take a new session lease', () => deps.keeper.acquire(id, () => deps.loaded(id)?.fence()))
  if (lease === null) throw new GatewayError('internal', 'a new session id is leased already')
  // Before anything is instantiated: a failed write leaves no session behind, only the 503.
  try {
    await storeCall(deps.logger, 'save a new session record', () => deps.store.putSession(record, lease))
  } catch (err) {
    deps.keeper.forget(lease)
    void deps.keeper.release(lease).catch(() => {})
    throw err
  }
  const session = deps.instantiate(record, lease)
  // Never throws: a spawn that fails (E2BIG, ENOENT) comes back as an error, the session already `exited`.
  // Answered once the CLI runs (with its pid), also when the spawn helper starts it.
  const failed = session.start() ?? await session.started()
  deps.admission.started(id)
  if (failed !== null) {
    await recordFailedCreate(record, failed, lease, deps)
    throw failed
  }
  return session
}

/**
 * A create whose record is stored but whose CLI never started: the record
 * says so (exited, `spawn_failed`) instead of staying "starting", and the
 * next lookup loads that record.
 */
async function recordFailedCreate (record: SessionRecord, failed: GatewayError, lease: Lease, deps: SessionCreationDeps): Promise<void> {
  deps.unload(record.id)
  const at = new Date().toISOString()
  const final: SessionRecord = {
    ...structuredClone(record),
    status: 'exited',
    updated_at: at,
    exit: { code: null, signal: null, stderr_tail: [], reason: 'spawn_failed', at, error: failed.message }
  }
  try {
    await deps.store.putSession(final, lease)
  } catch (err) {
    deps.logger.error({ err, session: record.id }, 'could not record a failed create; its record says "starting" until its lease lapses and it is marked lost')
  }
  deps.keeper.forget(lease)
  await deps.keeper.release(lease).catch(() => {})
}
