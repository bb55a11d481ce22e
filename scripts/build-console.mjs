#!/usr/bin/env node
/**
 * Builds the web console (src/console) into dist/console: app.js (one esbuild
 * bundle of the console and the typed client it uses), styles.css, and
 * index.html naming both with a hash of their content (`/console/app.js?v=…`),
 * so a browser may keep an asset forever and still gets a new one after each
 * change (src/routes/console.ts sets the cache headers). index.html is
 * written last: its presence is what says "built" (the gateway's `/` and
 * scripts/build-if-stale.mjs read it). esbuild strips types without checking
 * them; `npm run typecheck` checks src/console with its own tsconfig (DOM lib).
 */
import { createHash } from 'node:crypto'
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { build } from 'esbuild'

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..')

/**
 * Builds the console. `outDir` defaults to `<root>/dist/console`; returns the
 * files written (names relative to it).
 * @param {{ root?: string, outDir?: string, minify?: boolean }} [options]
 * @returns {Promise<{ outDir: string, files: string[] }>}
 */
export async function buildConsole (options = {}) {
  const root = options.root ?? ROOT
  const src = join(root, 'src', 'console')
  const outDir = options.outDir ?? join(root, 'dist', 'console')
  const result = await build({
    entryPoints: { app: join(src, 'main.ts'), styles: join(src, 'styles.css') },
    bundle: true,
    format: 'esm',
    platform: 'browser',
    target: ['es2022'],
    minify: options.minify ?? true,
    sourcemap: 'linked',
    legalComments: 'none',
    write: false,
    outdir: outDir,
    logLevel: 'warning'
  })
  rmSync(join(outDir, 'index.html'), { force: true }) // "not built" until index.html is back
  mkdirSync(outDir, { recursive: true })
  const versions = {}
  const files = []
  for (const file of result.outputFiles) {
    writeFileSync(file.path, file.contents)
    const name = file.path.slice(outDir.length + 1)
    files.push(name)
    versions[name] = createHash('sha256').update(file.contents).digest('hex').slice(0, 12)
  }
  const template = readFileSync(join(src, 'index.html'), 'utf8')
  const html = template.replace(/\{\{(app\.js|styles\.css)\}\}/g, (_, name) => {
    if (versions[name] === undefined) throw new Error(`index.html names ${name}, which the build did not write`)
    return `/console/${name}?v=${versions[name]}`
  })
  writeFileSync(join(outDir, 'index.html'), html)
  files.push('index.html')
  return { outDir, files }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { outDir, files } = await buildConsole()
  process.stderr.write(`console built in ${outDir.slice(ROOT.length + 1)}: ${files.join(', ')}\n`)
}
