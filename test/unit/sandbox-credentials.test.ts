// SANDBOX_CREDENTIALS=proxy: what holdCredentials (src/sandbox/api-credentials.ts)
// takes out of a sandboxed CLI's environment, and the egress proxy acting as
// the CLI's API with it (src/sandbox/egress-proxy.ts): requests addressed to
// the proxy reach the real API with the real credential and never the
// placeholder, in both request forms, streamed both ways, dropped upstream
// when the CLI goes away, over one kept-alive connection.
import assert from 'node:assert/strict'
import { once } from 'node:events'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import pino from 'pino'
import type { ApiCredential } from '../../src/cli/cli-handle.js'
import { CREDENTIAL_PLACEHOLDER, type HeldCredentials, holdCredentials } from '../../src/sandbox/api-credentials.js'
import { DEFAULT_API_PATHS } from '../../src/sandbox/api-paths.js'
import { EgressProxy } from '../../src/sandbox/egress-proxy.js'
import { Waiters } from '../support/waiters.js'

const IN_BOX = 'http://127.0.0.1:3128'

describe('holdCredentials', () => {
  it('replaces the API key and the base URL, and holds the key for the real API', () => {
    const { env, held } = holdCredentials({ PATH: '/usr/bin', ANTHROPIC_API_KEY: 'sk-real' }, IN_BOX)
    assert.deepEqual(env, { PATH: '/usr/bin', ANTHROPIC_API_KEY: CREDENTIAL_PLACEHOLDER, ANTHROPIC_BASE_URL: IN_BOX })
    assert.equal(held?.upstream.href, 'https://api.anthropic.com/')
    assert.deepEqual(held?.headers(), { 'x-api-key': 'sk-real' })
  })

  it('holds an auth token as a bearer credential, for the CLI\'s own ANTHROPIC_BASE_URL', () => {
    const { env, held } = holdCredentials({ ANTHROPIC_AUTH_TOKEN: 'tok', ANTHROPIC_BASE_URL: 'http://llm-gw.internal:8080/anthropic/' }, IN_BOX)
    assert.deepEqual(env, { ANTHROPIC_AUTH_TOKEN: CREDENTIAL_PLACEHOLDER, ANTHROPIC_BASE_URL: IN_BOX })
    assert.equal(held?.upstream.href, 'http://llm-gw.internal:8080/anthropic/')
    assert.deepEqual(held?.headers(), { authorization: 'Bearer tok' })
  })

  it('with a live credential, sends what it says at each request: a rotated key, a token in place of a key, or nothing once it is gone', () => {
    let now: ApiCredential = { apiKey: 'sk-at-spawn' }
    const { env, held } = holdCredentials({ ANTHROPIC_API_KEY: 'sk-at-spawn' }, IN_BOX, () => now)
    assert.equal(env.ANTHROPIC_API_KEY, CREDENTIAL_PLACEHOLDER)
    assert.deepEqual(held?.headers(), { 'x-api-key': 'sk-at-spawn' })
    now = { apiKey: 'sk-rotated' }
    assert.deepEqual(held?.headers(), { 'x-api-key': 'sk-rotated' })
    now = { authToken: 'tok-now', apiKey: '' }
    assert.deepEqual(held?.headers(), { authorization: 'Bearer tok-now' })
    now = {}
    assert.deepEqual(held?.headers(), {}, 'a credential taken away is not sent from memory')
  })

  it('holds nothing, and changes nothing, without a key, for other providers, or with a base URL that is not http(s)', () => {
    const envs: Array<Record<string, string>> = [
      { PATH: '/usr/bin' },
      { ANTHROPIC_API_KEY: '' },
      { ANTHROPIC_API_KEY: 'sk-real', CLAUDE_CODE_USE_BEDROCK: '1' },
      { ANTHROPIC_API_KEY: 'sk-real', CLAUDE_CODE_USE_VERTEX: 'true' },
      { ANTHROPIC_API_KEY: 'sk-real', ANTHROPIC_BASE_URL: 'not a url' },
      { ANTHROPIC_API_KEY: 'sk-real', ANTHROPIC_BASE_URL: 'unix:/run/api.sock' }
    ]
    for (const env of envs) {
      const out = holdCredentials(env, IN_BOX)
      assert.equal(out.held, null, JSON.stringify(env))
      assert.equal(out.env, env)
    }
    assert.notEqual(holdCredentials({ ANTHROPIC_API_KEY: 'sk-real', CLAUDE_CODE_USE_BEDROCK: '0' }, IN_BOX).held, null)
  })

  it('reads the client certificate for the gateway\'s connection and leaves none of its variables in the sandbox', () => {
    const dir = mkdtempSync(join(tmpdir(), 'cgw-cred-'))
    try {
      writeFileSync(join(dir, 'c.pem'), 'CERT')
      writeFileSync(join(dir, 'k.pem'), 'KEY')
      const { env, held } = holdCredentials({
        ANTHROPIC_API_KEY: 'sk-real',
        CLAUDE_CODE_CLIENT_CERT: join(dir, 'c.pem'),
        CLAUDE_CODE_CLIENT_KEY: join(dir, 'k.pem'),
        CLAUDE_CODE_CLIENT_KEY_PASSPHRASE: 'secret'
      }, IN_BOX)
      assert.deepEqual(env, { ANTHROPIC_API_KEY: CREDENTIAL_PLACEHOLDER, ANTHROPIC_BASE_URL: IN_BOX })
      assert.deepEqual(held?.tls, { cert: Buffer.from('CERT'), key: Buffer.from('KEY'), passphrase: 'secret' })
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})

interface Seen { method: string, url: string, headers: http.IncomingHttpHeaders, body: string, port: number }

describe('EgressProxy with held credentials', () => {
  const dir = mkdtempSync(join(tmpdir(), 'cgw-api-proxy-'))
  const socketPath = join(dir, 'p.sock')
  const logger = pino({ level: 'silent' })
  const seen: Seen[] = []
  /** Requests to /stream: their answers, for the test to write. */
  const streams: http.ServerResponse[] = []
  let api: http.Server
  let proxy: EgressProxy
  let held: HeldCredentials
  /** The credential as the gateway holds it now (a reload replaces it). */
  let live: ApiCredential = { apiKey: 'sk-real', authToken: 'tok-real' }

  /** One request to the proxy socket (as socat inside the sandbox passes it); resolves with the answer's status and body. */
  function ask (path: string, options: { method?: string, headers?: http.OutgoingHttpHeaders, body?: string } = {}): Promise<{ status: number, body: string }> {
    return new Promise((resolve, reject) => {
      const req = http.request({ socketPath, path, method: options.method ?? 'GET', headers: options.headers }, (res) => {
        let body = ''
        res.setEncoding('utf8').on('data', (d: string) => { body += d }).on('end', () => resolve({ status: res.statusCode ?? 0, body }))
      })
      req.on('error', reject)
      req.end(options.body)
    })
  }

  before(async () => {
    api = http.createServer((req, res) => {
      let body = ''
      req.setEncoding('utf8').on('data', (d: string) => { body += d }).on('end', () => {
        seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body, port: req.socket.remotePort ?? 0 })
        if (req.url?.includes('stream=1') === true) {
          res.writeHead(200, { 'content-type': 'text/event-stream' })
          res.write('event: first\n\n')
          streams.push(res)
        } else {
          res.end(`answer ${seen.length}`)
        }
      })
    })
    api.listen(0, '127.0.0.1')
    await once(api, 'listening')
    const base = `http://127.0.0.1:${(api.address() as AddressInfo).port}/anthropic/`
    const held0 = holdCredentials({ ANTHROPIC_API_KEY: 'sk-real', ANTHROPIC_AUTH_TOKEN: 'tok-real', ANTHROPIC_BASE_URL: base }, IN_BOX, () => live).held
    assert.ok(held0 !== null)
    held = held0
    proxy = new EgressProxy({ socketPath, allow: [], logger, sessionId: 's', api: { held, port: 3128, paths: DEFAULT_API_PATHS } })
  })

  after(async () => {
    await proxy.close()
    api.close()
    rmSync(dir, { recursive: true, force: true })
  })

  it('sends an origin-form request to the real API under its base path, with the real credential in place of the placeholder', async () => {
    const from = seen.length
    const answer = await ask('/v1/messages?beta=true', {
      method: 'POST',
      headers: { 'x-api-key': CREDENTIAL_PLACEHOLDER, authorization: `Bearer ${CREDENTIAL_PLACEHOLDER}`, 'content-type': 'application/json', 'anthropic-version': '2023-06-01' },
      body: '{"model":"m","messages":[]}'
    })
    assert.deepEqual(answer, { status: 200, body: `answer ${from + 1}` })
    const r = seen[from] as Seen
    assert.equal(r.method, 'POST')
    assert.equal(r.url, '/anthropic/v1/messages?beta=true')
    assert.equal(r.body, '{"model":"m","messages":[]}')
    assert.equal(r.headers['x-api-key'], 'sk-real')
    assert.equal(r.headers.authorization, 'Bearer tok-real')
    assert.equal(r.headers['anthropic-version'], '2023-06-01')
    assert.equal(r.headers.host, held.upstream.host)
    assert.doesNotMatch(JSON.stringify(r.headers), new RegExp(CREDENTIAL_PLACEHOLDER))
  })

  it('takes absolute-form requests to itself (the CLI going through HTTP_PROXY) as API requests too; other addresses stay refused', async () => {
    const from = seen.length
    assert.equal((await ask(`${IN_BOX}/v1/models`, { headers: { 'x-api-key': CREDENTIAL_PLACEHOLDER } })).status, 200)
    assert.equal((await ask('http://localhost:3128/v1/models?limit=2')).status, 200)
    assert.deepEqual(seen.slice(from).map((r) => [r.url, r.headers['x-api-key']]), [['/anthropic/v1/models', 'sk-real'], ['/anthropic/v1/models?limit=2', 'sk-real']])
    for (const url of ['http://127.0.0.1:3129/v1/models', `${held.upstream.origin}/v1/models`, 'https://api.anthropic.com/v1/models']) {
      assert.equal((await ask(url)).status, 403, url)
    }
    assert.equal(seen.length, from + 2, 'nothing refused reached the API')
  })

  it('sends the credential the gateway holds at each request: after a reload, the next request carries the new key on the same connection', async () => {
    const from = seen.length
    await ask('/v1/models', { headers: { 'x-api-key': CREDENTIAL_PLACEHOLDER } })
    live = { apiKey: 'sk-rotated' }
    try {
      await ask('/v1/models', { headers: { 'x-api-key': CREDENTIAL_PLACEHOLDER, authorization: `Bearer ${CREDENTIAL_PLACEHOLDER}` } })
    } finally {
      live = { apiKey: 'sk-real', authToken: 'tok-real' }
    }
    const [before, afterReload] = seen.slice(from) as [Seen, Seen]
    assert.deepEqual([before.headers['x-api-key'], before.headers.authorization], ['sk-real', 'Bearer tok-real'])
    assert.deepEqual([afterReload.headers['x-api-key'], afterReload.headers.authorization], ['sk-rotated', undefined], 'the placeholder bearer is dropped, not passed on')
    assert.equal(afterReload.port, before.port, 'no new connection to the API for it')
  })

  it('streams the answer as the API sends it, and drops the API request when the CLI goes away', async () => {
    const from = streams.length
    const events: string[] = []
    const got = new Waiters()
    const req = http.request({ socketPath, path: '/v1/messages?stream=1', method: 'POST' }, (res) => {
      res.setEncoding('utf8').on('data', (d: string) => { events.push(d); got.wake() })
    })
    req.end('{}')
    await got.until(() => events.join('').includes('event: first'), 5000, 'the first event before the answer ended', () => events.join(''))
    const answer = streams[from] as http.ServerResponse
    assert.equal(answer.writableEnded, false, 'the API has not finished its answer')
    const dropped = once(answer, 'close')
    req.destroy() // the CLI was interrupted mid-answer
    await dropped
    assert.equal(answer.writableEnded, false)
  })

  it('keeps one connection to the API across requests', async () => {
    const from = seen.length
    await ask('/v1/models')
    await ask('/v1/models/claude-sonnet-4-5')
    const ports = seen.slice(from).map((r) => r.port)
    assert.equal(ports.length, 2)
    assert.equal(ports[0], ports[1])
  })

  it('passes only the API paths the CLI needs (SANDBOX_API_PATHS): Files, Batches and paths that resolve elsewhere get 403 and never reach the API', async () => {
    const from = seen.length
    const refused = [
      ['GET', '/v1/files'],
      ['GET', '/v1/files/file_011/content'],
      ['POST', '/v1/messages/batches'],
      ['GET', '/v1/messages/batches/msgbatch_01/results'],
      ['POST', '/v1/messages/../files'],
      ['POST', '/v1/messages/%2e%2e/files'],
      ['GET', '/v1/models/%2F..%2Ffiles'],
      ['GET', '/v1/models/a/b'],
      ['POST', '/v1//messages'],
      ['DELETE', `${IN_BOX}/v1/files/file_011`]
    ]
    for (const [method, path] of refused) {
      const answer = await ask(path as string, { method, headers: { 'x-api-key': CREDENTIAL_PLACEHOLDER } })
      assert.equal(answer.status, 403, `${method} ${path}`)
      assert.deepEqual(JSON.parse(answer.body).error.type, 'permission_error')
    }
    assert.equal(seen.length, from, 'nothing refused reached the API')
    for (const [method, path] of [['POST', '/v1/messages?beta=true'], ['POST', '/v1/messages/count_tokens?beta=true'], ['GET', '/v1/models?limit=5'], ['HEAD', '/api/hello'], ['POST', '/v1/messages/']]) {
      assert.equal((await ask(path as string, { method })).status, 200, `${method} ${path}`)
    }
    assert.deepEqual(seen.slice(from).map((r) => `${r.method} ${r.url}`), [
      'POST /anthropic/v1/messages?beta=true', 'POST /anthropic/v1/messages/count_tokens?beta=true', 'GET /anthropic/v1/models?limit=5', 'HEAD /anthropic/api/hello', 'POST /anthropic/v1/messages/'
    ])
  })

  it('answers 502 when the API cannot be reached', async () => {
    const down = holdCredentials({ ANTHROPIC_API_KEY: 'k', ANTHROPIC_BASE_URL: 'http://127.0.0.1:1' }, IN_BOX).held
    assert.ok(down !== null)
    const p2 = new EgressProxy({ socketPath: join(dir, 'p2.sock'), allow: [], logger, sessionId: 's2', api: { held: down, port: 3128, paths: DEFAULT_API_PATHS } })
    try {
      const answer = await new Promise<number>((resolve, reject) => {
        http.request({ socketPath: join(dir, 'p2.sock'), path: '/v1/messages' }, (res) => { res.resume(); resolve(res.statusCode ?? 0) }).on('error', reject).end()
      })
      assert.equal(answer, 502)
    } finally {
      await p2.close()
    }
  })
})
