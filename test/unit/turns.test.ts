/**
 * Turns and the CLI's `session_state_changed`: `idle` ends every turn
 * counted (also those that print no result), and a `running` after an
 * `idle` the CLI printed before it read a message written meanwhile says a
 * turn runs again, which the `result` to come then ends.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Turns } from '../../src/session/turns.js'

test('idle ends turns that printed no result', () => {
  const turns = new Turns()
  turns.begin()
  turns.begin()
  turns.begin()
  turns.end()
  turns.cliState('idle')
  assert.equal(turns.pending, 0)
})

test('an idle older than the message written after it: the running that follows counts a turn until its result', () => {
  const turns = new Turns()
  turns.begin()
  turns.end()
  turns.begin() // written before the CLI's idle for the first turn was read
  turns.cliState('idle')
  turns.cliState('running')
  assert.equal(turns.pending, 1)
  turns.cliState('requires_action')
  assert.equal(turns.pending, 1)
  turns.end()
  assert.equal(turns.pending, 0)
})
