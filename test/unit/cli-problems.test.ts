/**
 * The CLI failures a gateway user cannot diagnose from the CLI's own lines,
 * recognised in the project's recordings of the real CLI (not_logged_in,
 * api_unreachable; made with `npm run record`) and in the variants the
 * recordings do not show (HTTP 401 retries, rate limits, a second turn).
 */
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { test } from 'node:test'
import { CliProblems, RETRIES_BEFORE_UNREACHABLE } from '../../src/session/cli-problems.js'

const RECORDED = new URL('../fixtures/recorded/claude-code-2.1.332/', import.meta.url)

function recorded (name: string): Array<Record<string, unknown>> {
  return readFileSync(new URL(`${name}.stdout.ndjson`, RECORDED), 'utf8').split('\n').filter((l) => l !== '').map((l) => JSON.parse(l))
}

function problemsIn (lines: Array<Record<string, unknown>>): Array<{ at: number, code: string, attempt?: number | undefined }> {
  const p = new CliProblems()
  return lines.flatMap((line, at) => {
    const found = p.observe(line)
    return found === null ? [] : [{ at, code: found.code, ...(found.attempt === undefined ? {} : { attempt: found.attempt }) }]
  })
}

const retry = (attempt: number, status: number | null): Record<string, unknown> =>
  ({ type: 'system', subtype: 'api_retry', attempt, max_retries: 10, retry_delay_ms: 500, error_status: status, error: status === null ? 'unknown' : 'server_error' })
const result = { type: 'result', subtype: 'success', is_error: false }

test('the recorded not-logged-in turn: one cli_not_authenticated, at the assistant line that says so', () => {
  const lines = recorded('not_logged_in')
  const at = lines.findIndex((l) => l.type === 'assistant')
  assert.deepEqual(problemsIn(lines), [{ at, code: 'cli_not_authenticated' }])
  assert.match(String(new CliProblems().observe(lines[at] as Record<string, unknown>)?.message), /Not logged in/)
})

test('the recorded unreachable API: api_unreachable once, at the second api_retry, with its attempt', () => {
  const lines = recorded('api_unreachable')
  const retries = lines.map((l, i) => [l, i] as const).filter(([l]) => l.subtype === 'api_retry')
  assert.ok(retries.length >= RETRIES_BEFORE_UNREACHABLE)
  const second = retries[RETRIES_BEFORE_UNREACHABLE - 1] as readonly [Record<string, unknown>, number]
  assert.deepEqual(problemsIn(lines), [{ at: second[1], code: 'api_unreachable', attempt: second[0].attempt as number }])
})

test('the text turn and the permission turns of the recordings raise nothing', () => {
  for (const name of ['text', 'allow', 'deny', 'partial', 'two_tools']) assert.deepEqual(problemsIn(recorded(name)), [], name)
})

test('5xx retries count, 429 and 4xx do not, 401/403 mean credentials; each is said once per turn', () => {
  assert.deepEqual(problemsIn([retry(1, 429), retry(2, 429), retry(3, 529)]), [])
  assert.deepEqual(problemsIn([retry(1, 503), retry(2, 503), retry(3, 503)]), [{ at: 1, code: 'api_unreachable', attempt: 2 }])
  assert.deepEqual(problemsIn([retry(1, 401), retry(2, 401)]), [{ at: 0, code: 'cli_not_authenticated' }])
  assert.deepEqual(
    problemsIn([retry(1, null), retry(2, null), result, retry(1, null), retry(2, null)]),
    [{ at: 1, code: 'api_unreachable', attempt: 2 }, { at: 4, code: 'api_unreachable', attempt: 2 }],
    'a new turn starts counting again'
  )
})
