/**
 * Helpers for the sandbox tests: whether bubblewrap and per-CLI cgroups
 * can run here (and if not, exactly why, for the skip message), and a `run` that sends the fake
 * CLI's `run <shell command>` scenario and returns what the command printed.
 */
import { spawnSync } from 'node:child_process'
import { existsSync, readFileSync, readdirSync, rmdirSync } from 'node:fs'
import { join } from 'node:path'
import { type CgroupParents, findParents, parentFolders } from '../../src/limits/cgroup-parents.js'
import type { TestClient } from './gateway.js'

/** Why SANDBOX=bwrap cannot run on this machine, or null when it can. */
export function sandboxUnavailable (): string | null {
  for (const tool of ['bwrap', 'socat']) {
    const found = spawnSync(tool, [tool === 'bwrap' ? '--version' : '-V'], { stdio: 'ignore', timeout: 5000 })
    if (found.error !== undefined) return `${tool} is not installed (${found.error.message}); install bubblewrap and socat`
  }
  const probe = spawnSync('bwrap', ['--unshare-all', '--die-with-parent', '--ro-bind', '/', '/', '--proc', '/proc', '--dev', '/dev', 'true'], { encoding: 'utf8', timeout: 5000 })
  if (probe.status !== 0) return `\`bwrap --unshare-all --proc /proc ... true\` fails here (${probe.stderr.trim() || `status ${String(probe.status)}`}): no unprivileged user namespaces, or /proc cannot be mounted (container without the settings in docs/SECURITY.md)`
  return null
}

/** Why per-CLI cgroups (CLI_MEMORY_MAX_MB, CLI_PIDS_MAX, CLI_CPUS) cannot be made here (no controllers, not root), or null. */
export function cgroupsUnavailable (): string | null {
  try {
    const parents = findParents(['memory', 'pids', 'cpu'], '/cgw-probe')
    for (const dir of parentFolders(parents)) {
      if (!existsSync(join(dir, '..'))) return `${join(dir, '..')} does not exist`
    }
    return process.getuid?.() === 0 ? null : 'cgroups are writable by root only here'
  } catch (err) {
    return (err as Error).message
  }
}

/** Removes a test's cgroup parent folders (the gateway has removed its CLIs' cgroups by the time it has closed). */
export function removeCgroupParent (parents: CgroupParents): void {
  for (const dir of parentFolders(parents)) rmdirSync(dir)
}

/** Sends a prompt and returns the text of that turn's assistant answer (the fake answers with one text block). */
export async function say (holder: TestClient, prompt: string, timeoutMs = 15_000): Promise<string> {
  const from = holder.frames.length
  holder.sendUser(prompt)
  await holder.waitFor((f) => f.type === 'result', timeoutMs, from)
  return holder.frames.slice(from).filter((f) => f.type === 'assistant').flatMap((f) => f.message.content)
    .filter((b: any) => b.type === 'text').map((b: any) => b.text as string).join('\n')
}

/** Runs a shell command in the session's CLI (fake `run` scenario); resolves with its output and `[exit N]`. */
export function run (holder: TestClient, command: string, timeoutMs?: number): Promise<string> {
  return say(holder, `run ${command}`, timeoutMs)
}

/** Host pids of live processes whose argv is exactly `argv` (e.g. a uniquely-timed `sleep`). */
export function pidsWithArgv (argv: string[]): number[] {
  const want = argv.join('\0')
  const pids: number[] = []
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const cmd = readFileSync(`/proc/${entry}/cmdline`, 'utf8').replace(/\0$/, '')
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8')
      if (cmd === want && stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z') pids.push(Number(entry))
    } catch {
      // gone meanwhile
    }
  }
  return pids
}
