# Multi-stage build: compile TypeScript with dev dependencies, then ship only
# the compiled gateway, production dependencies (the Claude Code CLI among
# them) and tini as PID 1, so exited CLI processes are always reaped.

FROM node:22-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci
COPY tsconfig.json ./
COPY config ./config
COPY src ./src
# `npm run build`: tsc, and the web console (src/console, bundled by esbuild into dist/console).
COPY scripts/build-if-stale.mjs scripts/build-console.mjs ./scripts/
RUN npm run build && npm prune --omit=dev

FROM node:22-bookworm-slim
# git and ripgrep are tools the CLI uses in a workspace; tini reaps zombies;
# bubblewrap and socat make the default SANDBOX=bwrap (each CLI in its own
# namespaces, network only through the gateway's egress proxy). The
# container needs user namespaces and a mountable /proc: see docs/SECURITY.md
# (seccomp/AppArmor unconfined or a custom profile, systempaths=unconfined).
RUN apt-get update \
  && apt-get install -y --no-install-recommends bubblewrap ca-certificates git ripgrep socat tini \
  && rm -rf /var/lib/apt/lists/*
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=8080 \
    DATA_DIR=/data
WORKDIR /app
COPY --from=build /app/package.json ./package.json
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY config/launchers ./config/launchers
COPY docker/healthcheck.mjs ./docker/healthcheck.mjs
RUN mkdir -p /data && chown node:node /data
USER node
VOLUME ["/data"]
EXPOSE 8080
# Readiness, not mere liveness: unhealthy when the event store does not answer
# (or events wait unsaved) and while shutting down. /readyz also says 503 when
# MAX_SESSIONS CLIs run, and a full gateway is not unhealthy, so the script reads
# /readyz's JSON (store.state, shutting_down) instead of its status code.
HEALTHCHECK --interval=30s --timeout=3s --start-period=10s --retries=3 \
  CMD ["node", "/app/docker/healthcheck.mjs"]
# HOST=0.0.0.0 needs GATEWAY_TOKENS(_FILE) or a JWT key (JWT_SECRET(_FILE)/JWT_PUBLIC_KEY(_FILE)); the gateway refuses to start without one. Prefer the _FILE forms (docker/compose.yaml).
ENTRYPOINT ["/usr/bin/tini", "--"]
# The same node flags as `npm start` (package.json; test/unit/node-flags.test.ts
# keeps them equal). Why V8's allocation-site pretenuring is off: docs/PERFORMANCE.md §17.
CMD ["node", "--no-allocation-site-pretenuring", "dist/src/server.js"]
