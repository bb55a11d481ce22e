/**
 * The CLI's environment (src/cli/cli-env.ts) against every setting the
 * gateway reads as a secret (those with a `_FILE` form, src/config/settings.ts):
 * none passes, nor its `_FILE`, whatever CLI_ENV_ALLOW lists, except the API
 * credential the CLI needs (held by the egress proxy in the sandbox).
 * `WEBHOOK_URL` is one: a `user:password@` in it is the receiver's Basic
 * authentication, and many receivers' URLs are themselves the credential.
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { buildCliEnv } from '../../src/cli/cli-env.js'
import { SECRET_FILE_VARIABLES } from '../../src/config/settings.js'

/** The CLI's own credential: passed on purpose (a placeholder in the sandbox). */
const CLI_CREDENTIALS = new Set(['ANTHROPIC_API_KEY', 'ANTHROPIC_AUTH_TOKEN'])

describe('CLI environment: every secret setting of the gateway', () => {
  it('passes none of them (or their _FILE), even listed by name or prefix in CLI_ENV_ALLOW', () => {
    const secrets = SECRET_FILE_VARIABLES.filter((n) => !CLI_CREDENTIALS.has(n))
    const source: NodeJS.ProcessEnv = { PATH: '/usr/bin' }
    for (const name of secrets) {
      source[name] = `value of ${name}`
      source[`${name}_FILE`] = `/run/secrets/${name}`
    }
    const prefixes = [...new Set(secrets.map((n) => `${n.split('_')[0] as string}_`))]
    const env = buildCliEnv(source, {}, [...secrets, ...secrets.map((n) => `${n}_FILE`), ...prefixes])
    assert.deepEqual(Object.keys(env).filter((name) => name in source && name !== 'PATH'), [])
  })
})
