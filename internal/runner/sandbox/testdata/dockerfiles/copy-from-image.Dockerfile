FROM scratch
COPY --from=registry.example.com/tools:1 /bin/x /x
