/**
 * What a Session is given: its limits and the parts it uses (store, CLI
 * launcher, policy), passed in so tests and the session manager pick them.
 */
import type { Logger } from 'pino'
import type { CliLauncher, CliSpawnSpec } from '../cli/cli-handle.js'
import type { ControlPolicy, PolicyScope } from '../control/control-policy.js'
import type { GatewayError } from '../errors.js'
import type { MetricsSink } from '../metrics/sink.js'
import type { EventStore, Lease } from '../store/store.js'
import type { ClientFrame } from '../protocol/client-frames.js'
import type { ClientPort, Role } from './audience.js'
import type { SessionEvents } from './session-events.js'

/** How a session takes and gives up its lease (the right to run its CLI and write its log), and its node's name. */
export interface SessionOwnership {
  /** Takes the lease for this node and keeps it renewed; null when another live node holds it. `onFenced` when it is lost. */
  acquire: (sessionId: string, onFenced: () => void) => Promise<Lease | null>
  /** Gives it up (the CLI has stopped and everything is stored). */
  release: (lease: Lease) => Promise<void>
  /** Stops renewing a lease that is no longer ours (fenced). */
  forget: (lease: Lease) => void
  /**
   * After a write was refused as fenced: takes the lease back if it only
   * lapsed (or the store lost it) and no other node acquired it since; true
   * when the write may be tried again under it.
   */
  reclaim: (lease: Lease) => Promise<boolean>
  /**
   * False when this node may have lost `lease` without knowing (it was paused
   * past SESSION_LEASE_MS since the store last confirmed it): `reclaim` first.
   * Absent: always fresh.
   */
  fresh?: (lease: Lease) => boolean
}

/** How a session reaches the node that owns it, for clients attached here (src/cluster/router.ts). */
export interface SessionRoute {
  /** This node's NODE_ID. */
  readonly node: string
  /** The node holding the session's lease now, or null when none does. */
  owner: (sessionId: string) => Promise<string | null>
  /**
   * Makes `port` a client of the session owned by `owner`. `rejoin`: routed
   * there again, not a fresh attach (Session.attachRemote: a controller then
   * takes the session only when nobody holds it).
   */
  attach: (owner: string, sessionId: string, port: ClientPort, role: Role, options?: { rejoin?: boolean }) => void
  /** Sends a frame of a routed client to its owner; false when the client is not routed. */
  frame: (port: ClientPort, frame: ClientFrame) => boolean
  detach: (port: ClientPort) => void
  /** Stops routing a client here (the CLI stopped on its node, or runs here now); its unconfirmed frames come back, in order. */
  unroute: (port: ClientPort) => ClientFrame[]
  /** This node stopped owning the session: forget its remote clients. */
  dropRemote: (sessionId: string) => void
  /** An HTTP request's operation, done by the owner (rejects with a `NotOwner` error when that node does not own it). */
  call: (owner: string, sessionId: string, op: 'answer' | 'stop' | 'pending' | 'snapshot', args: unknown[]) => Promise<unknown>
}

export interface SessionLimits {
  permissionTimeoutMs: number
  controlRequestTimeoutMs: number
  clientRequestTimeoutMs: number
  idleTimeoutMs: number
  storeQueueMax: number
  /** How long a new CLI's initialize waits for the holder's own (INITIALIZE_HOLD_MS). */
  initializeHoldMs: number
  /** How long a resuming client's replay waits for a store that does not answer (RESUME_STORE_WAIT_MS). */
  resumeWaitMs: number
}

export interface SessionDeps<S> {
  store: EventStore
  launch: CliLauncher
  /** Builds how to spawn this session's CLI; `resume` picks --resume over --session-id. */
  spawnSpec: (resume: boolean) => CliSpawnSpec
  /** Refuses a (re)start, e.g. when MAX_SESSIONS CLIs run already. */
  admit: () => GatewayError | null
  /** Told whenever the session's status changes. */
  onStatus: (session: S) => void
  limits: SessionLimits
  logger: Logger
  /** What clients may ask of the CLI (control requests, permission answers). */
  policy: ControlPolicy
  /** The tenant's workspace roots and this session's folder, for directories in grants. */
  policyScope: () => PolicyScope
  /** What is counted for /metrics (default: nothing). */
  metrics?: MetricsSink
  /** Who is told of prompts, finished turns and ended sessions (webhooks; default: nobody). */
  events?: SessionEvents
  ownership: SessionOwnership
  /**
   * The CLI's conversation file carried through the store (nodes with local
   * config dirs): saved as the CLI writes it, after turns and at the CLI's
   * end, written back before a resume here. Absent: nothing is carried (one node, or a shared volume).
   */
  conversation?: {
    save: (lease: Lease) => Promise<void>
    restore: () => Promise<void>
    /**
     * Calls `changed` whenever the CLI writes to the file (once a save has
     * found it); returns how to stop, or null when there is no file yet.
     */
    watch: (changed: () => void) => (() => void) | null
  }
  /** Other nodes, for clients here of a session owned elsewhere (absent: one node, nothing to route). */
  route?: SessionRoute
  /** The session lost its lease to another node: it has ended its CLI and clients and must be forgotten here. */
  onFenced: (session: S) => void
}
