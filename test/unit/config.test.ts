// loadConfig (src/config.ts): defaults, overrides, and a refused start naming the bad variable.
import assert from 'node:assert/strict'
import { join, resolve } from 'node:path'
import { type KeyObject, generateKeyPairSync } from 'node:crypto'
import { describe, it } from 'node:test'
import { JwtAuthenticator } from '../../src/auth/jwt.js'
import { loadConfig } from '../../src/config.js'
import { settingDocs } from '../../src/config/setting-docs.js'
import { envSchema } from '../../src/config/settings.js'
import { configError } from '../support/config-error.js'

const GOOD_TOKEN = 'a-long-enough-token-0001'

/** The documented defaults (README's table is generated from them), numbers as numbers. */
const defaults: Record<string, any> = Object.fromEntries(Object.entries(envSchema.shape).map(([name, schema]) => {
  const value = settingDocs.get(schema)?.default
  return [name, value !== undefined && /^\d+$/.test(value) ? Number(value) : value]
}))

describe('loadConfig', () => {
  it('uses the documented defaults when nothing is set', () => {
    const c = loadConfig({})
    assert.equal(c.port, defaults.PORT)
    assert.equal(c.host, defaults.HOST)
    assert.equal(c.logLevel, defaults.LOG_LEVEL)
    assert.equal(c.dataDir, resolve(defaults.DATA_DIR))
    assert.equal(c.workspaceRoot, join(resolve(defaults.DATA_DIR), 'workspaces'))
    assert.deepEqual(c.claudeArgsExtra, [])
    assert.equal(c.redisUrl, undefined)
    assert.equal(c.redisPrefix, defaults.REDIS_PREFIX)
    assert.equal(c.tokens, null, 'no GATEWAY_TOKENS: a token is generated at start')
    assert.equal(c.keepaliveIntervalMs, defaults.KEEPALIVE_INTERVAL_MS)
    assert.equal(c.idleTimeoutMs, defaults.IDLE_TIMEOUT_MS)
    assert.equal(c.maxSessions, defaults.MAX_SESSIONS)
    assert.equal(c.shutdownGraceMs, defaults.SHUTDOWN_GRACE_MS)
    assert.equal(c.cliStopTimeoutMs, defaults.CLI_STOP_TIMEOUT_MS)
    assert.equal(c.maxLineBytes, defaults.MAX_LINE_BYTES)
    assert.equal(c.wsMaxPayloadBytes, defaults.WS_MAX_PAYLOAD_BYTES)
    assert.equal(c.wsMaxBufferedBytes, defaults.WS_MAX_BUFFERED_BYTES)
    assert.equal(c.permissionTimeoutMs, defaults.PERMISSION_TIMEOUT_MS)
    assert.equal(c.controlRequestTimeoutMs, defaults.CONTROL_REQUEST_TIMEOUT_MS)
    assert.equal(c.clientRequestTimeoutMs, defaults.CLIENT_REQUEST_TIMEOUT_MS)
    assert.equal(c.eventsMaxPerSession, defaults.EVENTS_MAX_PER_SESSION)
    assert.equal(c.eventsTtlSeconds, defaults.EVENTS_TTL_SECONDS)
    assert.equal(c.storeQueueMax, defaults.STORE_QUEUE_MAX)
    assert.equal(c.rateLimitPerMinute, defaults.RATE_LIMIT_PER_MINUTE)
    assert.equal(c.wsUpgradesPerMinute, defaults.WS_UPGRADES_PER_MINUTE)
    assert.equal(c.wsUpgradesPerMinutePerAddress, defaults.WS_UPGRADES_PER_MINUTE_PER_ADDRESS)
    assert.ok(c.claudeBin.length > 0)
  })

  it('reads the WebSocket upgrade limits apart from the REST one', () => {
    const c = loadConfig({ RATE_LIMIT_PER_MINUTE: '5', WS_UPGRADES_PER_MINUTE: '7', WS_UPGRADES_PER_MINUTE_PER_ADDRESS: '3' })
    assert.equal(c.rateLimitPerMinute, 5)
    assert.equal(c.wsUpgradesPerMinute, 7)
    assert.equal(c.wsUpgradesPerMinutePerAddress, 3)
  })

  it('treats empty values as unset', () => {
    const c = loadConfig({ PORT: '', GATEWAY_TOKENS: '', IDLE_TIMEOUT_MS: '' })
    assert.equal(c.port, defaults.PORT)
    assert.equal(c.tokens, null)
    assert.equal(c.idleTimeoutMs, defaults.IDLE_TIMEOUT_MS)
  })

  it('reads overrides', () => {
    const c = loadConfig({
      PORT: '9090',
      DATA_DIR: '/tmp/cgw-data',
      WORKSPACE_ROOT: '/tmp/cgw-ws',
      KEEPALIVE_INTERVAL_MS: '250',
      IDLE_TIMEOUT_MS: '0',
      CLAUDE_ARGS_EXTRA: '  --mcp-config   /etc/mcp.json ',
      REDIS_URL: 'redis://127.0.0.1:6379/0',
      GATEWAY_TOKENS: ` ${GOOD_TOKEN}=tenant-a , another-long-token-0002=tenant.b `
    })
    assert.equal(c.port, 9090)
    assert.equal(c.redisCluster, false)
    assert.equal(loadConfig({ REDIS_URL: 'redis://10.0.0.1:7000, redis://10.0.0.2:7000' }).redisCluster, true, 'a list of seeds is a Cluster')
    assert.equal(c.dataDir, '/tmp/cgw-data')
    assert.equal(c.workspaceRoot, '/tmp/cgw-ws')
    assert.equal(c.keepaliveIntervalMs, 250)
    assert.equal(c.idleTimeoutMs, 0)
    assert.deepEqual(c.claudeArgsExtra, ['--mcp-config', '/etc/mcp.json'])
    assert.equal(c.redisUrl, 'redis://127.0.0.1:6379/0')
    assert.deepEqual(c.tokens, new Map([[GOOD_TOKEN, 'tenant-a'], ['another-long-token-0002', 'tenant.b']]))
  })

  const bad: Array<[string, string]> = [
    ['PORT', 'abc'],
    ['PORT', '70000'],
    ['PORT', '80.5'],
    ['KEEPALIVE_INTERVAL_MS', '-1'],
    ['IDLE_TIMEOUT_MS', '-5'],
    ['MAX_SESSIONS', '0'],
    ['LOG_LEVEL', 'loud'],
    ['REDIS_URL', 'http://localhost:6379'],
    ['REDIS_URL', 'redis://a:6379,http://b:6379'],
    ['MAX_LINE_BYTES', '10'],
    ['WS_MAX_BUFFERED_BYTES', 'lots'],
    ['WS_UPGRADES_PER_MINUTE', '0'],
    ['WS_UPGRADES_PER_MINUTE_PER_ADDRESS', 'many']
  ]
  for (const [name, value] of bad) {
    it(`refuses ${name}=${value} with a ConfigError naming ${name}`, () => {
      const message = configError(() => loadConfig({ [name]: value }))
      assert.match(message, new RegExp(`\\b${name}\\b`))
    })
  }

  it('names every bad variable at once', () => {
    const message = configError(() => loadConfig({ PORT: 'abc', KEEPALIVE_INTERVAL_MS: '-1', HOST: 'localhost' }))
    assert.match(message, /\bPORT\b/)
    assert.match(message, /\bKEEPALIVE_INTERVAL_MS\b/)
    assert.doesNotMatch(message, /\bHOST\b/)
  })

  const badTokens: Array<[string, string]> = [
    ['no pair at all', 'justsomegarbagewithoutequals'],
    ['no tenant', `${GOOD_TOKEN}=`],
    ['no token', '=tenant-a'],
    ['tenant with spaces', `${GOOD_TOKEN}=tenant a`],
    ['token too short', 'Sh0rt-t0k3n=tenant-a'],
    ['only separators', ' , , ']
  ]
  for (const [what, value] of badTokens) {
    it(`refuses a malformed GATEWAY_TOKENS (${what}) naming the variable, not the secret`, () => {
      const message = configError(() => loadConfig({ GATEWAY_TOKENS: value }))
      assert.match(message, /\bGATEWAY_TOKENS\b/)
      const secret = value.split('=')[0]?.trim() ?? ''
      if (secret.length >= 4) assert.ok(!message.includes(secret), 'the token itself is not echoed')
    })
  }

  it('refuses a non-loopback HOST with no credential configured, and accepts tokens or a JWT key alone', () => {
    const message = configError(() => loadConfig({ HOST: '0.0.0.0' }))
    assert.match(message, /\bHOST\b/)
    assert.match(message, /GATEWAY_TOKENS/)
    assert.match(message, /JWT_SECRET/)
    // The JWT-only deployment docs/SECURITY.md describes (the check used to live in server.ts and refused it).
    assert.equal(loadConfig({ HOST: '0.0.0.0', JWT_SECRET: 'j'.repeat(32) }).host, '0.0.0.0')
    assert.equal(loadConfig({ HOST: '0.0.0.0', GATEWAY_TOKENS: `${GOOD_TOKEN}=tenant-a` }).host, '0.0.0.0')
    assert.equal(loadConfig({ HOST: '::1' }).host, '::1')
  })

  it('gives the same config for a documented default set explicitly as for the variable unset', () => {
    const unset = loadConfig({})
    const withDefaults = Object.entries(defaults).filter(([, value]) => value !== undefined)
    assert.ok(withDefaults.length > 40)
    for (const [name, value] of withDefaults) {
      assert.deepEqual(loadConfig({ [name]: String(value) }), unset, `${name}=${String(value)}`)
    }
  })

  it('is safe by default: loopback, sandboxed, no bypass, SDK-only MCP servers, /metrics on PORT', () => {
    const c = loadConfig({})
    assert.equal(c.host, '127.0.0.1')
    assert.equal(c.sandbox, 'bwrap')
    assert.equal(c.allowUnsandboxed, false)
    assert.equal(c.allowBypassPermissions, false)
    assert.deepEqual(c.clientMcpServerTypes, ['sdk'])
    assert.equal(c.metricsPort, 0)
    assert.equal(c.metricsToken, null)
  })

  it('reads METRICS_PORT and METRICS_TOKEN', () => {
    const token = 'metrics-token-0123456789'
    const c = loadConfig({ METRICS_PORT: '9464', METRICS_TOKEN: token })
    assert.equal(c.metricsPort, 9464)
    assert.equal(c.metricsToken, token)
    for (const value of ['65536', '-1', '9464.5', 'metrics']) {
      assert.match(configError(() => loadConfig({ METRICS_PORT: value })), /\bMETRICS_PORT\b/, value)
    }
    const short = configError(() => loadConfig({ METRICS_TOKEN: 'short-token' }))
    assert.match(short, /METRICS_TOKEN: must be at least 16 characters/)
    assert.doesNotMatch(short, /short-token/, 'the token itself is not echoed')
  })

  it('refuses a separate METRICS_PORT beyond loopback without METRICS_TOKEN', () => {
    const open = { HOST: '0.0.0.0', GATEWAY_TOKENS: 'tok-0123456789abcdef=acme', METRICS_PORT: '9464' }
    assert.match(configError(() => loadConfig(open)), /METRICS_PORT: a separate metrics listener on 0\.0\.0\.0 \(not loopback\) needs METRICS_TOKEN/)
    assert.equal(loadConfig({ ...open, METRICS_TOKEN: 'metrics-token-0123456789' }).metricsPort, 9464)
    assert.equal(loadConfig({ METRICS_PORT: '9464' }).metricsToken, null, 'on loopback a token is optional')
    assert.equal(loadConfig({ HOST: '0.0.0.0', GATEWAY_TOKENS: 'tok-0123456789abcdef=acme' }).metricsPort, 0, 'on PORT, /metrics takes tenant tokens')
  })

  it('refuses METRICS_PORT equal to PORT (the second listener could not bind), but not both 0', () => {
    assert.match(configError(() => loadConfig({ PORT: '9000', METRICS_PORT: '9000' })), /METRICS_PORT: 9000 is PORT too/)
    assert.match(configError(() => loadConfig({ METRICS_PORT: '8080' })), /METRICS_PORT: 8080 is PORT too/, 'against the default PORT')
    assert.equal(loadConfig({ PORT: '0', METRICS_PORT: '0' }).metricsPort, 0)
    assert.equal(loadConfig({ PORT: '0', METRICS_PORT: '9464' }).metricsPort, 9464)
  })

  it('refuses a REDIS_PREFIX with { or } at load (it would break the per-session hash tag; RedisStore used to find out while the app was built)', () => {
    for (const prefix of ['cgw{x}:', 'a}', '{']) {
      assert.match(configError(() => loadConfig({ REDIS_PREFIX: prefix })), /REDIS_PREFIX: must not contain \{ or \}/, prefix)
    }
    assert.equal(loadConfig({ REDIS_PREFIX: 'team-a:cgw:' }).redisPrefix, 'team-a:cgw:')
  })

  it('refuses ALLOWED_ORIGINS entries a browser\'s Origin can never equal (a path, a trailing slash, upper case, a default port)', () => {
    for (const bad of ['https://app.example.com/', 'https://app.example.com/app', 'HTTPS://App.example.com', 'https://app.example.com:443', 'app.example.com', 'null']) {
      assert.match(configError(() => loadConfig({ ALLOWED_ORIGINS: `http://localhost:3000, ${bad}` })), /ALLOWED_ORIGINS: expected a comma list of origins/, bad)
    }
    assert.deepEqual(loadConfig({ ALLOWED_ORIGINS: 'https://app.example.com, http://localhost:3000' }).allowedOrigins, ['https://app.example.com', 'http://localhost:3000'])
  })

  it('refuses a JWT_PUBLIC_KEY the JWT authenticator cannot use, and accepts exactly those it can', async () => {
    // Before, an unusable key passed loadConfig and ended the process with an unhandled rejection
    // once the app had built its JwtAuthenticator.
    const spki = ({ publicKey }: { publicKey: KeyObject }): string => (publicKey.export({ type: 'spki', format: 'pem' }) as string).trim()
    const keys: Array<[string, string, boolean]> = [
      ['RSA', spki(generateKeyPairSync('rsa', { modulusLength: 2048 })), true],
      ['EC P-256', spki(generateKeyPairSync('ec', { namedCurve: 'P-256' })), true],
      ['EC P-521', spki(generateKeyPairSync('ec', { namedCurve: 'P-521' })), true],
      ['Ed25519', spki(generateKeyPairSync('ed25519')), true],
      ['EC secp256k1', spki(generateKeyPairSync('ec', { namedCurve: 'secp256k1' })), false],
      ['Ed448', spki(generateKeyPairSync('ed448')), false],
      ['X25519', spki(generateKeyPairSync('x25519')), false],
      ['a private key', (generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }) as string).trim(), false],
      ['a truncated PEM', '-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEA\n-----END PUBLIC KEY-----', false],
      ['not a PEM', 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI', false]
    ]
    for (const [what, pem, usable] of keys) {
      const authenticatorCanUse = await new JwtAuthenticator({ publicKey: pem, tenantClaim: 'tenant' }).authenticate('a.b.c').then(() => true, () => false)
      assert.equal(authenticatorCanUse, usable, `${what}: the authenticator's own verdict`)
      if (usable) {
        assert.equal(loadConfig({ JWT_PUBLIC_KEY: pem }).jwt?.publicKey, pem, what)
      } else {
        assert.match(configError(() => loadConfig({ JWT_PUBLIC_KEY: pem })), /JWT_PUBLIC_KEY: must be an SPKI PEM public key/, what)
      }
    }
  })

  it('names every start-up rule broken at once', () => {
    const message = configError(() => loadConfig({ HOST: '0.0.0.0', REQUEST_TIMEOUT_MS: '1000', HEADERS_TIMEOUT_MS: '2000', PORT: '9000', METRICS_PORT: '9000' }))
    assert.match(message, /HEADERS_TIMEOUT_MS: must not be greater than REQUEST_TIMEOUT_MS/)
    assert.match(message, /HOST: 0\.0\.0\.0 is not loopback/)
    assert.match(message, /METRICS_PORT: 9000 is PORT too/)
  })
})
