// loadConfig's `<NAME>_FILE` secrets (Docker/Kubernetes secret files): the value comes from the
// file, with the same validation as the plain variable, so no secret needs to be in the environment.
import assert from 'node:assert/strict'
import { generateKeyPairSync } from 'node:crypto'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, it } from 'node:test'
import { SECRET_FILE_VARIABLES, loadConfig } from '../../src/config.js'
import { configError } from '../support/config-error.js'

const dir = mkdtempSync(join(tmpdir(), 'cgw-config-files-'))
after(() => rmSync(dir, { recursive: true, force: true }))

function secretFile (name: string, content: string): string {
  const path = join(dir, name)
  writeFileSync(path, content, { mode: 0o600 })
  return path
}


const TOKEN = 'file-token-0123456789abcdef'
const JWT_SECRET = 'j'.repeat(40)
const STORE_SECRET = 's'.repeat(40)

describe('loadConfig: secrets from files', () => {
  it('reads GATEWAY_TOKENS_FILE, JWT_SECRET_FILE, REDIS_URL_FILE and STORE_SECRET_FILE, trimming the trailing newline', () => {
    const c = loadConfig({
      GATEWAY_TOKENS_FILE: secretFile('tokens', `${TOKEN}=tenant-f\n`),
      JWT_SECRET_FILE: secretFile('jwt', `${JWT_SECRET}\n`),
      REDIS_URL_FILE: secretFile('redis', 'redis://cgw:pa%24s@redis:6379/0\r\n'),
      STORE_SECRET_FILE: secretFile('store', STORE_SECRET)
    })
    assert.deepEqual([...(c.tokens ?? new Map())], [[TOKEN, 'tenant-f']])
    assert.equal(c.jwt?.secret, JWT_SECRET)
    assert.equal(c.redisUrl, 'redis://cgw:pa%24s@redis:6379/0')
    assert.equal(c.storeSecret, STORE_SECRET)
  })

  it('reads a PEM from JWT_PUBLIC_KEY_FILE, keeping its inner newlines', () => {
    // A real key: an unusable one is refused at load (config.test.ts).
    const pem = (generateKeyPairSync('ed25519').publicKey.export({ type: 'spki', format: 'pem' }) as string).trim()
    assert.ok(pem.split('\n').length > 2, 'the PEM has inner newlines')
    const c = loadConfig({ JWT_PUBLIC_KEY_FILE: secretFile('pub.pem', `${pem}\n`) })
    assert.equal(c.jwt?.publicKey, pem)
  })

  it('uses an injected reader when given one', () => {
    const read: string[] = []
    const c = loadConfig({ REDIS_URL_FILE: '/run/secrets/redis_url' }, { readFile: (p) => { read.push(p); return 'redis://x:6379\n' } })
    assert.deepEqual(read, ['/run/secrets/redis_url'])
    assert.equal(c.redisUrl, 'redis://x:6379')
  })

  it('reads METRICS_TOKEN_FILE', () => {
    assert.equal(loadConfig({ METRICS_TOKEN_FILE: secretFile('metrics', 'metrics-token-0123456789\n') }).metricsToken, 'metrics-token-0123456789')
    assert.match(configError(() => loadConfig({ METRICS_TOKEN_FILE: secretFile('short-metrics', 'short\n') })), /METRICS_TOKEN \(read from METRICS_TOKEN_FILE\): must be at least 16 characters/)
  })

  it('reads the CLI\'s credential from ANTHROPIC_API_KEY_FILE / ANTHROPIC_AUTH_TOKEN_FILE (or the variables), for the CLI alone', () => {
    assert.deepEqual(loadConfig({}).anthropicCredentials, {})
    assert.deepEqual(loadConfig({ ANTHROPIC_API_KEY_FILE: secretFile('api-key', 'sk-ant-from-file\n') }).anthropicCredentials, { ANTHROPIC_API_KEY: 'sk-ant-from-file' })
    assert.deepEqual(loadConfig({ ANTHROPIC_AUTH_TOKEN: 'tok', ANTHROPIC_API_KEY: '' }).anthropicCredentials, { ANTHROPIC_AUTH_TOKEN: 'tok' })
  })

  it('reads tenants\' own keys from TENANT_API_KEYS_FILE (or the variable), a key holding = included, and names a bad entry without its key', () => {
    assert.equal(loadConfig({}).tenantApiKeys, null)
    assert.deepEqual([...(loadConfig({ TENANT_API_KEYS_FILE: secretFile('tenant-keys', 'acme=sk-ant-a==,beta.co=sk-ant-b\n') }).tenantApiKeys ?? [])],
      [['acme', 'sk-ant-a=='], ['beta.co', 'sk-ant-b']])
    assert.match(configError(() => loadConfig({ TENANT_API_KEYS: 'acme=sk-ant-secret-1,acme=sk-ant-secret-2' })), /TENANT_API_KEYS: tenant acme is named twice/)
    assert.match(configError(() => loadConfig({ TENANT_API_KEYS: 'acme=' })), /TENANT_API_KEYS: the key for tenant acme is empty/)
    const bad = configError(() => loadConfig({ TENANT_API_KEYS: '../x=sk-ant-secret-3' }))
    assert.match(bad, /TENANT_API_KEYS: expected tenant=key/)
    assert.doesNotMatch(bad, /sk-ant-secret/)
  })

  const secrets = ['GATEWAY_TOKENS', 'JWT_SECRET', 'JWT_PUBLIC_KEY', 'REDIS_URL', 'STORE_SECRET', 'METRICS_TOKEN', 'WEBHOOK_URL', 'WEBHOOK_SECRET', 'ANTHROPIC_API_KEY', 'ANTHROPIC_AUTH_TOKEN', 'TENANT_API_KEYS']
  it('takes exactly these secrets from files', () => {
    assert.deepEqual([...SECRET_FILE_VARIABLES].sort(), [...secrets].sort())
  })

  for (const name of secrets) {
    it(`refuses ${name} and ${name}_FILE both set, naming both`, () => {
      const message = configError(() => loadConfig({ [name]: 'x'.repeat(40), [`${name}_FILE`]: secretFile(`both-${name}`, 'y'.repeat(40)) }))
      assert.match(message, new RegExp(`\\b${name}, ${name}_FILE: both are set`))
    })

    it(`refuses an unreadable ${name}_FILE, naming the variable`, () => {
      const missing = join(dir, `missing-${name}`)
      const message = configError(() => loadConfig({ [`${name}_FILE`]: missing }))
      assert.match(message, new RegExp(`${name}_FILE: cannot read ${missing.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} \\(ENOENT\\)`))
    })

    it(`refuses an empty ${name}_FILE`, () => {
      const message = configError(() => loadConfig({ [`${name}_FILE`]: secretFile(`empty-${name}`, '\n') }))
      assert.match(message, new RegExp(`${name}_FILE: .* is empty`))
    })
  }

  it('validates a value from a file like the plain variable, without printing the secret', () => {
    assert.match(configError(() => loadConfig({ REDIS_URL_FILE: secretFile('bad-url', 'http://nope\n') })), /REDIS_URL \(read from REDIS_URL_FILE\): must be a redis:\/\/ or rediss:\/\/ URL/)
    assert.match(configError(() => loadConfig({ JWT_SECRET_FILE: secretFile('short-jwt', 'short\n') })), /JWT_SECRET \(read from JWT_SECRET_FILE\): must be at least 32 characters/)
    assert.match(configError(() => loadConfig({ STORE_SECRET_FILE: secretFile('short-store', 'short\n') })), /STORE_SECRET \(read from STORE_SECRET_FILE\): must be at least 32 characters/)
    const tokens = configError(() => loadConfig({ GATEWAY_TOKENS_FILE: secretFile('short-tokens', 'shorttoken=t\n') }))
    assert.match(tokens, /GATEWAY_TOKENS \(read from GATEWAY_TOKENS_FILE\): token for tenant t is shorter than 16 characters/)
    assert.doesNotMatch(tokens, /shorttoken/)
  })

  it('STORE_SECRET: a plain value is used as is and must have 32 characters', () => {
    assert.equal(loadConfig({ STORE_SECRET }).storeSecret, STORE_SECRET)
    assert.equal(loadConfig({}).storeSecret, undefined)
    assert.match(configError(() => loadConfig({ STORE_SECRET: 'short' })), /STORE_SECRET: must be at least 32 characters/)
  })
})
