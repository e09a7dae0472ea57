FROM scratch
add \
  --chown=1:1 \
  HTTPS://example.com/x.tgz /x
