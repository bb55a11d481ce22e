/**
 * The CLI's environment (src/cli/cli-env.ts): whatever passes is printable
 * by any tool in the session, so the gateway's own secrets never pass, even
 * when an operator's CLI_ENV_ALLOW prefix happens to cover their names.
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { buildCliEnv } from '../../src/cli/cli-env.js'

/** Every secret setting the gateway reads from its environment (src/config/settings.ts), and its _FILE form. */
const GATEWAY_SECRETS = ['GATEWAY_TOKENS', 'JWT_SECRET', 'JWT_PUBLIC_KEY', 'REDIS_URL', 'STORE_SECRET', 'METRICS_TOKEN', 'WEBHOOK_SECRET', 'TENANT_API_KEYS']

describe('CLI environment: gateway secrets', () => {
  it('never passes a gateway secret (or its _FILE), whatever CLI_ENV_ALLOW lists', () => {
    const source: NodeJS.ProcessEnv = { PATH: '/usr/bin' }
    for (const name of GATEWAY_SECRETS) {
      source[name] = `value of ${name}`
      source[`${name}_FILE`] = `/run/secrets/${name}`
    }
    const allow = [...GATEWAY_SECRETS, ...GATEWAY_SECRETS.map((n) => `${n}_FILE`), 'METRICS_', 'WEBHOOK_', 'TENANT_']
    const env = buildCliEnv(source, {}, allow)
    const passed = Object.keys(env).filter((name) => GATEWAY_SECRETS.some((s) => name === s || name === `${s}_FILE`))
    assert.deepEqual(passed, [])
    assert.equal(env.PATH, '/usr/bin')
  })
})
