/**
 * Debian's Chromium, headless, for the browser tests (driven by
 * playwright-core): found on PATH (CHROMIUM_PATH overrides), launched with
 * what a container without a GPU or a user namespace for its own sandbox needs.
 */
import { execFileSync } from 'node:child_process'
import { type Browser, chromium } from 'playwright-core'

/** Debian's chromium (or chromium-browser) on PATH; CHROMIUM_PATH overrides. */
export function chromiumPath (): string {
  if (process.env.CHROMIUM_PATH !== undefined) return process.env.CHROMIUM_PATH
  for (const name of ['chromium', 'chromium-browser', 'google-chrome']) {
    try {
      return execFileSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8' }).trim()
    } catch {
      // next
    }
  }
  throw new Error('no chromium on PATH: apt-get install chromium (.ci/run does), or set CHROMIUM_PATH')
}

/** A headless Chromium; the caller closes it. */
export async function launchChromium (): Promise<Browser> {
  return await chromium.launch({
    executablePath: chromiumPath(),
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync']
  })
}
