/**
 * What a Session is given: its limits and the parts it uses (store, CLI
 * launcher, policy), passed in so tests and the session manager pick them.
 */
import type { Logger } from 'pino'
import type { CliLauncher, CliSpawnSpec } from '../cli/cli-handle.js'
import type { ControlPolicy, PolicyScope } from '../control/control-policy.js'
import type { GatewayError } from '../errors.js'
import type { MetricsSink } from '../metrics/sink.js'
import type { EventStore } from '../store/store.js'

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
}
