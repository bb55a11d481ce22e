/**
 * stop() asked twice (a DELETE during a shutdown, an idle timeout racing a
 * DELETE) is one stop ladder (src/cli/cli-process.ts): the second call gets
 * the first's promise, and the CLI's group gets one SIGTERM, not one per
 * call. A real child process (sh) that logs each SIGTERM it survives.
 */
import assert from 'node:assert/strict'
import { Writable } from 'node:stream'
import { test } from 'node:test'
import pino from 'pino'
import { CliProcess } from '../../src/cli/cli-process.js'

// Survives SIGTERM (says so on stderr); says when stdin closed and, half a second later, `later`.
const SCRIPT = [
  'trap \'echo "got SIGTERM" >&2\' TERM',
  'cat > /dev/null',
  'echo "stdin closed" >&2',
  'sleep 0.5',
  'echo later >&2',
  'while :; do sleep 1; done'
].join('\n')

test('stop() twice: the same promise, one SIGTERM, then SIGKILL', { timeout: 20_000 }, async () => {
  const waiting = new Map<string, () => void>()
  const heard = (text: string): Promise<void> => new Promise((resolve) => { waiting.set(text, resolve) })
  const sink = new Writable({
    write (chunk: Buffer, _enc, done) {
      for (const text of chunk.toString('utf8').split('\n')) {
        if (text === '') continue
        const entry = JSON.parse(text) as { stderr?: string }
        if (entry.stderr !== undefined) waiting.get(entry.stderr)?.()
      }
      done()
    }
  })
  const cli = new CliProcess(
    { command: 'sh', args: ['-c', SCRIPT], cwd: process.cwd(), env: { PATH: process.env.PATH ?? '/usr/bin:/bin' }, sessionId: 'stop-twice' },
    { onLine: () => {}, onOversize: () => {}, onExit: () => {} },
    { maxLineBytes: 1 << 16, stopTimeoutMs: 1500, logger: pino({ level: 'info' }, sink) }
  )
  const later = heard('later')
  const first = cli.stop()
  // The second call comes half a second into the first's wait: two ladders would SIGTERM 0.5 s apart.
  await later
  const second = cli.stop()
  const exit = await second
  assert.equal(exit.signal, 'SIGKILL')
  assert.deepEqual(exit.stderrTail.filter((l) => l === 'got SIGTERM'), ['got SIGTERM'], `stderr: ${exit.stderrTail.join(' | ')}`)
  assert.equal(second, first, 'the second stop() joins the first')
})
