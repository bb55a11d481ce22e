// The sandbox's settings and its bwrap command line: SANDBOX / ALLOW_UNSANDBOXED /
// SANDBOX_EGRESS in loadConfig (refusals name the variables), and what
// buildBwrapSpec mounts (only folders the gateway resolved; never the
// tenant-chosen cwd; secrets never in argv).
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { loadConfig } from '../../src/config.js'
import { configError } from '../support/config-error.js'
import { EGRESS_SOCKET_INSIDE, buildBwrapSpec, systemMounts } from '../../src/sandbox/bwrap-spec.js'
import { defaultDestinations, parseDestinations } from '../../src/sandbox/destinations.js'

const T1 = 'token-one-0123456789abcdef'
const T2 = 'token-two-0123456789abcdef'

function refused (env: Record<string, string>): string {
  return configError(() => loadConfig(env))
}

describe('SANDBOX settings', () => {
  it('defaults to bwrap, with unsandboxed runs not allowed and the egress taken from the CLI environment', () => {
    const c = loadConfig({ GATEWAY_TOKENS: `${T1}=a,${T2}=b` })
    assert.equal(c.sandbox, 'bwrap')
    assert.equal(c.allowUnsandboxed, false)
    assert.equal(c.sandboxEgress, null)
    assert.equal(c.sandboxCredentials, 'proxy')
  })

  it('refuses SANDBOX=none for several tenants, naming SANDBOX, ALLOW_UNSANDBOXED and GATEWAY_TOKENS', () => {
    const msg = refused({ SANDBOX: 'none', GATEWAY_TOKENS: `${T1}=a,${T2}=b` })
    assert.match(msg, /SANDBOX/)
    assert.match(msg, /ALLOW_UNSANDBOXED=true/)
    assert.match(msg, /GATEWAY_TOKENS names 2 tenants/)
  })

  it('refuses SANDBOX=none with JWTs (any tenant) and beyond loopback', () => {
    assert.match(refused({ SANDBOX: 'none', JWT_SECRET: 'x'.repeat(32) }), /JWT_SECRET/)
    const msg = refused({ SANDBOX: 'none', HOST: '0.0.0.0', GATEWAY_TOKENS: `${T1}=a` })
    assert.match(msg, /HOST 0\.0\.0\.0 is not loopback/)
    assert.match(msg, /ALLOW_UNSANDBOXED/)
  })

  it('accepts SANDBOX=none for one tenant on loopback, with ALLOW_UNSANDBOXED=true, or with a CLAUDE_LAUNCHER', () => {
    assert.equal(loadConfig({ SANDBOX: 'none' }).sandbox, 'none') // generated single token
    assert.equal(loadConfig({ SANDBOX: 'none', HOST: '127.0.0.2', GATEWAY_TOKENS: `${T1}=a,${T2}=a` }).sandbox, 'none')
    assert.equal(loadConfig({ SANDBOX: 'none', HOST: '0.0.0.0', GATEWAY_TOKENS: `${T1}=a,${T2}=b`, ALLOW_UNSANDBOXED: 'true' }).allowUnsandboxed, true)
    assert.equal(loadConfig({ SANDBOX: 'none', GATEWAY_TOKENS: `${T1}=a,${T2}=b`, CLAUDE_LAUNCHER: '/opt/launch.sh' }).claudeLauncher, '/opt/launch.sh')
  })

  it('validates SANDBOX_API_PATHS: absolute paths of literal or * segments, the Messages API and the model list by default', () => {
    assert.deepEqual(loadConfig({}).sandboxApiPaths, ['/v1/messages', '/v1/messages/count_tokens', '/v1/models', '/v1/models/*'])
    assert.deepEqual(loadConfig({ SANDBOX_API_PATHS: '/v1/messages, /v1/files/*' }).sandboxApiPaths, ['/v1/messages', '/v1/files/*'])
    for (const bad of ['v1/messages', '/v1/*s', '/v1/../files', '/v1/messages?x=1', '/v1/%2e%2e']) {
      assert.match(refused({ SANDBOX_API_PATHS: `/v1/messages,${bad}` }), new RegExp(`SANDBOX_API_PATHS: ${bad.replace(/[.*?]/g, '\\$&')}: expected a path such as /v1/messages`), bad)
    }
  })

  it('takes SANDBOX_EGRESS_CONNECTIONS_PER_TENANT: 256 by default, a positive whole number', () => {
    assert.equal(loadConfig({}).sandboxEgressConnectionsPerTenant, 256)
    assert.equal(loadConfig({ SANDBOX_EGRESS_CONNECTIONS_PER_TENANT: '32' }).sandboxEgressConnectionsPerTenant, 32)
    for (const bad of ['0', '-1', '1.5', 'many']) assert.match(refused({ SANDBOX_EGRESS_CONNECTIONS_PER_TENANT: bad }), /SANDBOX_EGRESS_CONNECTIONS_PER_TENANT/, bad)
  })

  it('validates SANDBOX, SANDBOX_EGRESS and SANDBOX_CREDENTIALS', () => {
    assert.match(refused({ SANDBOX: 'docker' }), /SANDBOX/)
    assert.match(refused({ SANDBOX_CREDENTIALS: 'vault' }), /SANDBOX_CREDENTIALS/)
    assert.equal(loadConfig({ SANDBOX_CREDENTIALS: 'env' }).sandboxCredentials, 'env')
    assert.match(refused({ SANDBOX_EGRESS: 'api.anthropic.com,http://x' }), /SANDBOX_EGRESS: "http:\/\/x" is not host\[:port\]/)
    assert.deepEqual(loadConfig({ SANDBOX_EGRESS: 'API.anthropic.com, 10.0.0.5:8080,[::1]:9000' }).sandboxEgress, [
      { host: 'api.anthropic.com', port: 443 }, { host: '10.0.0.5', port: 8080 }, { host: '::1', port: 9000 }
    ])
  })

  it('refuses a WORKSPACE_ROOT that holds DATA_DIR (a tenant named after a folder on the way would get the gateway data)', () => {
    assert.match(refused({ DATA_DIR: '/srv/cgw', WORKSPACE_ROOT: '/srv/cgw' }), /WORKSPACE_ROOT: \/srv\/cgw holds DATA_DIR/)
    assert.match(refused({ DATA_DIR: '/srv/data', WORKSPACE_ROOT: '/srv' }), /WORKSPACE_ROOT: \/srv holds DATA_DIR \(\/srv\/data\)/)
    assert.equal(loadConfig({ DATA_DIR: '/srv/data' }).workspaceRoot, '/srv/data/workspaces')
    assert.equal(loadConfig({ DATA_DIR: '/srv/data', WORKSPACE_ROOT: '/srv/work' }).workspaceRoot, '/srv/work')
    assert.equal(loadConfig({ DATA_DIR: '/srv/data', WORKSPACE_ROOT: '/srv/data-workspaces' }).workspaceRoot, '/srv/data-workspaces')
  })

  it('defaults the egress to the host:port of ANTHROPIC_BASE_URL, else the Anthropic API', () => {
    assert.deepEqual(defaultDestinations({}), [{ host: 'api.anthropic.com', port: 443 }])
    assert.deepEqual(defaultDestinations({ ANTHROPIC_BASE_URL: 'http://127.0.0.1:4010/v1' }), [{ host: '127.0.0.1', port: 4010 }])
    assert.deepEqual(defaultDestinations({ ANTHROPIC_BASE_URL: 'https://llm.example.com' }), [{ host: 'llm.example.com', port: 443 }])
    assert.throws(() => parseDestinations('a b'), /is not host\[:port\]/)
  })
})

describe('buildBwrapSpec', () => {
  const plan = {
    bwrap: '/usr/bin/bwrap',
    socat: '/usr/bin/socat',
    cliDir: '/opt/claude/bin',
    tenantRoot: '/srv/ws/tenant-a',
    configDir: '/srv/data/claude-config/tenant-a',
    workdir: '/srv/ws/tenant-a/proj/link-to-elsewhere',
    egressSocket: '/tmp/cgw-egress-x/ab.sock',
    proxyPort: 3128,
    command: '/opt/claude/bin/claude',
    args: ['--output-format', 'stream-json'],
    env: { PATH: '/usr/bin:/bin', ANTHROPIC_API_KEY: 'sk-secret-key', HOME: '/root', XDG_RUNTIME_DIR: '/run/user/0', NO_PROXY: 'localhost' }
  }
  const spec = buildBwrapSpec(plan, systemMounts())
  const pairs = (flag: string): string[][] => spec.args.flatMap((a, i) => a === flag ? [[spec.args[i + 1] as string, spec.args[i + 2] as string]] : [])
  const sep = spec.args.indexOf('--')

  it('unshares every namespace, dies with the gateway and mounts a fresh /proc, /dev and /tmp', () => {
    assert.equal(spec.command, '/usr/bin/bwrap')
    for (const a of ['--unshare-all', '--die-with-parent']) assert.ok(spec.args.slice(0, sep).includes(a), a)
    assert.ok(!spec.args.slice(0, sep).includes('--share-net'))
    assert.deepEqual([spec.args.indexOf('--proc') >= 0, spec.args[spec.args.indexOf('--proc') + 1]], [true, '/proc'])
    assert.equal(spec.args[spec.args.indexOf('--tmpfs') + 1], '/tmp')
  })

  it('binds read-write only the tenant root, its config dir and the egress socket; the CLI folder read-only', () => {
    assert.deepEqual(pairs('--bind'), [
      [plan.tenantRoot, plan.tenantRoot], [plan.configDir, plan.configDir], [plan.egressSocket, EGRESS_SOCKET_INSIDE]
    ])
    assert.deepEqual(pairs('--ro-bind').find(([src]) => src === plan.cliDir), [plan.cliDir, plan.cliDir])
    // The tenant-chosen cwd is never a mount: only an argument of the script that enters it inside.
    const mountArgs = spec.args.slice(0, sep)
    assert.ok(!mountArgs.includes(plan.workdir))
    assert.ok(spec.args.slice(sep).includes(plan.workdir))
    assert.ok(!pairs('--ro-bind').some(([src]) => src === '/etc' || src === '/' || src === '/etc/ssl' || src === '/etc/ssl/private'))
    assert.ok(!pairs('--ro-bind').some(([src]) => src === '/etc/shadow'))
  })

  it('hands the environment to bwrap as its own, never in argv, with HOME, TMPDIR and the proxy set', () => {
    assert.ok(!spec.args.some((a) => a.includes('sk-secret-key')), 'the API key is not on the command line')
    assert.equal(spec.env.ANTHROPIC_API_KEY, 'sk-secret-key')
    assert.equal(spec.env.HOME, plan.configDir)
    assert.equal(spec.env.CLAUDE_CONFIG_DIR, plan.configDir)
    assert.equal(spec.env.TMPDIR, '/tmp')
    assert.equal(spec.env.XDG_RUNTIME_DIR, '/tmp')
    assert.equal(spec.env.HTTPS_PROXY, 'http://127.0.0.1:3128')
    assert.equal(spec.env.http_proxy, 'http://127.0.0.1:3128')
    assert.equal(spec.env.NO_PROXY, '')
    assert.deepEqual(spec.args.slice(-3), [plan.command, ...plan.args])
  })

  it('recreates symlinked system folders as symlinks and binds only allowlisted /etc entries that exist', () => {
    const fake: Record<string, 'dir' | 'file' | 'symlink'> = { '/usr': 'dir', '/bin': 'symlink', '/lib64': 'dir', '/etc/passwd': 'file', '/etc/ssl/certs': 'dir', '/etc/shadow': 'file' }
    const args = systemMounts((p) => fake[p] ?? null, () => 'usr/bin')
    assert.deepEqual(args.slice(0, 9), ['--ro-bind', '/usr', '/usr', '--symlink', 'usr/bin', '/bin', '--ro-bind', '/lib64', '/lib64'])
    assert.ok(args.includes('/etc/passwd') && args.includes('/etc/ssl/certs'))
    assert.ok(!args.includes('/etc/shadow'))
    assert.deepEqual(args.slice(-3), ['--symlink', '../proc/self/mounts', '/etc/mtab'])
  })
})
