/**
 * Runs a configuration load that must fail and returns the ConfigError's
 * message, so config tests can assert that it names the right variables.
 */
import assert from 'node:assert/strict'
import { ConfigError } from '../../src/config.js'

export function configError (fn: () => unknown): string {
  try {
    fn()
  } catch (err) {
    assert.ok(err instanceof ConfigError, `expected ConfigError, got ${String(err)}`)
    return err.message
  }
  assert.fail('expected loadConfig to throw')
}
