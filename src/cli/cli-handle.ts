/**
 * What the session core needs from a running CLI, kept apart from the
 * child_process implementation (cli-process.ts) so the core can be driven
 * by any implementation and never imports child_process itself.
 */

export interface CliExit {
  code: number | null
  signal: string | null
  /** Last stderr lines, oldest first. */
  stderrTail: string[]
  /** Set when the process could not be started at all (e.g. ENOENT). */
  spawnError?: string
  /** With CLI_MEMORY_MAX_MB or TENANT_MEMORY_MAX_MB: processes of this CLI (it or its tools) the kernel killed at a limit. */
  oomKills?: number
}

export interface CliSpawnSpec {
  command: string
  args: string[]
  cwd: string
  env: Record<string, string>
  /** Used to tag log lines and pid files. */
  sessionId: string
  /** Whose session it is (tenant limits put the CLI into the tenant's cgroup). */
  tenant?: string
  /**
   * SANDBOX=bwrap: the folders the gateway resolved itself, which the sandbox
   * shows read-write, and the session's folder (created and entered inside).
   */
  sandbox?: { tenantRoot: string, configDir: string, workdir: string }
  /**
   * The Anthropic API credential a CLI of this session would be started with
   * now. A sandbox egress proxy that holds the credential
   * (SANDBOX_CREDENTIALS=proxy) asks it at each API request, so a credential
   * reload reaches CLIs already running; `env` keeps the one read at spawn.
   */
  apiCredential?: () => ApiCredential
}

/** ANTHROPIC_API_KEY and ANTHROPIC_AUTH_TOKEN, each absent when not set. */
export interface ApiCredential {
  apiKey?: string | undefined
  authToken?: string | undefined
}

export interface CliCallbacks {
  /** One complete stdout line (without its newline). */
  onLine: (line: string) => void
  /** A stdout line over the size limit was dropped. */
  onOversize: (bytes: number) => void
  /** Called once, after the last stdout line was delivered. */
  onExit: (exit: CliExit) => void
  /**
   * For a handle that starts `pending`: the process runs now (its pid is
   * known), or, when `onExit` follows at once, could not run (ENOENT, …).
   * Comes before any line.
   */
  onStart?: () => void
  /**
   * For a handle that starts `pending`: starting threw (E2BIG: arguments or
   * environment too large), as spawn() itself throws when called here. No
   * process ran; neither `onStart` nor `onExit` follows.
   */
  onStartFailed?: (err: Error) => void
}

export interface CliHandle {
  readonly pid: number | undefined
  /**
   * True while the process is being started elsewhere (the spawn helper):
   * `pid` is unknown until `onStart` (or `onStartFailed`) comes. Lines
   * written meanwhile are queued. False (or absent) when the start was synchronous.
   */
  readonly pending?: boolean
  /** Writes one NDJSON line (the newline is added). False when stdin is gone. */
  write: (line: string) => boolean
  /** Ends the process: stdin closed, then SIGTERM, then SIGKILL to its group. Resolves on exit. */
  stop: () => Promise<CliExit>
  /**
   * Stops reading its stdout until `resumeOutput` (the store is behind):
   * once the pipe is full the CLI's own writes wait, instead of its lines
   * piling up in the gateway.
   */
  pauseOutput?: () => void
  resumeOutput?: () => void
}

export type CliLauncher = (spec: CliSpawnSpec, callbacks: CliCallbacks) => CliHandle
