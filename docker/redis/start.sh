#!/bin/sh
# Starts Redis for claude-gateway with users.acl (which cannot hold comments):
#   - the default user is off: a connection without AUTH can do nothing;
#   - user `cgw` reaches only keys under `cgw:` (the gateway's REDIS_PREFIX),
#     pub/sub channels under `cgw:` (the live feed), and only the commands
#     the store sends, users.acl lists them (test/integration/redis-acl.test.ts
#     runs the store under it); no KEYS, SCAN, DEL, FLUSHALL or CONFIG.
# The template's __CGW_PASSWORD_SHA256__ becomes the SHA-256 of the password
# secret, so the password itself is written nowhere. Then the image's own
# entrypoint runs (it drops to the redis user).
set -eu
password_file=${REDIS_PASSWORD_FILE:-/run/secrets/redis_password}
template=${REDIS_ACL_TEMPLATE:-/etc/redis/users.acl}
rendered=/tmp/users.acl
hash=$(tr -d '\r\n' < "$password_file" | sha256sum | cut -d' ' -f1)
umask 077
sed "s/__CGW_PASSWORD_SHA256__/$hash/" "$template" > "$rendered"
chown redis:redis "$rendered" 2>/dev/null || true
exec docker-entrypoint.sh redis-server --aclfile "$rendered" "$@"
