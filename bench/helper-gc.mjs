/**
 * Preloaded into the bench's gateway (`--import`), and so into its spawn
 * helper, which keeps the gateway's module-loader flags (src/cli/spawner.ts).
 * In the helper only, with BENCH_HELPER_GC_DIR set: on SIGUSR2 it runs a full
 * GC, then writes how many it has run to <dir>/<pid> (0 once it can be
 * asked). bench/lib.ts waits for that before reading the helper's RSS, so the
 * helper is measured after a GC as the gateway is (gateway-proc.mjs `stats`).
 * Read without one, the helper still held the garbage of the burst of CLI
 * starts just made, which V8's memory reducer gives back only about 8 s later
 * (docs/PERFORMANCE.md §24).
 */
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'

const dir = process.env.BENCH_HELPER_GC_DIR
if (dir !== undefined && /spawn-helper\.[jt]s$/.test(process.argv[1] ?? '')) {
  setFlagsFromString('--expose-gc')
  const gc = runInNewContext('gc')
  const file = join(dir, String(process.pid))
  let count = 0
  process.on('SIGUSR2', () => {
    gc()
    gc()
    writeFileSync(file, String(++count))
  })
  // Only now may it be signalled: SIGUSR2 would end a process without the handler.
  writeFileSync(file, '0')
}
