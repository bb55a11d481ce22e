/**
 * Ends what a test file started when the file's process ends early. The test
 * runner ends a file that outlives `--test-timeout` with SIGTERM (Ctrl-C
 * sends SIGINT), and a signal's default action skips 'exit' listeners: the
 * Redis servers, gateway processes and CLIs the file started were left
 * running. Once a hook is registered, the two signals become
 * `process.exit`, so the hooks run.
 *
 * Hooks run inside 'exit', which allows synchronous work only: they send
 * signals, they cannot wait for the processes to end.
 */

const hooks = new Set<() => void>()
let installed = false

/** Runs `hook` when this process exits, however it was asked to (see above). */
export function onTestExit (hook: () => void): void {
  install()
  hooks.add(hook)
}

function install (): void {
  if (installed) return
  installed = true
  process.once('exit', () => {
    for (const hook of hooks) {
      try { hook() } catch { /* the other hooks still run */ }
    }
  })
  // Conventional exit codes of a process ended by the signal (128 + its number).
  process.once('SIGTERM', () => process.exit(143))
  process.once('SIGINT', () => process.exit(130))
}
