/**
 * The gateway's Prometheus metrics: one prom-client Registry per app (never
 * the global one, so several apps in one process, as in tests, keep apart)
 * for the gateway's own `cgw_*`, exposed after prom-client's default process
 * metrics, which are collected once per process (they describe the process,
 * and each set would run an event-loop monitor of its own).
 *
 * Counters and histograms are fed through the MetricsSink methods. Gauges
 * that are state (sessions by status, clients, CLIs running, unsaved frames)
 * are read from the SessionManager when scraped, so they cannot drift from
 * what the gateway holds. docs/API.md lists every metric.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client'
import type { SessionStatus } from '../store/store.js'
import { type BusRefusal, BUS_REFUSALS } from '../store/signed-bus.js'
import { STORE_REFUSALS, type StoreRefusal, type StoreRefusalKind } from '../store/signed-records.js'
import type { AuthFailureReason, FrameVerdict, MetricsSink, PermissionOutcome, RateLimitKind, SandboxRefusal } from './sink.js'

/** What a scrape reads of one loaded session (a Session satisfies it). */
export interface MetricsSession {
  readonly status: SessionStatus
  readonly clientRoles: { controller: number, observer: number }
  readonly events: { readonly unsavedCount: number }
}

/** What a scrape reads of the gateway (the SessionManager satisfies it). */
export interface MetricsSource {
  readonly runningCount: number
  readonly degraded: boolean
  readonly loaded: Iterable<MetricsSession>
}

const STATUSES: readonly SessionStatus[] = ['starting', 'running', 'stopping', 'stopped', 'exited']
const OUTCOMES: readonly PermissionOutcome[] = ['allow', 'deny', 'timeout', 'cancelled', 'error']
/** Ways a webhook delivery ends (src/webhooks/delivery-queue.ts). */
const WEBHOOK_OUTCOMES = ['delivered', 'rejected', 'exhausted', 'dropped', 'abandoned'] as const

/** What the metrics read of the webhook queue: its running totals and what it holds now. */
export type WebhookCounts = Record<typeof WEBHOOK_OUTCOMES[number] | 'waiting' | 'inFlight', number> & { recovered?: number }
const LIMIT_KINDS: readonly RateLimitKind[] = ['rest', 'ws_upgrade', 'ws_frames', 'auth_lockout']
const REFUSAL_KINDS: readonly SandboxRefusal[] = ['egress', 'api_path', 'connections']

/** Store appends: a local Redis answers in well under a millisecond, an outage takes its command timeout. */
const APPEND_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5]
/** Permission prompts wait on a person: seconds to an hour (PERMISSION_TIMEOUT_MS may be 0, for ever). */
const PERMISSION_BUCKETS = [0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600]

/**
 * spawn() forks the gateway: the event loop waits while the kernel copies its
 * page tables, about 1.6 ms at 80 MB of RSS and 13 ms at 440 MB on a 2-core
 * VM (docs/PERFORMANCE.md §22), and every session waits with it.
 */
const SPAWN_BUCKETS = [0.00005, 0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25]

let processRegistry: Registry | null = null

/** prom-client's default metrics (`process_*`, `nodejs_*`), registered on first use. */
function processMetrics (): Registry {
  if (processRegistry === null) {
    processRegistry = new Registry()
    collectDefaultMetrics({ register: processRegistry })
  }
  return processRegistry
}

export class Metrics implements MetricsSink {
  readonly registry = new Registry()
  #source: MetricsSource | null = null
  /** The webhook queue's counts, read when scraped (none: WEBHOOK_URL unset). */
  #webhooks: (() => WebhookCounts) | null = null
  /** The webhook totals as of the last scrape, to add only what happened since. */
  #webhooksSeen = new Map<string, number>()
  /** Milliseconds on a monotonic clock (tests pass their own). */
  readonly #now: () => number
  /** `#now()` when the gateway was last seen degraded (and not since counted); null while it is not. */
  #degradedSince: number | null = null

  // Hot-path counts (per CLI line, per frame and client) are plain additions,
  // moved into their counters when scraped.
  #cliLines = 0
  #framesIn = 0
  #framesOut = 0
  #bytesOut = 0
  readonly #append: Histogram<'result'>
  readonly #degradedSeconds: Counter
  readonly #permissionWait: Histogram<'outcome'>
  readonly #permissions: Counter<'outcome'>
  readonly #exits: Counter<'code' | 'signal'>
  readonly #oomKills: Counter
  readonly #spawns: Histogram
  readonly #authFailures: Counter<'reason'>
  readonly #rateLimited: Counter<'kind'>
  readonly #sandboxRefused: Counter<'kind'>
  readonly #busRefused: Counter<'reason'>
  readonly #storeRefused: Counter<'kind' | 'reason'>

  constructor (options: { now?: () => number } = {}) {
    this.#now = options.now ?? (() => performance.now())
    processMetrics() // collected from the first app on, not from the first scrape
    const registers = [this.registry]

    const sessions = new Gauge({
      name: 'cgw_sessions',
      help: 'Sessions loaded in this gateway process, by status',
      labelNames: ['status'],
      registers,
      collect: () => {
        const counts = new Map<string, number>(STATUSES.map((s) => [s, 0]))
        for (const s of this.#source?.loaded ?? []) counts.set(s.status, (counts.get(s.status) ?? 0) + 1)
        for (const [status, n] of counts) sessions.set({ status }, n)
      }
    })
    const running = new Gauge({
      name: 'cgw_clis_running',
      help: 'CLI processes running (what MAX_SESSIONS limits)',
      registers,
      collect: () => { running.set(this.#source?.runningCount ?? 0) }
    })
    const clients = new Gauge({
      name: 'cgw_clients',
      help: 'Clients attached to sessions (WebSockets and event streams), by role: the holder is the controller',
      labelNames: ['role'],
      registers,
      collect: () => {
        let controller = 0
        let observer = 0
        for (const s of this.#source?.loaded ?? []) {
          const roles = s.clientRoles
          controller += roles.controller
          observer += roles.observer
        }
        clients.set({ role: 'controller' }, controller)
        clients.set({ role: 'observer' }, observer)
      }
    })
    const unsaved = new Gauge({
      name: 'cgw_store_unsaved_events',
      help: 'Frames committed to clients but held in memory for an unreachable store, summed over sessions',
      registers,
      collect: () => {
        let n = 0
        for (const s of this.#source?.loaded ?? []) n += s.events.unsavedCount
        unsaved.set(n)
      }
    })
    const degraded = new Gauge({
      name: 'cgw_store_degraded',
      help: '1 while any session holds frames for an unreachable store, else 0',
      registers,
      collect: () => {
        this.#tickDegraded()
        degraded.set(this.#degradedSince === null ? 0 : 1)
      }
    })
    this.#degradedSeconds = new Counter({
      name: 'cgw_store_degraded_seconds_total',
      help: 'Seconds during which any session held frames for an unreachable store',
      registers,
      collect: () => { this.#tickDegraded() }
    })

    const lines = new Counter({
      name: 'cgw_cli_lines_total',
      help: 'Lines read from CLIs\' stdout',
      registers,
      collect: () => { lines.inc(this.#cliLines); this.#cliLines = 0 }
    })
    const framesIn = new Counter({
      name: 'cgw_client_frames_in_total',
      help: 'WebSocket frames received from clients (refused ones included)',
      registers,
      collect: () => { framesIn.inc(this.#framesIn); this.#framesIn = 0 }
    })
    const framesOut = new Counter({
      name: 'cgw_client_frames_out_total',
      help: 'Frames sessions handed to client connections (WebSockets and event streams)',
      registers,
      collect: () => { framesOut.inc(this.#framesOut); this.#framesOut = 0 }
    })
    const bytesOut = new Counter({
      name: 'cgw_client_bytes_out_total',
      help: 'UTF-8 bytes of the frames in cgw_client_frames_out_total (WebSocket and event-stream framing not included)',
      registers,
      collect: () => { bytesOut.inc(this.#bytesOut); this.#bytesOut = 0 }
    })
    this.#append = new Histogram({
      name: 'cgw_store_append_seconds',
      help: 'Time of one event-log append to the store (a batch of frames)',
      labelNames: ['result'],
      buckets: APPEND_BUCKETS,
      registers
    })
    this.#permissionWait = new Histogram({
      name: 'cgw_permission_wait_seconds',
      help: 'Time from a permission prompt (can_use_tool) to its end, by outcome',
      labelNames: ['outcome'],
      buckets: PERMISSION_BUCKETS,
      registers
    })
    this.#permissions = new Counter({ name: 'cgw_permission_prompts_total', help: 'Permission prompts ended, by outcome', labelNames: ['outcome'], registers })
    this.#exits = new Counter({ name: 'cgw_cli_exits_total', help: 'CLI processes that ended, by exit code and signal ("none" when absent)', labelNames: ['code', 'signal'], registers })
    this.#oomKills = new Counter({ name: 'cgw_cli_oom_kills_total', help: 'Processes of CLIs (the CLI or its tools) the kernel killed at CLI_MEMORY_MAX_MB or TENANT_MEMORY_MAX_MB, counted when the CLI ends', registers })
    this.#spawns = new Histogram({
      name: 'cgw_cli_spawn_seconds',
      help: 'Time the event loop spent starting one CLI process (a fork of the gateway: grows with its memory)',
      buckets: SPAWN_BUCKETS,
      registers
    })
    this.#authFailures = new Counter({ name: 'cgw_auth_failures_total', help: 'Requests refused 401, by reason', labelNames: ['reason'], registers })
    this.#rateLimited = new Counter({ name: 'cgw_rate_limited_total', help: 'Requests, upgrades and frames refused by a rate limit, by kind', labelNames: ['kind'], registers })
    this.#sandboxRefused = new Counter({
      name: 'cgw_sandbox_refusals_total',
      help: 'Requests of sandboxed CLIs and their tools their egress proxy refused: a destination not in SANDBOX_EGRESS (egress), an API path not in SANDBOX_API_PATHS (api_path), a connection past the tenant\'s SANDBOX_EGRESS_CONNECTIONS_PER_TENANT (connections)',
      labelNames: ['kind'],
      registers
    })

    this.#busRefused = new Counter({
      name: 'cgw_node_bus_refused_total',
      help: 'Node bus messages this node refused: unsigned (no signature), mac (not signed with STORE_SECRET, or altered), stale (time more than 2 minutes off), replay (a copy of one already delivered)',
      labelNames: ['reason'],
      registers
    })

    this.#storeRefused = new Counter({
      name: 'cgw_store_refused_total',
      help: 'Reads of the store refused as changed outside the gateway or not valid, by what (record, conversation, webhook) and why (unsigned: no MAC or seal; mac: one that does not match; id: a record under another id; schema: not a valid record; policy: options the policy forbids). A record is refused at every read of it',
      labelNames: ['kind', 'reason'],
      registers
    })

    const webhookQueue = new Gauge({
      name: 'cgw_webhook_queue',
      help: 'Webhook deliveries waiting (or backing off) and being sent',
      labelNames: ['state'],
      registers,
      collect: () => {
        const counts = this.#webhooks?.()
        webhookQueue.set({ state: 'waiting' }, counts?.waiting ?? 0)
        webhookQueue.set({ state: 'in_flight' }, counts?.inFlight ?? 0)
      }
    })
    const webhookDeliveries = new Counter({
      name: 'cgw_webhook_deliveries_total',
      help: 'Webhook deliveries that ended, by outcome (delivered; rejected: a 4xx never retried; exhausted: WEBHOOK_MAX_ATTEMPTS; dropped: queue full; abandoned: unsent at shutdown, left in the store outbox for another node with Redis)',
      labelNames: ['outcome'],
      registers,
      collect: () => {
        const counts = this.#webhooks?.()
        for (const outcome of WEBHOOK_OUTCOMES) {
          const total = counts?.[outcome] ?? 0
          webhookDeliveries.inc({ outcome }, Math.max(0, total - (this.#webhooksSeen.get(outcome) ?? 0)))
          this.#webhooksSeen.set(outcome, total)
        }
      }
    })
    const webhookRecovered = new Counter({
      name: 'cgw_webhook_recovered_total',
      help: 'Webhook deliveries this node took over from the store: left unsent by a node that stopped or died, or by its own previous run',
      registers,
      collect: () => {
        const total = this.#webhooks?.().recovered ?? 0
        webhookRecovered.inc(Math.max(0, total - (this.#webhooksSeen.get('recovered') ?? 0)))
        this.#webhooksSeen.set('recovered', total)
      }
    })

    // Every series of a fixed label set is there from the first scrape (rate() needs the zero).
    for (const outcome of OUTCOMES) this.#permissions.inc({ outcome }, 0)
    for (const kind of LIMIT_KINDS) this.#rateLimited.inc({ kind }, 0)
    for (const kind of REFUSAL_KINDS) this.#sandboxRefused.inc({ kind }, 0)
    for (const reason of BUS_REFUSALS) this.#busRefused.inc({ reason }, 0)
    for (const [kind, reasons] of Object.entries(STORE_REFUSALS)) for (const reason of reasons) this.#storeRefused.inc({ kind, reason }, 0)
    this.#append.zero({ result: 'ok' })
  }

  /** The gateway whose state the gauges read when scraped. */
  observe (source: MetricsSource): void {
    this.#source = source
  }

  /** The webhook queue whose counts are read when scraped. */
  observeWebhooks (counts: () => WebhookCounts): void {
    this.#webhooks = counts
  }

  /** The exposition text (process metrics, then the gateway's), and its content type. */
  async scrape (): Promise<{ contentType: string, body: string }> {
    const [proc, gateway] = await Promise.all([processMetrics().metrics(), this.registry.metrics()])
    return { contentType: this.registry.contentType, body: proc + gateway }
  }

  cliLine (): void { this.#cliLines++ }

  clientFrame (verdict: FrameVerdict): void {
    this.#framesIn++
    if (verdict !== 'ok') this.#rateLimited.inc({ kind: 'ws_frames' })
  }

  framesOut (n: number, bytes: number): void {
    this.#framesOut += n
    this.#bytesOut += bytes
  }

  appendTimed (seconds: number, ok: boolean): void {
    this.#append.observe({ result: ok ? 'ok' : 'error' }, seconds)
  }

  permissionAnswered (outcome: PermissionOutcome, seconds: number): void {
    this.#permissionWait.observe({ outcome }, seconds)
    this.#permissions.inc({ outcome })
  }

  cliExited (code: number | null, signal: string | null, oomKills = 0): void {
    this.#exits.inc({ code: code === null ? 'none' : String(code), signal: signal ?? 'none' })
    if (oomKills > 0) this.#oomKills.inc(oomKills)
  }

  cliSpawned (seconds: number): void {
    this.#spawns.observe(seconds)
  }

  storeDegradedChanged (): void { this.#tickDegraded() }

  authFailed (reason: AuthFailureReason): void { this.#authFailures.inc({ reason }) }

  rateLimited (kind: RateLimitKind): void { this.#rateLimited.inc({ kind }) }
  sandboxRefused (kind: SandboxRefusal): void { this.#sandboxRefused.inc({ kind }) }
  /** A node bus message was refused (src/store/signed-bus.ts). Not in MetricsSink: only app.ts reports it. */
  nodeBusRefused (reason: BusRefusal): void { this.#busRefused.inc({ reason }) }
  storeRefused (kind: StoreRefusalKind, reason: StoreRefusal): void { this.#storeRefused.inc({ kind, reason }) }

  /** Counts the degraded time since the last look, and notes whether the gateway is degraded now. */
  #tickDegraded (): void {
    const now = this.#now()
    if (this.#degradedSince !== null) this.#degradedSeconds.inc((now - this.#degradedSince) / 1000)
    this.#degradedSince = this.#source?.degraded === true ? now : null
  }
}
