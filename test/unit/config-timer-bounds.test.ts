// Millisecond settings become setTimeout/setInterval delays, which Node caps
// at 2^31-1 ms: a longer one fires after 1 ms instead (a TimeoutOverflowWarning).
// IDLE_TIMEOUT_MS=3000000000 ("about a month") would stop every idle CLI at
// once, KEEPALIVE_INTERVAL_MS past it would ping every millisecond. Such a
// value must stop the start with a message naming the setting.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { loadConfig } from '../../src/config.js'
import { configError } from '../support/config-error.js'

const MAX_DELAY_MS = 2 ** 31 - 1
const TIMER_SETTINGS = [
  'KEEPALIVE_INTERVAL_MS', 'IDLE_TIMEOUT_MS', 'SHUTDOWN_GRACE_MS', 'CLI_STOP_TIMEOUT_MS', 'PERMISSION_TIMEOUT_MS',
  'CONTROL_REQUEST_TIMEOUT_MS', 'INITIALIZE_HOLD_MS', 'CLIENT_REQUEST_TIMEOUT_MS', 'RESUME_STORE_WAIT_MS',
  'KEEPALIVE_TIMEOUT_MS', 'WS_TICKET_TTL_MS', 'CREDENTIAL_FILES_POLL_MS'
]

describe('millisecond settings and setTimeout\'s range', () => {
  for (const name of TIMER_SETTINGS) {
    it(`${name} past 2^31-1 ms is refused, naming it`, () => {
      const message = configError(() => loadConfig({ [name]: String(MAX_DELAY_MS + 1) }))
      assert.match(message, new RegExp(`^  ${name}: `, 'm'))
    })
  }

  it('takes the largest delay setTimeout can wait', () => {
    assert.equal(loadConfig({ IDLE_TIMEOUT_MS: String(MAX_DELAY_MS) }).idleTimeoutMs, MAX_DELAY_MS)
  })
})
