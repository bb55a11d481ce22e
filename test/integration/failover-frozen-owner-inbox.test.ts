/**
 * An owner frozen (SIGSTOP) past its lease wakes with client frames that
 * arrived meanwhile: a message its own client sent (in its socket buffer),
 * or one routed from another node (in its inbox, which that node has
 * meanwhile handed back to where the session resumed). Another node holds
 * the lease by then: the frames must not reach the woken node's CLI, whose
 * tools would act for a turn nobody stores (and the message run twice, once
 * its client sends it again where the session moved). Real gateway processes
 * on one Redis; the fake CLI's `run` appends a line to a file, so each time a
 * message runs is counted, and its stdin log shows what each CLI was given.
 */
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { isHello, isResult } from '../support/frames.js'
import { eventually, processAlive } from '../support/gateway.js'
import { type GatewayNode, type GatewayNodes, isLost, startNodes, takeOver } from '../support/gateway-nodes.js'
import { REDIS_URL } from '../support/redis-server.js'


describe('a frozen owner that wakes with a routed message in its inbox', { timeout: 60_000 }, () => {
  let cluster: GatewayNodes
  const dir = mkdtempSync(join(tmpdir(), 'cgw-frozen-inbox-'))
  // A fenced CLI that takes its time to go (as one busy in a tool does) reads what it was last written.
  before(async () => { cluster = await startNodes({ count: 2, redisUrl: REDIS_URL, concurrent: true, env: { CLAUDE_ARGS_EXTRA: `--fake-log-dir ${join(dir, 'log')} --fake-mode ignore-sigterm` } }) })
  /** The user prompts the session's CLIs, on any node, read on stdin, in order. */
  const promptsGiven = (id: string): string[] => readFileSync(join(dir, 'log', `${id}.stdin.ndjson`), 'utf8').split('\n')
    .filter((l) => l.includes('"user"')).map((l) => String(JSON.parse(l).message.content))
  after(async () => {
    await cluster.close()
    rmSync(dir, { recursive: true, force: true })
  })

  it('a message its own client sent while it was frozen is refused, not run: sent again where the session moved, it runs once', async () => {
    const [a, b] = cluster.nodes as [GatewayNode, GatewayNode]
    const created = await a.create()
    const holder = await a.connect(created.id, 'after=0')
    await holder.waitFor(isHello)
    const onB = await b.connect(created.id, 'after=0&role=observer')
    await onB.waitFor(isHello)
    holder.sendUser('echo before the freeze')
    await holder.waitFor(isResult)
    const oldPid = (await a.session(created.id)).body.pid as number
    const marker = join(dir, 'ran-local')
    const message = { type: 'user', uuid: randomUUID(), message: { role: 'user', content: `run echo ran >> ${marker}` } }
    a.child.kill('SIGSTOP')
    try {
      holder.send(message)
      await onB.waitFor(isLost, 20_000)
    } finally {
      a.child.kill('SIGCONT')
    }
    assert.equal(await holder.waitClose(15_000), 1012)
    await eventually(() => !processAlive(oldPid), 10_000, 'the fenced CLI to be stopped')
    // The client never saw its message recorded: it sends it again where it reconnects.
    const last = Math.max(...holder.frames.filter((f) => typeof f.seq === 'number').map((f) => f.seq as number))
    const again = await b.connect(created.id, `after=${last}`)
    await again.waitFor(isHello)
    again.send(message)
    await again.waitFor(isResult, 15_000)
    assert.equal(readFileSync(marker, 'utf8'), 'ran\n', 'the message ran once')
    assert.deepEqual(promptsGiven(created.id).filter((text) => text.startsWith('run ')), [message.message.content], 'one CLI was given the message')
  })

  it('does not run it on its fenced CLI: the message runs once, where the session resumed', async () => {
    const [a, b] = cluster.nodes as [GatewayNode, GatewayNode]
    const created = await a.create()
    const onA = await a.connect(created.id, 'after=0&role=observer')
    await onA.waitFor(isHello)
    const onB = await takeOver(b, created.id)
    onB.sendUser('echo before the freeze')
    await onB.waitFor(isResult)
    const oldPid = (await a.session(created.id)).body.pid as number
    const marker = join(dir, 'ran')
    a.child.kill('SIGSTOP')
    try {
      const from = onB.frames.length
      onB.sendUser(`run echo ran >> ${marker}`)
      // A never confirms it; B records the session lost and runs the message on a resumed CLI.
      await onB.waitFor(isLost, 20_000, from)
      await onB.waitFor(isResult, 20_000, from)
      assert.equal(readFileSync(marker, 'utf8'), 'ran\n')
    } finally {
      a.child.kill('SIGCONT')
    }
    // A wakes: fenced, it stops its CLI and closes its clients.
    assert.equal(await onA.waitClose(15_000), 1012)
    await eventually(() => !processAlive(oldPid), 10_000, 'the fenced CLI to be stopped')
    assert.deepEqual(promptsGiven(created.id).filter((text) => text.startsWith('run ')), [`run echo ran >> ${marker}`], 'one CLI was given the message')
    assert.equal(readFileSync(marker, 'utf8'), 'ran\n', 'the message ran once, not again on the woken node\'s CLI')
  })
})
