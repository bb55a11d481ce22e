/**
 * Waiting for a child process to say something: servers started by tests
 * (redis-server) log the moment they are ready, so a test waits for that
 * line instead of polling a port.
 */
import type { ChildProcess } from 'node:child_process'

/**
 * Resolves once what `proc` writes to stdout or stderr from now on matches
 * `pattern`; rejects when it exits first, or after `timeoutMs`. Call it right
 * after spawning, before the line can have passed.
 */
export async function outputMatches (proc: ChildProcess, pattern: RegExp, timeoutMs: number, what: string): Promise<void> {
  let seen = ''
  await new Promise<void>((resolve, reject) => {
    const done = (err?: Error): void => {
      clearTimeout(timer)
      proc.stdout?.off('data', onData)
      proc.stderr?.off('data', onData)
      proc.off('exit', onExit)
      if (err === undefined) resolve()
      else reject(err)
    }
    const onData = (d: Buffer): void => {
      seen += d.toString()
      if (pattern.test(seen)) done()
    }
    const onExit = (code: number | null, signal: NodeJS.Signals | null): void => {
      done(new Error(`${what}: the process exited (${code ?? signal}) first: ${seen}`))
    }
    const timer = setTimeout(() => { done(new Error(`${what}: nothing matching ${String(pattern)} within ${timeoutMs} ms: ${seen}`)) }, timeoutMs)
    proc.stdout?.on('data', onData)
    proc.stderr?.on('data', onData)
    proc.once('exit', onExit)
  })
}
