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
    await dropFailedCreate(session, lease, deps)
    throw failed
  }
  return session
}

/**
 * A create whose record is stored but whose CLI never started: the session
 * has recorded that (exited, `spawn_failed`, instead of "starting") and gives
 * its lease up once that is stored, as after any failed start
 * (session-cli.ts); it is unloaded, so the next lookup loads that record.
 */
async function dropFailedCreate (session: Session, lease: Lease, deps: SessionCreationDeps): Promise<void> {
  deps.unload(session.id)
  // Whatever becomes of it, the create answers with its start's error.
  await session.disown().catch((err: unknown) => { deps.logger.warn({ err, session: session.id }, 'could not give a failed create\'s lease up') })
  // Kept by the session (a frame waiting for it): the session object is dropped all the same.
  deps.keeper.forget(lease)
  await deps.keeper.release(lease).catch(() => {})
}
