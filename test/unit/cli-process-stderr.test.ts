/**
 * The CLI's stderr as the gateway reports it (src/cli/cli-process.ts): each
 * line logged as it comes, the last lines kept for the exit report, with a
 * character whose bytes arrive in two reads decoded intact and a last line
 * without a newline kept. A real child process (sh), no fakes.
 */
import assert from 'node:assert/strict'
import { Writable } from 'node:stream'
import { test } from 'node:test'
import pino from 'pino'
import { CliProcess } from '../../src/cli/cli-process.js'
import type { CliExit } from '../../src/cli/cli-handle.js'

/** A logger whose lines land in `lines`; `onLine` hears each one as it is written. */
function capture (onLine: (entry: Record<string, unknown>) => void): { logger: pino.Logger, lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = []
  const sink = new Writable({
    write (chunk: Buffer, _enc, done) {
      for (const text of chunk.toString('utf8').split('\n')) {
        if (text === '') continue
        const entry = JSON.parse(text) as Record<string, unknown>
        lines.push(entry)
        onLine(entry)
      }
      done()
    }
  })
  return { logger: pino({ level: 'info' }, sink), lines }
}

// Writes 25 numbered lines; then, in one write, line 26 and `split ` with the first byte of
// "é"; waits for a line on stdin (sent once line 26 was logged, so that write has been read),
// then writes the second byte, a newline and a last line without one, and exits 3.
const SCRIPT = [
  'i=1; while [ $i -le 25 ]; do printf "line %s\\n" $i >&2; i=$((i + 1)); done',
  'printf "line 26 \\303\\251\\nsplit \\303" >&2',
  'read go',
  'printf "\\251 done\\nno newline at the end" >&2',
  'exit 3'
].join('\n')

test('stderr: logged line by line, the last 20 kept for the exit, a character split across reads intact', async () => {
  let sawLine26: () => void = () => {}
  const line26 = new Promise<void>((resolve) => { sawLine26 = resolve })
  const { logger, lines } = capture((entry) => { if (entry.stderr === 'line 26 é') sawLine26() })
  let exit: CliExit | null = null
  const cli = new CliProcess(
    { command: 'sh', args: ['-c', SCRIPT], cwd: process.cwd(), env: { PATH: process.env.PATH ?? '/usr/bin:/bin' }, sessionId: 'stderr-test' },
    { onLine: () => {}, onOversize: () => {}, onExit: (e) => { exit = e } },
    { maxLineBytes: 1 << 20, stopTimeoutMs: 2000, logger }
  )
  // `split ` and the first byte of "é" came with line 26, in one write: the rest comes in a read of its own.
  await line26
  assert.equal(cli.write('go'), true)
  const ended = await cli.stop()
  assert.equal(ended.code, 3)
  assert.deepEqual(exit, ended)
  const expectedTail = [...Array.from({ length: 17 }, (_, i) => `line ${i + 9}`), 'line 26 é', 'split é done', 'no newline at the end']
  assert.deepEqual(ended.stderrTail, expectedTail)
  const logged = lines.filter((l) => l.msg === 'cli stderr')
  assert.equal(logged.length, 28)
  assert.ok(logged.every((l) => l.session === 'stderr-test'), 'each stderr line names its session')
  assert.deepEqual(logged.slice(-3).map((l) => l.stderr), expectedTail.slice(-3))
  assert.ok(lines.some((l) => l.msg === 'cli exited' && l.code === 3 && l.session === 'stderr-test'))
})
