/**
 * The bubblewrap command line for one sandboxed CLI (SANDBOX=bwrap). Built
 * here, spawned by src/cli/cli-process.ts like any CLI.
 *
 * Every bind source is a path the gateway resolved itself (system folders,
 * the CLI's folder, the tenant's root and config dir, the egress socket),
 * never one a tenant chose: the session's `cwd` is created and entered by
 * the script below, INSIDE the sandbox, so a symlink a tenant planted can
 * only lead to what that tenant sees anyway. Paths inside are the same as
 * outside, so the CLI's transcript key (its cwd) and `--resume` keep working
 * whatever SANDBOX is.
 */
import { lstatSync, readlinkSync } from 'node:fs'

/** Where the session's egress proxy socket appears inside the sandbox. */
export const EGRESS_SOCKET_INSIDE = '/run/cgw/egress.sock'

/** Top-level system folders shown read-only (symlinks, as on merged-/usr systems, are recreated as symlinks). */
const SYSTEM_DIRS = ['/usr', '/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32']

/**
 * The parts of /etc the CLI and common tools need: users and groups (whoami,
 * git), name service and TLS settings, CA certificates, time zone, the
 * dynamic linker's cache, alternatives, shells. Not /etc as a whole: no
 * host keys (/etc/ssl/private), shadow files, cron, service configs.
 */
export const ETC_ALLOWLIST = [
  'passwd', 'group', 'hosts', 'host.conf', 'resolv.conf', 'nsswitch.conf', 'gai.conf', 'services', 'protocols',
  'ssl/certs', 'ssl/openssl.cnf', 'ca-certificates', 'ca-certificates.conf', 'pki/tls/certs', 'pki/ca-trust',
  'localtime', 'timezone', 'alternatives', 'ld.so.cache', 'ld.so.conf', 'ld.so.conf.d',
  'os-release', 'lsb-release', 'debian_version', 'mime.types', 'gitconfig', 'inputrc', 'bash.bashrc', 'profile',
  'shells', 'terminfo', 'locale.alias', 'locale.conf'
]

export interface BwrapPlan {
  /** Absolute path of the bwrap binary. */
  bwrap: string
  /** Absolute path of socat (must be under a system folder, so it is visible inside). */
  socat: string
  /** Real folder of the CLI binary (read-only inside). */
  cliDir: string
  /** Real path of `<WORKSPACE_ROOT>/<tenant>` (read-write). */
  tenantRoot: string
  /** `$DATA_DIR/claude-config/<tenant>` (read-write; HOME and CLAUDE_CONFIG_DIR). */
  configDir: string
  /** The session's folder: `tenantRoot` joined with the lexically checked `cwd`. Created inside. */
  workdir: string
  /** Host path of the session's egress proxy socket. */
  egressSocket: string
  /**
   * Files and folders shown read-only over their place in the writable
   * folders above: `source` gateway-made (never a tenant's path), `target`
   * the path inside (user-settings.ts, user-extensions.ts).
   */
  readOnly?: ReadonlyArray<{ source: string, target: string }>
  /** Port socat listens on inside the sandbox (its own network namespace). */
  proxyPort: number
  /** The CLI and its arguments. */
  command: string
  args: string[]
  /** What the gateway passes to the CLI (already an allowlist). */
  env: Record<string, string>
}

export interface BwrapSpec {
  command: string
  args: string[]
  env: Record<string, string>
  cwd: string
}

/**
 * Runs inside: makes and enters the session's folder, starts the forwarder
 * from 127.0.0.1:<port> to the proxy socket, waits (bounded) until it
 * listens, then becomes the CLI. `$1` cwd, `$2` port, `$3` port in the hex
 * of /proc/net/tcp, `$4` socket, `$5` socat, then the CLI argv.
 */
export const INNER_SCRIPT = [
  'cwd=$1 port=$2 hex=$3 sock=$4 socat=$5',
  'shift 5',
  'mkdir -p -- "$cwd" && cd -- "$cwd" || { echo "sandbox: cannot enter $cwd" >&2; exit 126; }',
  '"$socat" TCP-LISTEN:"$port",bind=127.0.0.1,fork,reuseaddr UNIX-CONNECT:"$sock" </dev/null >/dev/null &',
  'n=0',
  'until grep -q ": 0100007F:$hex 00000000:0000 0A" /proc/net/tcp; do',
  '  n=$((n+1)); [ "$n" -le 500 ] || { echo "sandbox: the egress forwarder did not start" >&2; exit 125; }',
  '  sleep 0.01',
  'done',
  'exec "$@"'
].join('\n')

/** bwrap arguments for the system: read-only /usr and friends, and the allowlisted /etc entries that exist here. */
export function systemMounts (exists: (path: string) => 'dir' | 'file' | 'symlink' | null = hostKind, readLink: (path: string) => string = readlinkSync): string[] {
  const args: string[] = []
  for (const dir of SYSTEM_DIRS) {
    const kind = exists(dir)
    if (kind === 'symlink') args.push('--symlink', readLink(dir), dir)
    else if (kind !== null) args.push('--ro-bind', dir, dir)
  }
  for (const entry of ETC_ALLOWLIST) {
    // bwrap follows a symlinked source (the entry shows the file it points at); -try: a dangling one is skipped.
    if (exists(`/etc/${entry}`) !== null) args.push('--ro-bind-try', `/etc/${entry}`, `/etc/${entry}`)
  }
  // Never the host's mount table (/etc/mtab → /proc/mounts of the gateway): the sandbox's own.
  args.push('--symlink', '../proc/self/mounts', '/etc/mtab')
  return args
}

/**
 * The namespaces and fresh kernel file systems every sandbox gets (also what
 * the start-up probe runs). `--cap-drop ALL`: run by root (a gateway in a
 * container, often), bwrap otherwise keeps every capability inside the
 * sandbox's user namespace, and CAP_SYS_ADMIN over its own mounts lets a tool
 * remount the read-only host system (`/usr`, `/etc` entries) read-write or
 * unmount a read-only cover; unprivileged, it has none to drop.
 */
export const ISOLATION = ['--unshare-all', '--die-with-parent', '--cap-drop', 'ALL', '--proc', '/proc', '--dev', '/dev', '--tmpfs', '/tmp']

export function buildBwrapSpec (plan: BwrapPlan, system: string[]): BwrapSpec {
  const port = plan.proxyPort
  const proxy = `http://127.0.0.1:${port}`
  const env: Record<string, string> = {
    ...plan.env,
    HOME: plan.configDir,
    CLAUDE_CONFIG_DIR: plan.configDir,
    TMPDIR: '/tmp',
    HTTPS_PROXY: proxy,
    HTTP_PROXY: proxy,
    https_proxy: proxy,
    http_proxy: proxy,
    // Empty: the API (even a loopback stand-in) must go through the proxy, the sandbox has no other route.
    NO_PROXY: '',
    no_proxy: ''
  }
  // The gateway's runtime dir is not inside; the CLI keeps its sockets in /tmp instead.
  if (env.XDG_RUNTIME_DIR !== undefined) env.XDG_RUNTIME_DIR = '/tmp'
  const args = [
    ...ISOLATION,
    ...system,
    '--ro-bind', plan.cliDir, plan.cliDir,
    '--bind', plan.tenantRoot, plan.tenantRoot,
    '--bind', plan.configDir, plan.configDir,
    ...(plan.readOnly ?? []).flatMap((f) => ['--ro-bind', f.source, f.target]),
    '--bind', plan.egressSocket, EGRESS_SOCKET_INSIDE,
    '--chdir', plan.tenantRoot,
    '--',
    '/bin/sh', '-c', INNER_SCRIPT, 'sandbox',
    plan.workdir, String(port), port.toString(16).toUpperCase().padStart(4, '0'), EGRESS_SOCKET_INSIDE, plan.socat,
    plan.command, ...plan.args
  ]
  // The environment goes to bwrap as its own (it passes it on unchanged), never in argv,
  // where any local user could read the API key in /proc/<pid>/cmdline.
  return { command: plan.bwrap, args, env, cwd: plan.tenantRoot }
}

function hostKind (path: string): 'dir' | 'file' | 'symlink' | null {
  try {
    const st = lstatSync(path)
    return st.isSymbolicLink() ? 'symlink' : st.isDirectory() ? 'dir' : 'file'
  } catch {
    return null
  }
}
