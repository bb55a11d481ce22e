/**
 * Settings that bound what one CLI, tenant, client or address may use:
 * cgroup limits, counts of sessions and connections, request rates, and
 * sizes of lines, frames and pages. One group of settings.ts's schema, kept
 * apart to keep each file small.
 */
import { z } from 'zod'
import { defaulted, optional } from './setting-docs.js'
import { int } from './setting-rules.js'

/** Environment variable → rule, default and meaning. */
export const limitSettings = {
  CLI_MEMORY_MAX_MB: optional(int(32), '(no limit)',
    'memory (RAM, no swap) of each CLI with every process it starts, in MiB; past it the kernel kills the largest of them (a tool, usually) and the exit says `oom_kills`. Needs a writable cgroup (`CLI_CGROUP`), checked at start'),
  CLI_PIDS_MAX: optional(int(8), '(no limit)', 'processes and threads each CLI may have at once, its tools\' included: a fork bomb fails inside its session'),
  CLI_CPUS: optional(z.coerce.number().min(0.01).max(1024), '(no limit)', 'CPU time each CLI with its tools may use, in cores (`0.5` = half of one core per 100 ms period)'),
  TENANT_MEMORY_MAX_MB: optional(int(32), '(no limit)',
    'memory (RAM, no swap) of all of one tenant\'s CLIs on this node together, in MiB; past it the kernel kills the largest process among them. Not below `CLI_MEMORY_MAX_MB`'),
  TENANT_PIDS_MAX: optional(int(8), '(no limit)', 'processes and threads all of one tenant\'s CLIs on this node may have together. Not below `CLI_PIDS_MAX`'),
  TENANT_CPUS: optional(z.coerce.number().min(0.01).max(1024), '(no limit)', 'CPU time all of one tenant\'s CLIs on this node may use together, in cores. Not below `CLI_CPUS`'),
  CLI_CGROUP: optional(z.string().regex(/^\/[^\0]*$/, 'must be a cgroup path starting with /'), 'the gateway\'s own cgroup',
    'cgroup (path as in `/proc/self/cgroup`) under which each CLI gets its own (inside one per tenant with a `TENANT_` limit) when a `CLI_` or `TENANT_` limit is set; cgroup v2 if it offers the controllers, else v1 (docs/SECURITY.md, Resource limits)'),
  MAX_SESSIONS: defaulted(int(1), 50, 'CLIs running at once'),
  MAX_LINE_BYTES: defaulted(int(1024), 16 * 1024 * 1024, 'longer CLI stdout lines are dropped and reported'),
  WS_MAX_PAYLOAD_BYTES: defaulted(int(1024), 1024 * 1024, 'largest client frame (close 1009 past it)'),
  WS_MAX_BUFFERED_BYTES: defaulted(int(1024), 8 * 1024 * 1024, 'a client\'s unsent backlog past this closes it with 4008 (it can reconnect and resume)'),
  MAX_SESSIONS_PER_TENANT: defaulted(int(1), 20, 'CLIs one tenant may run at once, on all nodes together (429)'),
  MAX_CLIENTS_PER_SESSION: defaulted(int(1), 20, 'WebSocket and SSE clients per session (429)'),
  WS_MAX_FRAMES_PER_SEC: defaulted(int(1), 50, 'client frames per second per connection (bursts of 2×); a sustained flood is closed with 4029'),
  RATE_LIMIT_PER_MINUTE: defaulted(int(1), 600, 'REST requests per tenant (or per address before authentication) per minute (429); WebSocket upgrades are not counted here'),
  WS_UPGRADES_PER_MINUTE: defaulted(int(1), 1200,
    'WebSocket upgrades per tenant per minute (429 before the upgrade, with `retry-after`); apart from the REST limit, so a reconnect storm never blocks the tenant\'s REST calls'),
  WS_UPGRADES_PER_MINUTE_PER_ADDRESS: defaulted(int(1), 600, 'WebSocket upgrades per client address per minute, across tenants (the address as `TRUST_PROXY` decides it)'),
  AUTH_FAILURES_PER_MINUTE: defaulted(int(1), 30, 'failed authentications per client address per minute before 429'),
  MAX_CONNECTIONS_PER_TENANT: defaulted(int(1), 100, 'WebSockets plus event streams of one tenant across its sessions (429 `tenant_connection_limit`)'),
  HISTORY_PAGE_MAX_BYTES: defaulted(int(1024), 4 * 1024 * 1024, 'a history page stops before passing this many bytes, with `has_more` (at least one event)')
}
