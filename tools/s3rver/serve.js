// serve.js DIR PORT_FILE ACCESS_KEY SECRET_KEY [LOG] - an S3-compatible server
// (s3rver, a fork that checks SigV4 signatures) on 127.0.0.1 at a port the
// kernel picks, written to PORT_FILE once listening; objects live in DIR.
// Requests must be signed with ACCESS_KEY / SECRET_KEY (the built-in
// S3RVER key is revoked); a bad signature is a 403 SignatureDoesNotMatch,
// and an unsigned request a 403 AccessDenied (s3rver itself lets anonymous
// requests through; a private bucket does not).
// LOG gets a line per request: METHOD PATH "RANGE" STATUS (after the
// response). Path-style URLs only (http://127.0.0.1:PORT/BUCKET/KEY). Used by
// tests/cli/test_remote_s3rver.sh; installed by tools/deps.sh (npm ci).
'use strict';
const fs = require('fs');
const S3rver = require('@20minutes/s3rver');
const AWSAccount = require('@20minutes/s3rver/lib/models/account');

const [dir, portFile, accessKey, secretKey, logFile] = process.argv.slice(2);
if (!dir || !portFile || !accessKey || !secretKey) {
  console.error('usage: node serve.js DIR PORT_FILE ACCESS_KEY SECRET_KEY [LOG]');
  process.exit(2);
}
AWSAccount.DUMMY_ACCOUNT.revokeAccessKey('S3RVER');
AWSAccount.DUMMY_ACCOUNT.createKeyPair(accessKey, secretKey);

const server = new S3rver({
  address: '127.0.0.1',
  port: 0,
  directory: dir,
  silent: false,
  vhostBuckets: false,
  allowMismatchedSignatures: false,
});
// Koa composes app.middleware when the server starts listening, so this
// check placed first runs before s3rver's own router.
server.middleware.unshift(async (ctx, next) => {
  if (logFile) {
    ctx.res.on('finish', () =>
      fs.appendFileSync(
        logFile,
        `${ctx.method} ${ctx.originalUrl} "${ctx.get('range')}" ${ctx.status}\n`,
      ),
    );
  }
  if (!ctx.get('authorization') && !('X-Amz-Algorithm' in ctx.query)) {
    ctx.status = 403;
    ctx.type = 'application/xml';
    ctx.body =
      '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>AccessDenied</Code>' +
      '<Message>Anonymous access is refused: sign the request</Message></Error>';
    return;
  }
  return next();
});
server.run().then(
  ({ port }) => {
    fs.writeFileSync(portFile + '.tmp', String(port));
    fs.renameSync(portFile + '.tmp', portFile);
  },
  (err) => {
    console.error('s3rver did not start:', err);
    process.exit(1);
  },
);
