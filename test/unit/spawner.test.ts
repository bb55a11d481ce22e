/**
 * CLIs started through the spawn helper (src/cli/spawner.ts and
 * spawn-helper.ts, CLI_SPAWN=helper) behave as CLIs the gateway spawns
 * itself: every byte they write, also before the pipes were handed over,
 * arrives; lines written before they run reach them in order; exits, start
 * failures and stops are reported as CliProcess reports them. And the
 * helper's own end: a helper that dies costs no running CLI, and a closed
 * spawner leaves no process. Real helper, real child processes.
 */
import assert from 'node:assert/strict'
import { readFileSync, readdirSync, readlinkSync } from 'node:fs'
import { after, describe, it } from 'node:test'
import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import pino from 'pino'
import type { CliCallbacks, CliExit } from '../../src/cli/cli-handle.js'
import { CliProcess, forkHelper } from '../../src/cli/cli-process.js'
import { type HelperChannel, Spawner } from '../../src/cli/spawner.js'
import { parentOf, processAlive } from '../support/gateway.js'
import { Waiters, eventually, within } from '../support/waiters.js'

const logger = pino({ level: 'silent' })
const env = { PATH: process.env.PATH ?? '/usr/bin:/bin' }
setFlagsFromString('--expose-gc')
const gc = runInNewContext('gc') as () => void

interface Run {
  cli: CliProcess
  lines: string[]
  events: string[]
  exit: Promise<CliExit>
  startFailed: Promise<Error>
  /** Resolves once `check` holds, re-checked at each of the CLI's callbacks (a line, its start, its exit). */
  until: (check: () => boolean, what: string) => Promise<boolean>
}

describe('the spawn helper', { timeout: 30_000 }, () => {
  let helper = null as HelperChannel | null
  const spawner = new Spawner({
    logger,
    stopTimeoutMs: 500,
    fork: (path, args, execArgv) => { helper = forkHelper(path, args, execArgv) as unknown as HelperChannel; return helper }
  })
  after(async () => { await spawner.close() })

  function run (script: string, extra: Partial<CliCallbacks> = {}, command = 'sh', args = ['-c', script]): Run {
    const lines: string[] = []
    const events: string[] = []
    const waiters = new Waiters()
    const seen = (event: string): void => { events.push(event); waiters.wake() }
    let exited: (exit: CliExit) => void = () => {}
    let failed: (err: Error) => void = () => {}
    const exit = new Promise<CliExit>((resolve) => { exited = resolve })
    const startFailed = new Promise<Error>((resolve) => { failed = resolve })
    const cli = new CliProcess({ command, args, cwd: process.cwd(), env, sessionId: 'spawner-test' }, {
      onLine: (line) => { lines.push(line); seen('line') },
      onOversize: () => {},
      onExit: (e) => { seen('exit'); exited(e) },
      onStart: () => { seen('start') },
      onStartFailed: (err) => { seen('start_failed'); failed(err) },
      ...extra
    }, { maxLineBytes: 1 << 16, stopTimeoutMs: 500, logger, spawner })
    const until = async (check: () => boolean, what: string): Promise<boolean> =>
      await waiters.until(() => check(), 5000, what, () => `${lines.length} lines, events ${events.filter((e) => e !== 'line').join(', ')}`)
    return { cli, lines, events, exit, startFailed, until }
  }

  /**
   * With `r`'s CLI (`yes` printing `line`) paused: it blocks in its write, and
   * no line is read while it is; resumed, the rest arrives, no line lost or
   * cut. Stops it. The lines read before the pause held.
   */
  async function heldThenResumed (r: Run, line: string): Promise<number> {
    const pid = Number(r.cli.pid)
    // Blocked in its write once the socket between them is full: a state without an event, polled.
    await eventually(() => readFileSync(`/proc/${pid}/wchan`, 'utf8') === 'sock_alloc_send_pskb', 5000, 'yes blocked writing its stdout')
    const held = r.lines.length
    // Turns of the event loop, each polling for I/O: a stream still flowing would deliver the waiting bytes.
    for (let i = 0; i < 20; i++) await new Promise((resolve) => setImmediate(resolve))
    assert.equal(r.lines.length, held, 'no line read while paused')
    r.cli.resumeOutput()
    await r.until(() => r.lines.length > held + 10_000, 'lines again after resumeOutput')
    assert.ok(r.lines.every((l) => l === line), 'no line lost or cut at the pause')
    await r.cli.stop()
    return held
  }

  it('pauseOutput stops reading stdout, so the CLI waits on its own writes; resumeOutput lets the rest through, none lost', async () => {
    const line = '{"type":"assistant","message":{"content":"the same line, as fast as yes prints it"}}'
    const r = run('', {}, 'yes', [line])
    await r.until(() => r.lines.length > 0, 'the first lines')
    r.cli.pauseOutput()
    await heldThenResumed(r, line)
  })

  it('pauseOutput asked before the helper hands over the pipes holds once they arrive: nothing read until resumeOutput', async () => {
    const line = '{"type":"assistant","message":{"content":"printed before and after the pipes arrive"}}'
    const r = run('', {}, 'yes', [line])
    assert.equal(r.cli.pending, true, 'the helper has not answered yet')
    r.cli.pauseOutput()
    await r.until(() => r.events.includes('start'), 'the start')
    assert.equal(await heldThenResumed(r, line), 0, 'no line read before the pause took hold either')
  })

  it('hands over the pipes with every byte the CLI wrote before, and queues what is written before it runs', async () => {
    // Writes at once, before the gateway holds its pipes, then echoes stdin and exits 3.
    const r = run('echo early; echo "to stderr" >&2; while read l; do echo "got $l"; done; exit 3')
    assert.equal(r.cli.pending, true, 'the helper has not answered yet')
    assert.equal(r.cli.pid, undefined)
    assert.equal(r.cli.write('one'), true)
    assert.equal(r.cli.write('two'), true)
    await r.until(() => r.events.includes('start'), 'the start')
    assert.equal(r.cli.pending, false)
    const pid = Number(r.cli.pid) // (narrowed to undefined by the assertion above)
    assert.ok(Number.isInteger(pid) && processAlive(pid))
    assert.equal(parentOf(pid), helper?.pid, 'started by the helper, not by this process')
    assert.equal(r.cli.write('three'), true)
    const stopped = r.cli.stop()
    const exit = await r.exit
    assert.equal((await stopped).code, 3)
    assert.deepEqual(r.lines, ['early', 'got one', 'got two', 'got three'])
    assert.deepEqual(exit.stderrTail, ['to stderr'])
    assert.equal(exit.code, 3)
    assert.deepEqual([r.events[0], r.events[r.events.length - 1]], ['start', 'exit'])
  })

  it('keeps nothing of a running CLI\'s spawn spec (its arguments and environment) once it runs', async () => {
    let started: () => void = () => {}
    const start = new Promise<void>((resolve) => { started = resolve })
    let exited: (exit: CliExit) => void = () => {}
    const exit = new Promise<CliExit>((resolve) => { exited = resolve })
    // Made in a function of its own, so that the test holds only a weak reference to the spec.
    const [cli, ref] = ((): [CliProcess, WeakRef<object>] => {
      const spec = { command: 'sh', args: ['-c', 'read l; exit 4'], cwd: process.cwd(), env: { ...env, BIG: 'x'.repeat(4096) }, sessionId: 'spawner-spec' }
      const handle = new CliProcess(spec, { onLine: () => {}, onOversize: () => {}, onExit: (e) => { exited(e) }, onStart: () => { started() } },
        { maxLineBytes: 1 << 16, stopTimeoutMs: 500, logger, spawner })
      return [handle, new WeakRef(spec)]
    })()
    await start
    gc()
    const kept = ref.deref() !== undefined
    assert.ok(cli.pid !== undefined && processAlive(cli.pid), 'the CLI still runs')
    cli.write('go')
    assert.equal((await exit).code, 4)
    assert.equal(kept, false, 'the spawn spec of a running CLI is still reachable')
  })

  it('gives the CLI no descriptor of the helper\'s (its channel to the gateway carries every session\'s start): only its three pipes', async () => {
    const r = run('read line')
    await r.until(() => r.events.includes('start'), 'the start')
    const pid = r.cli.pid as number
    const targets = (p: number | 'self'): Map<string, string> => new Map(readdirSync(`/proc/${p}/fd`).map((fd) => {
      try { return [fd, readlinkSync(`/proc/${p}/fd/${fd}`)] } catch { return [fd, ''] }
    }))
    // What this test process itself inherited (from the shell that ran it) is inherited alike; not the helper's.
    const inherited = new Set(targets('self').values())
    const own = [...targets(pid)].filter(([, target]) => !inherited.has(target)).map(([fd]) => fd).sort()
    assert.deepEqual(own, ['0', '1', '2'])
    const helperFiles = new Set([...targets(helper?.pid as number).values()].filter((t) => !inherited.has(t)))
    assert.deepEqual([...targets(pid).values()].filter((t) => helperFiles.has(t)), [], 'nothing the helper holds')
    void r.cli.stop()
    await r.exit
  })

  it('reports CLIs that exit at once, their pipes closed before the helper said they run', async () => {
    // Empty stderr closes as soon as the process is gone, often before the 'spawned' message.
    const runs = Array.from({ length: 20 }, (_, i) => run(i % 2 === 0 ? 'exit 7' : 'echo "last line, no newline" | tr -d "\\n"; exit 7'))
    const exits = await Promise.all(runs.map((r) => r.exit))
    assert.deepEqual(exits.map((e) => e.code), runs.map(() => 7))
    assert.deepEqual(runs.map((r) => r.lines), runs.map((_, i) => i % 2 === 0 ? [] : ['last line, no newline']))
  })

  it('ends, itself, what an exited CLI left in its group, so its tools never outlive a gateway that died as the CLI exited', async () => {
    // Straight from the spawner, without CliProcess (whose exit ladder would do the same in the gateway).
    const child = spawner.spawn({ command: 'sh', args: ['-c', 'sleep 1000 >/dev/null 2>&1 & echo $!'], cwd: process.cwd(), env })
    const exited = new Promise((resolve) => child.once('exit', resolve))
    let out = ''
    const printed = new Promise<string>((resolve) => {
      child.once('spawn', () => {
        child.stdout?.on('data', (d: Buffer) => {
          out += d.toString('utf8')
          const pid = /^(\d+)\n/.exec(out)?.[1]
          if (pid !== undefined) resolve(pid)
        })
      })
    })
    await exited
    const sleep = Number(await within(printed, 5000, 'the background pid'))
    await eventually(() => !processAlive(sleep), 5000, 'the helper to end the background sleep')
  })

  it('reports a command that cannot run as spawn() does: started, then exited with the error', async () => {
    const r = run('', {}, '/nonexistent/claude', [])
    const exit = await r.exit
    assert.match(exit.spawnError ?? '', /ENOENT/)
    assert.deepEqual(r.events, ['start', 'exit'])
    assert.equal(r.cli.write('late'), false)
  })

  it('reports a start that spawn() refuses outright (E2BIG) through onStartFailed, with no exit', async () => {
    // One environment string over Linux's 128 KiB per-string limit: execve fails with E2BIG.
    let failed: (err: Error) => void = () => {}
    const big = new CliProcess({ command: 'true', args: [], cwd: process.cwd(), env: { ...env, HUGE: 'x'.repeat(200 * 1024) }, sessionId: 'e2big' }, {
      onLine: () => {}, onOversize: () => {}, onExit: () => { assert.fail('no exit after a failed start') }, onStartFailed: (err) => { failed(err) }
    }, { maxLineBytes: 1 << 16, stopTimeoutMs: 500, logger, spawner })
    const err = await new Promise<Error>((resolve) => { failed = resolve })
    assert.match(err.message, /E2BIG/)
    assert.equal((await big.stop()).spawnError, err.message)
  })

  it('keeps a running CLI when the helper dies, reports its exit once its pipes close, and starts the next CLI with a new helper', async () => {
    const r = run('while read l; do echo "got $l"; done')
    await r.until(() => r.events.includes('start'), 'the start')
    const first = helper as HelperChannel
    const gone = new Promise((resolve) => first.once('exit', resolve))
    first.kill('SIGKILL')
    await gone
    assert.ok(processAlive(r.cli.pid as number), 'the CLI outlives its helper')
    r.cli.write('still here')
    await r.until(() => r.lines.includes('got still here'), 'the CLI to answer')
    void r.cli.stop()
    const exit = await r.exit
    assert.equal(exit.code, null, 'the exit status went with the helper')

    const next = run('echo again')
    assert.equal((await next.exit).code, 0)
    assert.deepEqual(next.lines, ['again'])
    assert.notEqual(helper, first, 'a new helper')
  })

  it('ends, when closed, the helper and every CLI it still runs', async () => {
    const own = new Spawner({ logger, stopTimeoutMs: 300, fork: forkHelper })
    let pid = 0
    let started: () => void = () => {}
    const start = new Promise<void>((resolve) => { started = resolve })
    const exited = new Promise<CliExit>((resolve) => {
      const cli = new CliProcess({ command: 'sh', args: ['-c', 'trap "" TERM; sleep 100 & wait'], cwd: process.cwd(), env, sessionId: 'close' }, {
        onLine: () => {}, onOversize: () => {}, onExit: resolve, onStart: () => { pid = cli.pid as number; started() }
      }, { maxLineBytes: 1 << 16, stopTimeoutMs: 300, logger, spawner: own })
    })
    await start
    await own.close()
    // It ignores SIGTERM (and so does its sleep): the helper's SIGKILL ended it, and the
    // helper exited at once, so the exit is known by the pipes closing, without a status.
    const exit = await exited
    assert.equal(processAlive(pid), false)
    assert.deepEqual([exit.code, exit.signal], [null, null])
    const late = await new Promise<string>((resolve) => {
      const cli = new CliProcess({ command: 'true', args: [], cwd: process.cwd(), env, sessionId: 'late' }, {
        onLine: () => {}, onOversize: () => {}, onExit: (e) => { resolve(e.spawnError ?? '') }
      }, { maxLineBytes: 1 << 16, stopTimeoutMs: 300, logger, spawner: own })
      void cli
    })
    assert.match(late, /closing/)
  })
})
