/**
 * Start-up check for SANDBOX=bwrap: bwrap and socat are installed and a
 * sandbox like the sessions' ones (every namespace, fresh /proc, the
 * read-only system) actually starts here. Containers often forbid user
 * namespaces or mounting /proc; better to refuse to start with a clear
 * message than to fail every session later.
 */
import { accessSync, constants } from 'node:fs'
import { delimiter, isAbsolute, join } from 'node:path'
import { ISOLATION } from './bwrap-spec.js'

export interface SandboxTools {
  bwrap: string | null
  socat: string | null
}

export type ProbeRunner = (command: string, args: string[], timeoutMs: number) => Promise<{ code: number | null, signal: string | null, error: string, output: string }>

/** Absolute paths of bwrap and socat on PATH (null when missing). */
export function findTools (path = process.env.PATH ?? '/usr/bin:/bin'): SandboxTools {
  return { bwrap: which('bwrap', path), socat: which('socat', path) }
}

export const HOW_TO_FIX = 'Install bubblewrap and socat (Debian/Ubuntu: apt-get install bubblewrap socat) and allow unprivileged user namespaces ' +
  '(containers: see docs/SECURITY.md for the seccomp/AppArmor/procMount settings), or set SANDBOX=none for a single-tenant gateway on loopback.'

/** Null when the sandbox works; otherwise why not, with what to do. */
export async function probeSandbox (tools: SandboxTools, system: string[], run: ProbeRunner): Promise<string | null> {
  const fail = (why: string): string => `SANDBOX=bwrap (the default) cannot run here: ${why}. ${HOW_TO_FIX}`
  if (tools.bwrap === null) return fail('bwrap is not on PATH')
  if (tools.socat === null) return fail('socat is not on PATH')
  const check = 'for t in grep sleep mkdir; do command -v "$t" >/dev/null || { echo "no $t inside the sandbox" >&2; exit 3; }; done; exec "$0" -V >/dev/null'
  const r = await run(tools.bwrap, [...ISOLATION, ...system, '--', '/bin/sh', '-c', check, tools.socat], 10_000)
  if (r.error !== '' || r.code !== 0) {
    const detail = [r.error, r.output].filter((t) => t !== '').join('; ')
    return fail(`\`bwrap --unshare-all --proc /proc ...\` failed (${r.code === null ? `signal ${r.signal ?? '?'}` : `exit ${r.code}`}${detail === '' ? '' : `: ${detail}`})`)
  }
  return null
}

function which (name: string, path: string): string | null {
  for (const dir of path.split(delimiter)) {
    if (dir === '' || !isAbsolute(dir)) continue
    const candidate = join(dir, name)
    try {
      accessSync(candidate, constants.X_OK)
      return candidate
    } catch {
      // not here
    }
  }
  return null
}
