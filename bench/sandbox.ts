/**
 * `--only sandbox`: what SANDBOX=bwrap costs, and per-CLI cgroup limits on
 * top of it. For each mode (none, bwrap, and bwrap with CLI_PIDS_MAX,
 * CLI_MEMORY_MAX_MB and CLI_CPUS where cgroups can be made) a fresh gateway
 * with the light CLI (bench/light-cli.sh, a shell script, so the CLI's own
 * start-up is tiny and the sandbox's share shows), then several runs of:
 * POST /v1/sessions → the CLI's `initialize` answer relayed (start time),
 * then a few turns (user frame → `result`, per-turn latency). Reports
 * medians with their spread (min–max over runs).
 */
import { rmdirSync } from 'node:fs'
import WebSocket from 'ws'
import { findParents, parentFolders } from '../src/limits/cgroup-parents.js'
import { type Gateway, LIGHT_CLI, TOKEN, startGateway } from './lib.js'

export type SandboxMode = 'none' | 'bwrap' | 'limits'

export interface SandboxRun {
  mode: SandboxMode
  start_ms: number[]
  turn_ms: number[]
}

/** Limits loose enough never to bind the light CLI: what is measured is the cgroup's own cost. */
const LIMITS = { CLI_PIDS_MAX: '512', CLI_MEMORY_MAX_MB: '1024', CLI_CPUS: '2' }

/** Why the `limits` mode cannot run here (cgroups need root on this kind of host), or null. */
export function limitsUnavailable (): string | null {
  if (process.getuid?.() !== 0) return 'not root: no cgroup to manage'
  try {
    findParents(['memory', 'pids', 'cpu'], '/cgw-bench')
    return null
  } catch (err) {
    return (err as Error).message
  }
}

export async function measureSandbox (runs: number, turnsPerRun: number, env: Record<string, string>, modes: SandboxMode[]): Promise<SandboxRun[]> {
  const out: SandboxRun[] = []
  for (const mode of modes) {
    const cgroup = `/cgw-bench-${process.pid}`
    // INITIALIZE_HOLD_MS=0: no SDK client sends its own initialize here, and the hold (2 s by
    // default) would be measured as start-up on both sides instead of the sandbox's cost.
    const gw = await startGateway({
      claudeBin: LIGHT_CLI,
      env: { ...env, SANDBOX: mode === 'none' ? 'none' : 'bwrap', TENANT_CONFIG_DIRS: 'true', INITIALIZE_HOLD_MS: '0', ...(mode === 'limits' ? { ...LIMITS, CLI_CGROUP: cgroup } : {}) }
    })
    try {
      await oneRun(gw, turnsPerRun) // warm-up, not counted (lazy code, first bwrap exec)
      const r: SandboxRun = { mode, start_ms: [], turn_ms: [] }
      for (let i = 0; i < runs; i++) {
        const { startMs, turnMs } = await oneRun(gw, turnsPerRun)
        r.start_ms.push(startMs)
        r.turn_ms.push(...turnMs)
      }
      out.push(r)
    } finally {
      await gw.close()
      if (mode === 'limits') for (const dir of parentFolders(findParents(['memory', 'pids', 'cpu'], cgroup))) rmdirSync(dir)
    }
  }
  return out
}

async function oneRun (gw: Gateway, turns: number): Promise<{ startMs: number, turnMs: number[] }> {
  const t0 = performance.now()
  const id = await gw.createSession()
  const ws = new WebSocket(`${gw.ws}/v1/sessions/${id}/ws?after=0`, { headers: { authorization: `Bearer ${TOKEN}` } })
  const frames: any[] = []
  let wake: (() => void) | null = null
  ws.on('message', (data) => { frames.push(JSON.parse(data.toString())); wake?.() })
  const waitFor = async (pred: (f: any) => boolean, from: number): Promise<void> => {
    const deadline = Date.now() + 20_000
    while (!frames.slice(from).some(pred)) {
      if (Date.now() > deadline) throw new Error(`sandbox bench: timed out; frames ${JSON.stringify(frames.slice(-5))}`)
      await new Promise<void>((resolve) => { wake = resolve; setTimeout(resolve, 50) })
    }
  }
  await new Promise((resolve, reject) => { ws.once('open', resolve); ws.once('error', reject) })
  await waitFor((f) => f.type === 'control_response', 0)
  const startMs = performance.now() - t0
  const turnMs: number[] = []
  for (let i = 0; i < turns; i++) {
    const from = frames.length
    const t = performance.now()
    ws.send(JSON.stringify({ type: 'user', message: { role: 'user', content: `turn ${i}` } }))
    await waitFor((f) => f.type === 'result', from)
    turnMs.push(performance.now() - t)
  }
  ws.close()
  await fetch(`${gw.http}/v1/sessions/${id}`, { method: 'DELETE', headers: { authorization: `Bearer ${TOKEN}` } })
  return { startMs, turnMs }
}

export function median (xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b)
  const m = Math.floor(s.length / 2)
  return s.length % 2 === 1 ? s[m] as number : ((s[m - 1] as number) + (s[m] as number)) / 2
}
