#!/usr/bin/env node
/**
 * `npm start`'s prestart: compiles TypeScript only when dist/ is older than
 * the sources, so the first start after `npm ci` (or after an edit) builds
 * once and every later start goes straight to `node dist/src/server.js`.
 * Running tsc each time cost 3–4 s even with nothing to do (20 s and more for
 * a full build on a busy 2-core machine).
 *
 * "Older" is by modification time: any file under src/ or config/, or
 * tsconfig.json or package-lock.json, newer than dist/.built (this script
 * writes it after each build it ran) means a build, and so does a missing
 * dist/src/server.js. Not tsc's own dist/.tsbuildinfo: a `tsc --noEmit`
 * writes that too, without building anything. The build itself stays
 * incremental.
 *
 * The web console (src/console, bundled with the client of src/client by
 * scripts/build-console.mjs) is checked apart: a file there, the console
 * build script or package-lock.json newer than dist/console/index.html (the
 * build writes it last), or no index.html, rebuilds the console. tsc does not
 * compile src/console, so an edit there does not rerun tsc.
 *
 * `--force` (what `npm run build` runs) builds both whatever their age, and
 * a console that fails to build fails it.
 */
import { execFileSync } from 'node:child_process'
import { readdirSync, statSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

/** The first source newer than the last build, or null when dist/ is current. A missing build is stale. */
export function staleSource (root) {
  let built
  try {
    built = statSync(join(root, 'dist', '.built')).mtimeMs
    statSync(join(root, 'dist', 'src', 'server.js'))
  } catch {
    return join(root, 'dist', '.built')
  }
  for (const file of ['tsconfig.json', 'package-lock.json']) {
    const path = join(root, file)
    if (mtime(path) > built) return path
  }
  for (const dir of ['src', 'config']) {
    const newer = newerIn(join(root, dir), built, new Set([join(root, 'src', 'console')]))
    if (newer !== null) return newer
  }
  return null
}

/** The first console source newer than the console's last build, or null when dist/console is current. */
export function staleConsoleSource (root) {
  const index = join(root, 'dist', 'console', 'index.html')
  const built = mtime(index)
  if (built === 0) return index
  for (const file of ['scripts/build-console.mjs', 'package-lock.json']) {
    const path = join(root, file)
    if (mtime(path) > built) return path
  }
  for (const dir of ['src/console', 'src/client']) {
    const newer = newerIn(join(root, dir), built)
    if (newer !== null) return newer
  }
  return null
}

function mtime (path) {
  try {
    return statSync(path).mtimeMs
  } catch {
    return 0
  }
}

function newerIn (dir, than, skip = new Set()) {
  if (skip.has(dir)) return null
  let entries
  try {
    entries = readdirSync(dir, { withFileTypes: true })
  } catch {
    return null
  }
  for (const entry of entries) {
    const path = join(dir, entry.name)
    if (entry.isDirectory()) {
      const newer = newerIn(path, than, skip)
      if (newer !== null) return newer
    } else if (mtime(path) > than) {
      return path
    }
  }
  return null
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const root = join(dirname(fileURLToPath(import.meta.url)), '..')
  // `npm run build` passes --force: build both, and leave the marker so the next `npm start` builds nothing.
  const force = process.argv.includes('--force')
  const marker = join(root, 'dist', '.built')
  const stale = force ? marker : staleSource(root)
  if (stale !== null) {
    const why = force ? 'npm run build' : stale === marker ? 'no build yet' : `${stale.slice(root.length + 1)} is newer than the last build`
    process.stderr.write(`building dist/ (${why})\n`)
    execFileSync(process.execPath, [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', join(root, 'tsconfig.json')], { cwd: root, stdio: 'inherit' })
    // Written after tsc succeeded (it throws otherwise), whatever tsc chose to rewrite.
    writeFileSync(marker, `${new Date().toISOString()}\n`)
  }
  const staleConsole = force ? join(root, 'src', 'console') : staleConsoleSource(root)
  if (staleConsole !== null) {
    process.stderr.write(`building dist/console (${force ? 'npm run build' : `${staleConsole.slice(root.length + 1)} is newer than the last build`})\n`)
    // Not fatal: the API runs without it (`/` answers 503), e.g. where dev dependencies (esbuild) were pruned.
    try {
      const { buildConsole } = await import('./build-console.mjs')
      await buildConsole({ root })
    } catch (err) {
      if (force) throw err // `npm run build` (the image's build) must not ship without it
      process.stderr.write(`the web console was not built: ${err instanceof Error ? err.message : String(err)}\n`)
    }
  }
}
