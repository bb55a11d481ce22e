/**
 * Entry point: loads the configuration, builds the app, listens, and shuts
 * down cleanly on SIGTERM/SIGINT (clients closed with 1012, every CLI
 * stopped, the store flushed, exit 0). SIGHUP reads the configuration again
 * and applies its credentials (tokens, JWT keys, the shared and the tenants'
 * API keys: their `_FILE`s are read anew); a configuration that is not valid
 * changes nothing. That is for a gateway without a controlling terminal (a
 * service, a container without a tty): in a terminal, SIGHUP is the
 * terminal's hangup and keeps the kernel's default action, so closing the
 * window `npm start` runs in ends the gateway at once, as it always did (a
 * handler could not be relied on: a log line written to the dead terminal
 * first holds the process for ever). Its spawn helper, seeing it go, ends
 * the CLIs. With CREDENTIAL_FILES_POLL_MS, a change to a secret's `_FILE`
 * reloads the same way, terminal or not (config/files-watch.ts).
 */
import { closeSync, openSync } from 'node:fs'
import { buildApp } from './app.js'
import { ConfigError, SECRET_FILE_VARIABLES, loadConfig } from './config.js'
import { FilesWatch } from './config/files-watch.js'
import { listenError } from './config/values.js'
import { MAX_TIMER_MS } from './config/setting-rules.js'

async function main (): Promise<void> {
  let config
  try {
    config = loadConfig()
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${err.message}\n`)
      process.exit(2)
    }
    throw err
  }

  const app = await buildApp(config)

  let closing = false
  let watch: FilesWatch | null = null
  const shutdown = (signal: string): void => {
    if (closing) return
    closing = true
    watch?.close()
    app.log.info({ signal }, 'shutting down')
    // Each part fits a timer (setting-rules.ts), their sum may not: past MAX_TIMER_MS it would fire at once.
    const force = setTimeout(() => {
      app.log.error('shutdown took too long; exiting')
      process.exit(1)
    }, Math.min(config.shutdownGraceMs + 3 * config.cliStopTimeoutMs + 5000, MAX_TIMER_MS))
    force.unref()
    app.close().then(() => process.exit(0), (err: unknown) => {
      app.log.error({ err }, 'shutdown failed')
      process.exit(1)
    })
  }
  process.on('SIGTERM', () => shutdown('SIGTERM'))
  process.on('SIGINT', () => shutdown('SIGINT'))
  // One reload at a time: a second SIGHUP during one waits for it, then reads the files again.
  let reloading: Promise<void> = Promise.resolve()
  const reload = (why: string): void => {
    reloading = reloading.then(async () => {
      if (closing) return
      try {
        await app.gateway.reloadCredentials(loadConfig())
      } catch (err) {
        app.log.error({ err: err instanceof ConfigError ? err.message : err }, `${why}: credentials unchanged`)
      }
    })
  }
  if (!hasTerminal()) process.on('SIGHUP', () => { reload('SIGHUP') })
  if (config.credentialFilesPollMs > 0) {
    const paths = SECRET_FILE_VARIABLES.map((name) => process.env[`${name}_FILE`]).filter((path): path is string => path !== undefined && path !== '')
    watch = new FilesWatch({
      paths,
      intervalMs: config.credentialFilesPollMs,
      onChange: (changed) => {
        app.log.info({ files: changed }, 'secret files changed: reloading credentials')
        reload('secret files changed')
      }
    })
    watch.start()
  }

  let address: string
  try {
    address = await app.listen({ port: config.port, host: config.host })
  } catch (err) {
    throw listenError('PORT', config.host, config.port, err) ?? err
  }
  const generated = app.gateway.generatedToken
  // Plain lines on the terminal, apart from the JSON log: what a newcomer needs first.
  process.stderr.write(`\nConsole: ${address}/\n`)
  if (generated !== null) {
    // Printed once, to the terminal only (never logged): the operator's key for this run, alone on its line.
    process.stderr.write(`GATEWAY_TOKENS is unset; this run's token (tenant "default"), for the console's sign-in or "Authorization: Bearer <token>":\n\n${generated}\n\n`)
  }
}

/** Whether this process has a controlling terminal (its /dev/tty opens). */
function hasTerminal (): boolean {
  try {
    closeSync(openSync('/dev/tty', 'r'))
    return true
  } catch {
    return false
  }
}

main().catch((err: unknown) => {
  if (err instanceof ConfigError) { // e.g. SANDBOX=bwrap cannot run here (found by the start-up probe)
    process.stderr.write(`${err.message}\n`)
    process.exit(2)
  }
  process.stderr.write(`gateway failed to start: ${err instanceof Error ? err.stack : String(err)}\n`)
  process.exit(1)
})
