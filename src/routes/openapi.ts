/**
 * `GET /openapi.json`: the OpenAPI 3.1 document of every route, built by
 * @fastify/swagger from the routes' zod schemas (fastify-type-provider-zod's
 * jsonSchemaTransform). Registered before the routes (its onRoute hook must
 * see them) and without encapsulation, so it sees the whole app.
 *
 * Public like /healthz: it describes the API of this open-source gateway
 * (what docs/API.md says) and holds no secret, tenant, session or setting of
 * this deployment (no servers list, no limits from the config). The security
 * plugin's Host and Origin checks and the per-address REST rate limit still
 * apply to it.
 */
import swagger from '@fastify/swagger'
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { jsonSchemaTransform, jsonSchemaTransformObject } from 'fastify-type-provider-zod'
import { z } from 'zod'

async function openapi (app: FastifyInstance): Promise<void> {
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Claude Code gateway',
        version: 'v1',
        description: 'WebSocket relay gateway for remote Claude Code sessions. Prose reference: docs/API.md (REST), docs/PROTOCOL.md (WebSocket frames). Every error answer is `{statusCode, code, message}` with a code from the one error table.'
      },
      tags: [
        { name: 'sessions', description: 'Create, list, inspect and stop sessions' },
        { name: 'history', description: 'Recorded frames: pages, or a Server-Sent Events stream' },
        { name: 'permissions', description: 'Pending CLI control requests over HTTP' },
        { name: 'websocket', description: 'The WebSocket attach (docs/PROTOCOL.md) and its tickets' },
        { name: 'health', description: 'Liveness and readiness (public)' },
        { name: 'docs', description: 'This document (public)' },
        { name: 'console', description: 'The web console\'s page and files (public; it asks for a token: docs/CONSOLE.md)' }
      ],
      components: {
        securitySchemes: {
          bearerAuth: { type: 'http', scheme: 'bearer', description: 'A GATEWAY_TOKENS token or a JWT (docs/SECURITY.md); it names the caller\'s tenant' },
          wsTicket: { type: 'apiKey', in: 'query', name: 'ticket', description: 'Single-use ticket from POST /v1/sessions/:id/ws-ticket, for the WebSocket upgrade only' }
        }
      },
      // Every route needs a token unless its schema says `security: []`.
      security: [{ bearerAuth: [] }]
    },
    transform: jsonSchemaTransform,
    // Emits the shared schemas the routes' schemas refer to (z.json() is recursive: `metadata`, `json_schema`).
    transformObject: jsonSchemaTransformObject
  })

  let document: string | null = null
  app.get('/openapi.json', {
    schema: {
      tags: ['docs'],
      summary: 'This OpenAPI document',
      security: [],
      // Documentation only: the document goes out as text, which Fastify does not serialize.
      response: { 200: { description: 'OpenAPI 3.1 document', content: { 'application/json': { schema: z.looseObject({ openapi: z.string() }) } } } }
    }
  }, async (_request, reply) => {
    // Built once the routes are all in (the first request comes after ready), then served as text.
    document ??= JSON.stringify(app.swagger())
    return reply.type('application/json; charset=utf-8').send(document)
  })
}

export default fp(openapi, { name: 'gateway-openapi' })
