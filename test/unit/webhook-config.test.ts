// The WEBHOOK_* settings through loadConfig: off when WEBHOOK_URL is unset, a URL needs a secret
// (from the variable or WEBHOOK_SECRET_FILE), only http(s) URLs, the defaults docs/WEBHOOKS.md
// states, and no error message that repeats the URL (it may hold credentials).
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, it } from 'node:test'
import { SECRET_FILE_VARIABLES, loadConfig } from '../../src/config.js'
import { configError } from '../support/config-error.js'

const SECRET = 'w'.repeat(40)
const URL = 'https://hooks.example.com/claude?key=abc'

const dir = mkdtempSync(join(tmpdir(), 'cgw-webhook-config-'))
after(() => rmSync(dir, { recursive: true, force: true }))

describe('loadConfig: webhooks', () => {
  it('are off without WEBHOOK_URL, even with a secret', () => {
    assert.equal(loadConfig({}).webhook, null)
    assert.equal(loadConfig({ WEBHOOK_SECRET: SECRET }).webhook, null)
  })

  it('take the documented defaults with a URL and a secret', () => {
    assert.deepEqual(loadConfig({ WEBHOOK_URL: URL, WEBHOOK_SECRET: SECRET }).webhook, {
      url: URL,
      secret: SECRET,
      events: ['permission.requested', 'permission.resolved', 'turn.finished', 'session.ended'],
      timeoutMs: 10_000,
      maxAttempts: 8,
      retryBaseMs: 1_000,
      retryMaxMs: 60_000,
      concurrency: 4,
      queueMax: 10_000
    })
  })

  it('read every WEBHOOK_* setting', () => {
    const c = loadConfig({
      WEBHOOK_URL: 'http://127.0.0.1:9000/hook',
      WEBHOOK_SECRET: SECRET,
      WEBHOOK_EVENTS: 'session.ended, turn.finished',
      WEBHOOK_TIMEOUT_MS: '2500',
      WEBHOOK_MAX_ATTEMPTS: '3',
      WEBHOOK_RETRY_BASE_MS: '50',
      WEBHOOK_RETRY_MAX_MS: '900',
      WEBHOOK_CONCURRENCY: '1',
      WEBHOOK_QUEUE_MAX: '5'
    })
    assert.deepEqual(c.webhook, {
      url: 'http://127.0.0.1:9000/hook', secret: SECRET, events: ['session.ended', 'turn.finished'], timeoutMs: 2500, maxAttempts: 3, retryBaseMs: 50, retryMaxMs: 900, concurrency: 1, queueMax: 5
    })
  })

  it('refuse a URL without a secret, naming WEBHOOK_SECRET', () => {
    assert.match(configError(() => loadConfig({ WEBHOOK_URL: URL })), /WEBHOOK_SECRET: required when WEBHOOK_URL is set/)
  })

  it('refuse a short secret, a URL that is not http(s), and unknown event types, without repeating the URL', () => {
    assert.match(configError(() => loadConfig({ WEBHOOK_URL: URL, WEBHOOK_SECRET: 'short' })), /WEBHOOK_SECRET: must be at least 32 characters/)
    for (const bad of ['ftp://user:hunter2@example.com/x', 'hooks.example.com/hunter2', 'not a url hunter2']) {
      const message = configError(() => loadConfig({ WEBHOOK_URL: bad, WEBHOOK_SECRET: SECRET }))
      assert.match(message, /WEBHOOK_URL: must be an http:\/\/ or https:\/\/ URL/)
      assert.doesNotMatch(message, /hunter2/)
    }
    for (const events of ['turn.finished,turn.started', 'turnXfinished', 'session.ended.x']) {
      assert.match(configError(() => loadConfig({ WEBHOOK_URL: URL, WEBHOOK_SECRET: SECRET, WEBHOOK_EVENTS: events })), /WEBHOOK_EVENTS: expected a comma list of event types/, events)
    }
    assert.match(configError(() => loadConfig({ WEBHOOK_URL: URL, WEBHOOK_SECRET: SECRET, WEBHOOK_CONCURRENCY: '0' })), /WEBHOOK_CONCURRENCY/)
  })

  it('read WEBHOOK_URL_FILE and WEBHOOK_SECRET_FILE like the other secrets', () => {
    assert.ok(SECRET_FILE_VARIABLES.includes('WEBHOOK_URL') && SECRET_FILE_VARIABLES.includes('WEBHOOK_SECRET'))
    const secretPath = join(dir, 'webhook-secret')
    const urlPath = join(dir, 'webhook-url')
    writeFileSync(secretPath, `${SECRET}\n`, { mode: 0o600 })
    writeFileSync(urlPath, 'https://user:pass@hooks.example.com/x\n', { mode: 0o600 })
    const c = loadConfig({ WEBHOOK_URL_FILE: urlPath, WEBHOOK_SECRET_FILE: secretPath })
    assert.equal(c.webhook?.secret, SECRET)
    assert.equal(c.webhook?.url, 'https://user:pass@hooks.example.com/x')
    assert.match(configError(() => loadConfig({ WEBHOOK_URL: URL, WEBHOOK_SECRET: SECRET, WEBHOOK_SECRET_FILE: secretPath })), /WEBHOOK_SECRET, WEBHOOK_SECRET_FILE: both are set/)
  })
})
