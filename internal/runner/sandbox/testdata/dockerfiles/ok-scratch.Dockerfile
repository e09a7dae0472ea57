FROM scratch
COPY engine /engine
ENTRYPOINT ["/engine"]
