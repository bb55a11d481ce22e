/**
 * The web console (src/console, built into dist/console by
 * scripts/build-console.mjs): `GET /` is its page, `/console/<file>` its script
 * and styles (a fixed list: nothing else in the folder is ever served).
 * Public like /healthz: the files hold no data, and the page asks for a token
 * before it calls the API. Every answer carries a strict Content-Security-Policy
 * (no inline script or style, connections to this origin only), so text a
 * session prints can never run as script even if a rendering bug let it into
 * the page. A gateway whose console was not built answers `/` with 503 and
 * says how to build it; the API is unaffected.
 */
import { existsSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import fastifyStatic from '@fastify/static'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { ZodTypeProvider } from 'fastify-type-provider-zod'
import { z } from 'zod'
import { errorResponses } from './schemas.js'

export interface ConsoleRoutesOptions {
  /** The built console (index.html, app.js, styles.css); default: dist/console of this package. */
  dir?: string
}

/** Where assets are served from; index.html refers to them as `/console/<file>?v=<hash>`. */
export const CONSOLE_PREFIX = '/console/'

/** What scripts/build-console.mjs writes besides index.html: all that `/console/` serves. */
const ASSETS = new Set(['app.js', 'app.js.map', 'styles.css', 'styles.css.map'])

/** An asset URL carrying its content hash. */
const VERSIONED = /^\/console\/[^?]+\?v=[0-9a-f]{8,}$/

/** A Host value safe to name in the CSP (anything else falls back to 'self' alone). */
const PLAIN_HOST = /^[a-z0-9.-]+(?::\d{1,5})?$|^\[[0-9a-f:.]+\](?::\d{1,5})?$/i

export async function consoleRoutes (fastify: FastifyInstance, options: ConsoleRoutesOptions): Promise<void> {
  const dir = options.dir ?? defaultConsoleDir()
  const app = fastify.withTypeProvider<ZodTypeProvider>()

  // Encapsulated (no fastify-plugin): these headers go on the console's answers only.
  app.addHook('onSend', async (request, reply) => {
    void reply.header('content-security-policy', contentSecurityPolicy(request))
    void reply.header('x-content-type-options', 'nosniff')
    void reply.header('x-frame-options', 'DENY')
    void reply.header('referrer-policy', 'no-referrer')
  })

  // Only its sendFile: the routes below name what is served, so nothing else in the folder ever is.
  await app.register(fastifyStatic, {
    root: dir,
    serve: false,
    dotfiles: 'ignore',
    suppressWarning: true, // a missing build is answered at `/` with 503
    cacheControl: false,
    // index.html names each asset with its content hash (`?v=`): a versioned URL never changes, so it may be
    // kept; anything else (index.html itself, which names the current versions) is revalidated every time.
    setHeaders: (reply) => {
      void reply.header('cache-control', VERSIONED.test(reply.request.url) ? 'public, max-age=31536000, immutable' : 'no-cache')
    }
  })

  app.get('/', {
    schema: {
      tags: ['console'],
      summary: 'The web console (docs/CONSOLE.md); 503 text/plain when it was not built',
      security: [],
      response: { 200: { description: 'The console page', content: { 'text/html': { schema: z.string() } } }, ...errorResponses('forbidden_origin', 'forbidden_host') }
    }
  }, async (_request, reply) => {
    if (!existsSync(join(dir, 'index.html'))) {
      // Not in the document's error table (no JSON body): a note for whoever opens the page.
      return (reply as FastifyReply).code(503).type('text/plain; charset=utf-8').header('cache-control', 'no-store')
        .send('The web console is not built. Run `npm run build` (or `npm run build:console`), then reload.\n')
    }
    return reply.sendFile('index.html', dir)
  })

  app.get(`${CONSOLE_PREFIX}:file`, {
    schema: {
      tags: ['console'],
      summary: 'The web console\'s script and styles (and their source maps)',
      security: [],
      params: z.object({ file: z.string() }),
      response: {
        200: { description: 'The file', content: { 'text/javascript': { schema: z.string() }, 'text/css': { schema: z.string() } } },
        ...errorResponses('not_found', 'forbidden_origin', 'forbidden_host')
      }
    }
  }, async (request, reply) => {
    const { file } = request.params
    if (!ASSETS.has(file)) return reply.callNotFound()
    return reply.sendFile(file, dir)
  })
}

/** Same origin only: scripts, styles, images and API calls; WebSockets to this host. */
function contentSecurityPolicy (request: FastifyRequest): string {
  const host = request.headers.host ?? ''
  const sockets = PLAIN_HOST.test(host) ? ` ws://${host} wss://${host}` : ''
  return [
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self' data:",
    `connect-src 'self'${sockets}`,
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'"
  ].join('; ')
}

/** dist/console of this package, whether this file runs from src/ (tsx) or dist/src/ (built). */
function defaultConsoleDir (): string {
  let dir = dirname(fileURLToPath(import.meta.url))
  while (!existsSync(join(dir, 'package.json'))) {
    const parent = dirname(dir)
    if (parent === dir) break
    dir = parent
  }
  return join(dir, 'dist', 'console')
}
