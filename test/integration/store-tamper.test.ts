/**
 * A session record rewritten in Redis behind the gateway's back (finding 3 of
 * issue 11: an agent that reached Redis moved a victim's session to its own
 * tenant and set permission_mode bypassPermissions). After a restart on the
 * same Redis, prefix and DATA_DIR (so the same generated store secret), the
 * record's MAC no longer matches: both tenants get 404 everywhere, listings
 * and recovery skip it, no CLI is spawned for it, and an error log line names
 * it. A record left alone keeps working across the same restart (--resume).
 */
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { existsSync, mkdtempSync } from 'node:fs'
import { rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, it } from 'node:test'
import pino from 'pino'
import { isHello } from '../support/frames.js'
import { TOKEN_A, TOKEN_B, type TestGateway, gateway, suiteScope } from '../support/gateway.js'
import { REDIS_URL, deleteKeys, redisCommand } from '../support/redis-server.js'
import { statusBecomes, turn } from './resume-helpers.js'


function capture (): { logger: pino.Logger, entries: () => any[] } {
  const lines: string[] = []
  const logger = pino({ level: 'info' }, { write: (line: string) => { lines.push(line) } })
  return { logger, entries: () => lines.map((l) => JSON.parse(l)) }
}

const bypassArg = (argv: string[]): boolean =>
  argv.some((a, i) => a === '--permission-mode=bypassPermissions' || (a === '--permission-mode' && argv[i + 1] === 'bypassPermissions'))

describe('a session record changed in Redis outside the gateway', () => {
  const prefix = `cgw-test:${randomUUID()}:`
  const dataDir = mkdtempSync(join(tmpdir(), 'cgw-tamper-'))
  const scope = suiteScope()
  const start = (logger?: pino.Logger): Promise<TestGateway> =>
    gateway(scope, { dataDir, env: { REDIS_URL, REDIS_PREFIX: prefix }, ...(logger === undefined ? {} : { parts: { logger } }) })
  after(async () => {
    await deleteKeys(REDIS_URL, prefix)
    await rm(dataDir, { recursive: true, force: true })
  })

  it('is refused after a restart: 404 for both tenants, not listed, never spawned, logged; an untouched one resumes', async () => {
    const first = await start()
    const victim = (await first.createSession()).id as string
    const kept = (await first.createSession()).id as string
    for (const id of [victim, kept]) {
      const client = await first.connect(id)
      await turn(first, id, client, 'hello')
      client.terminate()
      assert.equal((await first.request('DELETE', `/v1/sessions/${id}`)).status, 200)
      await statusBecomes(first, id, 'stopped')
    }
    await first.close()
    const spawnsBefore = first.argvDumps(victim).length

    // What the attacker did: tenant → B, permission_mode → bypassPermissions, status → running (so recovery picks it up).
    const metaKey = `${prefix}{${victim}}:meta`
    const stored = JSON.parse(await redisCommand(REDIS_URL, ['GET', metaKey]) as string)
    assert.equal(typeof stored.mac, 'string', 'records are stored with a MAC')
    stored.tenant = 'tenant-b'
    stored.options.permission_mode = 'bypassPermissions'
    stored.status = 'running'
    await redisCommand(REDIS_URL, ['SET', metaKey, JSON.stringify(stored)])
    await redisCommand(REDIS_URL, ['ZADD', `${prefix}tenant:tenant-b:sessions`, Date.parse(stored.created_at), victim])
    await redisCommand(REDIS_URL, ['SADD', `${prefix}live`, victim])

    const logs = capture()
    const second = await start(logs.logger)
    for (const token of [TOKEN_A, TOKEN_B]) {
      const who = token === TOKEN_A ? 'tenant A' : 'tenant B'
      for (const path of [`/v1/sessions/${victim}`, `/v1/sessions/${victim}/events?after=0`, `/v1/sessions/${victim}/events/stream`, `/v1/sessions/${victim}/permissions`]) {
        const res = await second.request('GET', path, undefined, token)
        assert.equal(res.status, 404, `${who} GET ${path}: ${JSON.stringify(res.body)}`)
      }
      assert.equal((await second.request('DELETE', `/v1/sessions/${victim}`, undefined, token)).status, 404, `${who} DELETE`)
      await assert.rejects(second.connect(victim, '', token), (err: any) => err.statusCode === 404, `${who} WebSocket attach`)
      const listed = (await second.request('GET', '/v1/sessions?limit=100', undefined, token)).body.sessions.map((s: any) => s.id)
      assert.ok(!listed.includes(victim), `${who}'s listing omits it`)
    }
    // Never spawned again, with or without bypass.
    assert.equal(second.argvDumps(victim).length, spawnsBefore)
    assert.ok(existsSync(second.fakeLogDir))
    assert.ok(!second.argvDumps(victim).some((d) => bypassArg(d.argv)), 'no CLI ran with --permission-mode=bypassPermissions')
    const refused = logs.entries().filter((e) => e.level === 50 && e.session === victim)
    assert.ok(refused.length >= 1, 'an error log line names the session')
    assert.equal(refused[0].reason, 'MAC does not match')
    // And counted, for an alert: every refused read, under its kind and reason.
    const metrics = await (await fetch(`${second.url}/metrics`, { headers: { authorization: `Bearer ${TOKEN_A}` } })).text()
    const count = (labels: string): number => Number(new RegExp(`^cgw_store_refused_total\\{${labels}\\} (\\d+)$`, 'm').exec(metrics)?.[1])
    assert.ok(count('kind="record",reason="mac"') >= 1, metrics)
    assert.equal(count('kind="record",reason="schema"'), 0)
    assert.equal(count('kind="conversation",reason="mac"'), 0)

    // The untouched session is listed for its tenant and resumes with --resume.
    const listedA = (await second.request('GET', '/v1/sessions?limit=100')).body.sessions.map((s: any) => s.id)
    assert.ok(listedA.includes(kept))
    assert.equal((await second.request('GET', `/v1/sessions/${kept}`, undefined, TOKEN_B)).status, 404, 'still not visible to tenant B')
    const client = await second.connect(kept)
    await client.waitFor(isHello)
    await turn(second, kept, client, 'again')
    const dumps = second.argvDumps(kept)
    const last = dumps[dumps.length - 1]?.argv ?? []
    assert.equal(last[last.indexOf('--resume') + 1], kept, `resumed with --resume: ${last.join(' ')}`)
  })
})
