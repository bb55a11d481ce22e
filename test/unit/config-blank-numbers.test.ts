// An empty number setting is unset (its default), but one of spaces went
// through Number(), which reads it as 0: PORT=" " listened on a random port,
// IDLE_TIMEOUT_MS=" " never stopped an idle CLI, SHUTDOWN_GRACE_MS=" " gave
// turns no grace, all without a word. It must be refused, naming the setting.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { loadConfig } from '../../src/config.js'
import { configError } from '../support/config-error.js'

describe('number settings of blanks', () => {
  for (const [name, value] of [['PORT', ' '], ['IDLE_TIMEOUT_MS', '  '], ['SHUTDOWN_GRACE_MS', '\t']] as const) {
    it(`${name}=${JSON.stringify(value)} is refused, naming it`, () => {
      assert.match(configError(() => loadConfig({ [name]: value })), new RegExp(`^  ${name}: `, 'm'))
    })
  }
})
