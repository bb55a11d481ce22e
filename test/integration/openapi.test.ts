/**
 * GET /openapi.json against the routes the gateway really has: every HTTP
 * route Fastify registered (read from `app.printRoutes`) is in the document
 * with its method, its path parameters and the error statuses it answers
 * with; what the document says about credentials is what the gateway does
 * without them; a created session has the documented shape. And requests
 * that break a route schema get the same 400 as before route schemas: the
 * error table's `bad_request` naming the first offending field, the message
 * zod gives for that schema.
 */
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { before, describe, it } from 'node:test'
import { errorTable } from '../../src/errors.js'
import { MAX_JSON_DEPTH } from '../../src/protocol/client-frames.js'
import { eventsQuery, listQuery, sessionOptions, wsQuery } from '../../src/protocol/session-options.js'
import { TOKEN_A, type TestGateway, gateway, suiteScope } from '../support/gateway.js'

interface Route { method: string, url: string }

/**
 * Routes from `printRoutes({ commonPrefix: false })`: one tree line per
 * segment (`│   └── /:id (GET, HEAD, DELETE)`), four characters per level.
 * HEAD routes are the ones Fastify adds for GETs; `*` OPTIONS is CORS preflight.
 */
function registeredRoutes (tree: string): Route[] {
  const routes: Route[] = []
  const stack: string[] = []
  for (const line of tree.split('\n')) {
    const match = /^(.*?)(?:├── |└── )(\S+)(?: \(([^)]*)\))?$/.exec(line)
    if (match === null) continue
    const depth = [...(match[1] as string)].length / 4
    const url = (depth === 0 ? '' : stack[depth - 1] ?? '') + (match[2] as string)
    stack[depth] = url
    stack.length = depth + 1
    for (const method of (match[3] ?? '').split(',').map((m) => m.trim()).filter((m) => m !== '')) {
      if (method === 'HEAD' || (method === 'OPTIONS' && url === '*')) continue
      routes.push({ method, url })
    }
  }
  return routes
}

const openapiPath = (url: string): string => url.replace(/:([A-Za-z0-9_]+)/g, '{$1}')
const pathParams = (url: string): string[] => [...url.matchAll(/:([A-Za-z0-9_]+)/g)].map((m) => m[1] as string)

/** `name: message` of the first issue, as routes/validate.ts built it before route schemas (parseOr400). */
function firstIssue (schema: { safeParse: (v: unknown) => { success: boolean, error?: { issues: Array<{ path: PropertyKey[], message: string }> } } }, value: unknown): string {
  const parsed = schema.safeParse(value)
  assert.equal(parsed.success, false, 'the example must break the schema')
  const issue = parsed.error?.issues[0]
  assert.ok(issue !== undefined)
  return `${issue.path.length === 0 ? '' : `${issue.path.join('.')}: `}${issue.message}`
}

describe('OpenAPI document', () => {
  let gw: TestGateway
  let doc: any
  let routes: Route[]
  const scope = suiteScope()
  before(async () => {
    gw = await gateway(scope)
    // Public: no credentials.
    const res = await fetch(`${gw.url}/openapi.json`)
    assert.equal(res.status, 200)
    assert.match(res.headers.get('content-type') ?? '', /^application\/json/)
    doc = await res.json()
    routes = registeredRoutes(gw.app.printRoutes({ commonPrefix: false }))
  })

  it('is OpenAPI 3 with the bearer scheme required by default, and tags', () => {
    assert.match(doc.openapi, /^3\./)
    assert.deepEqual(doc.components.securitySchemes.bearerAuth, { ...doc.components.securitySchemes.bearerAuth, type: 'http', scheme: 'bearer' })
    assert.deepEqual(doc.security, [{ bearerAuth: [] }])
    const tags = new Set(doc.tags.map((t: any) => t.name))
    for (const [path, ops] of Object.entries<any>(doc.paths)) {
      for (const [method, op] of Object.entries<any>(ops)) {
        for (const tag of op.tags ?? []) assert.ok(tags.has(tag), `${method} ${path}: tag ${tag} is declared`)
      }
    }
    // Every $ref points at a schema the document holds.
    for (const ref of JSON.stringify(doc).matchAll(/"\$ref":"#\/components\/schemas\/([^"]+)"/g)) {
      assert.ok(doc.components.schemas[ref[1] as string] !== undefined, `$ref ${ref[1]} resolves`)
    }
  })

  it('documents every registered route with its method and path parameters, and nothing else', () => {
    assert.ok(routes.length >= 12, `routes read from printRoutes: ${JSON.stringify(routes)}`)
    const documented = new Set<string>()
    for (const [path, ops] of Object.entries<any>(doc.paths)) {
      for (const method of Object.keys(ops)) documented.add(`${method.toUpperCase()} ${path}`)
    }
    for (const route of routes) {
      const key = `${route.method} ${openapiPath(route.url)}`
      assert.ok(documented.delete(key), `${key} is in /openapi.json (documented: ${[...documented].join(', ')})`)
      const op = doc.paths[openapiPath(route.url)][route.method.toLowerCase()]
      const inPath = (op.parameters ?? []).filter((p: any) => p.in === 'path')
      assert.deepEqual(inPath.map((p: any) => p.name).sort(), pathParams(route.url).sort(), `${key}: path parameters`)
      for (const p of inPath) assert.equal(p.required, true, `${key}: ${p.name} required`)
    }
    assert.deepEqual([...documented], [], 'no documented route the app does not have')
    // The upgrade is documented as one.
    assert.ok(doc.paths['/v1/sessions/{id}/ws'].get.responses['101'] !== undefined)
  })

  it('documents the error statuses each route answers with, as error-table bodies', () => {
    for (const route of routes) {
      const key = `${route.method} ${route.url}`
      const op = doc.paths[openapiPath(route.url)][route.method.toLowerCase()]
      const statuses = Object.keys(op.responses)
      if (route.url.startsWith('/v1/')) {
        for (const status of ['401', '403', '429']) assert.ok(statuses.includes(status), `${key} documents ${status}`)
      }
      if (route.url.startsWith('/v1/sessions/:id')) assert.ok(statuses.includes('404'), `${key} documents 404`)
      if ((op.parameters ?? []).some((p: any) => p.in === 'query') || op.requestBody !== undefined) {
        assert.ok(statuses.includes('400'), `${key} has input to refuse: documents 400`)
      }
      for (const status of statuses.filter((s) => Number(s) >= 400)) {
        const response = op.responses[status]
        if (route.url === '/readyz' && status === '503') continue // the readiness body, not an error
        const schema = response.content['application/json'].schema
        assert.deepEqual(Object.keys(schema.properties).sort(), ['code', 'message', 'statusCode'], `${key} ${status}: error body`)
        // Each code the description names answers with that status in the table.
        const named = [...(response.description as string).matchAll(/`([a-z_]+)`/g)].map((m) => m[1] as keyof typeof errorTable)
        assert.ok(named.length > 0, `${key} ${status}: names its codes`)
        for (const code of named) assert.equal(errorTable[code]?.statusCode, Number(status), `${key} ${status}: ${code}`)
      }
    }
  })

  it('says which routes need credentials as the gateway enforces it', async () => {
    const id = randomUUID()
    for (const route of routes) {
      const op = doc.paths[openapiPath(route.url)][route.method.toLowerCase()]
      const isPublic = Array.isArray(op.security) && op.security.length === 0
      const url = route.url.replace(':request_id', 'r-1').replace(':id', id)
      const res = await fetch(gw.url + url, { method: route.method })
      await res.arrayBuffer()
      if (isPublic) assert.notEqual(res.status, 401, `${route.method} ${route.url} is documented public`)
      else assert.equal(res.status, 401, `${route.method} ${route.url} is documented as needing credentials`)
    }
  })

  it('describes the session a create answers with', async () => {
    const created = await gw.createSession({ metadata: { app: 'openapi-test' } })
    const schema = doc.paths['/v1/sessions'].post.responses['201'].content['application/json'].schema
    assert.deepEqual(Object.keys(created).sort(), Object.keys(schema.properties).sort())
    assert.deepEqual(created.metadata, { app: 'openapi-test' })
    const page = await gw.request('GET', '/v1/sessions?limit=5')
    assert.equal(page.status, 200)
    assert.deepEqual(page.body.sessions[0], { ...page.body.sessions[0], id: created.id })
    await gw.request('DELETE', `/v1/sessions/${created.id}`)
  })

  it('refuses requests that break a route schema with the 400 of before, naming the first offending field', async () => {
    const id = randomUUID()
    const send = async (method: string, path: string, body?: string): Promise<{ status: number, body: any }> => {
      const res = await fetch(gw.url + path, {
        method,
        headers: { authorization: `Bearer ${TOKEN_A}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        body
      })
      return { status: res.status, body: await res.json() }
    }
    const cases: Array<[string, string, string | undefined, string]> = [
      ['POST', '/v1/sessions', '{"max_turns":0}', firstIssue(sessionOptions, { max_turns: 0 })],
      ['POST', '/v1/sessions', '{"allowed_tools":["Bash",3]}', firstIssue(sessionOptions, { allowed_tools: ['Bash', 3] })],
      ['POST', '/v1/sessions', '{"nope":1}', firstIssue(sessionOptions, { nope: 1 })],
      ['POST', '/v1/sessions', `{"metadata":${'['.repeat(MAX_JSON_DEPTH + 10)}${']'.repeat(MAX_JSON_DEPTH + 10)}}`, `nested more than ${MAX_JSON_DEPTH} levels deep`],
      ['GET', '/v1/sessions?limit=0', undefined, firstIssue(listQuery, { limit: '0' })],
      ['GET', `/v1/sessions/${id}/events?limit=abc`, undefined, firstIssue(eventsQuery, { limit: 'abc' })],
      // The query is checked before the session is looked up: 400, not 404.
      ['GET', `/v1/sessions/${id}/ws?role=admin`, undefined, firstIssue(wsQuery, { role: 'admin' })]
    ]
    for (const [method, path, body, message] of cases) {
      const res = await send(method, path, body)
      assert.equal(res.status, 400, `${method} ${path}`)
      assert.deepEqual(res.body, { statusCode: 400, code: 'bad_request', message }, `${method} ${path}`)
    }
    const answer = await send('POST', `/v1/sessions/${id}/permissions/r-1`, '{"behavior":"maybe"}')
    assert.equal(answer.status, 400)
    assert.deepEqual(Object.keys(answer.body).sort(), ['code', 'message', 'statusCode'])
    assert.equal(answer.body.code, 'bad_request')
  })
})
